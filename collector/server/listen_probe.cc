#include "collector/server/listen_probe.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace memtrace::collector {
namespace {

struct AddrinfoDeleter {
  void operator()(addrinfo* info) const { freeaddrinfo(info); }
};

// The errno of binding one resolved address, 0 when it bound.
int TryBind(const addrinfo& address) {
  const int fd = socket(address.ai_family, address.ai_socktype, address.ai_protocol);
  if (fd < 0) return errno;
  // As gRPC's listener does, so that a port in TIME_WAIT from a collector just stopped is free.
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const int error = bind(fd, address.ai_addr, address.ai_addrlen) == 0 ? 0 : errno;
  close(fd);
  return error;
}

}  // namespace

absl::Status ProbeListenAddress(const std::string& listen, const std::string& host, int port) {
  if (port == 0) return absl::OkStatus();
  absl::string_view name = host;
  // "[::]" and "[::1]": getaddrinfo wants the address without brackets.
  if (absl::ConsumePrefix(&name, "[")) absl::ConsumeSuffix(&name, "]");
  // gRPC serves the IPv6 wildcard on IPv4 alone where IPv6 is disabled (ipv6.disable=1).
  if (name == "::" && ProbeListenAddress(listen, "0.0.0.0", port).ok()) return absl::OkStatus();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = absl::StrCat(port);
  const int gai = getaddrinfo(name.empty() ? nullptr : std::string(name).c_str(), service.c_str(),
                              &hints, &found);
  if (gai != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", listen, ": ", gai_strerror(gai)));
  }
  std::unique_ptr<addrinfo, AddrinfoDeleter> addresses(found);
  int first_error = 0;
  for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
    const int error = TryBind(*a);
    if (error == 0) return absl::OkStatus();
    if (first_error == 0) first_error = error;
  }
  std::string why = absl::AsciiStrToLower(std::strerror(first_error));
  if (first_error == EADDRINUSE) absl::StrAppend(&why, " (another collector?)");
  return absl::UnavailableError(absl::StrCat("cannot listen on ", listen, ": ", why));
}

}  // namespace memtrace::collector
