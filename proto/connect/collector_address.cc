#include "proto/connect/collector_address.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace memtrace::connect {
namespace {

absl::Status Bad(absl::string_view what, const std::string& address, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(what, "='", address, "': ", why));
}

// Targets gRPC resolves by scheme rather than as host:port: "scheme://..." or one of the
// schemes gRPC also takes without slashes ("dns:host:port", "unix:/path"). A bare host named
// like a scheme ("dns:7431") is a host:port, since a port follows its colon.
bool HasScheme(const std::string& address) {
  if (absl::StrContains(address, "://")) return true;
  for (absl::string_view scheme : {"dns:", "unix:", "unix-abstract:", "ipv4:", "ipv6:", "vsock:"}) {
    if (!absl::StartsWith(address, scheme)) continue;
    const absl::string_view rest = absl::string_view(address).substr(scheme.size());
    return !std::all_of(rest.begin(), rest.end(),
                        [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); });
  }
  return false;
}

absl::StatusOr<std::pair<std::string, int>> ParseHostPort(absl::string_view what,
                                                          const std::string& address,
                                                          int min_port) {
  const size_t colon = address.rfind(':');
  // "[::1]" has colons but no port.
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size() ||
      address.back() == ']') {
    return Bad(what, address, "expected host:port");
  }
  const std::string host = address.substr(0, colon);
  if (host.find(':') != std::string::npos && (host.front() != '[' || host.back() != ']')) {
    return Bad(what, address, "write IPv6 hosts in brackets, e.g. [::1]:7431");
  }
  if (host == "[]") return Bad(what, address, "expected host:port");
  // Digits only: SimpleAtoi would also take "+7431", " 7431" and "-1".
  const absl::string_view digits = absl::string_view(address).substr(colon + 1);
  int port = 0;
  if (digits.size() > 5 ||
      !std::all_of(digits.begin(), digits.end(),
                   [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) ||
      !absl::SimpleAtoi(digits, &port) || port < min_port || port > 65535) {
    return Bad(what, address, absl::StrCat("port must be ", min_port, "..65535"));
  }
  return std::make_pair(host, port);
}

absl::Status CheckNoWhitespace(absl::string_view what, const std::string& address) {
  for (char c : address) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      return Bad(what, address, "contains whitespace");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::pair<std::string, int>> SplitHostPort(absl::string_view what,
                                                          const std::string& address) {
  // " 127.0.0.1:7431" would otherwise reach the listen policy as a host that is not loopback.
  if (absl::Status s = CheckNoWhitespace(what, address); !s.ok()) return s;
  return ParseHostPort(what, address, 0);
}

absl::Status CheckCollectorAddress(absl::string_view what, const std::string& address) {
  if (address.empty()) return Bad(what, address, "empty (expected host:port)");
  if (absl::Status s = CheckNoWhitespace(what, address); !s.ok()) return s;
  if (HasScheme(address)) return absl::OkStatus();
  return ParseHostPort(what, address, 1).status();
}

}  // namespace memtrace::connect
