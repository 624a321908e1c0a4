#include "collector/security/server_security.h"

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpcpp/security/server_credentials.h"

namespace memtrace::security {

namespace {

constexpr absl::string_view kBearer = "Bearer ";

absl::string_view SliceView(const grpc_slice& s) {
  return absl::string_view(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(s)),
                           GRPC_SLICE_LENGTH(s));
}

// What the core auth processor needs: the token, and whether a refusal was already logged (the
// first one is printed so an operator sees misconfigured agents; later ones would flood stderr).
struct TokenCheck {
  std::string token;
  std::atomic<bool> logged{false};
  std::atomic<uint64_t> refused{0};
};

// Runs in gRPC's transport for every incoming call, before any handler. Never blocks.
void ProcessAuthMetadata(void* state, grpc_auth_context* /*context*/, const grpc_metadata* md,
                         size_t num_md, grpc_process_auth_metadata_done_cb cb, void* user_data) {
  auto* check = static_cast<TokenCheck*>(state);
  absl::string_view path;
  const grpc_metadata* authorization = nullptr;
  for (size_t i = 0; i < num_md; ++i) {
    const absl::string_view key = SliceView(md[i].key);
    if (key == ":path") path = SliceView(md[i].value);
    if (key == "authorization") authorization = &md[i];
  }
  for (absl::string_view open : kOpenMethodPrefixes) {
    if (absl::StartsWith(path, open)) {
      cb(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_OK, nullptr);
      return;
    }
  }
  if (authorization != nullptr && BearerTokenMatches(SliceView(authorization->value), check->token)) {
    // Consumed: the handlers never see the secret.
    cb(user_data, authorization, 1, nullptr, 0, GRPC_STATUS_OK, nullptr);
    return;
  }
  const char* why = authorization == nullptr
                        ? "memtrace collector: missing bearer token (set MEMTRACE_TOKEN or "
                          "MEMTRACE_TOKEN_FILE)"
                        : "memtrace collector: wrong bearer token";
  check->refused.fetch_add(1, std::memory_order_relaxed);
  if (!check->logged.exchange(true)) {
    std::fprintf(stderr, "memtrace-collector: refused a call to %.*s: %s (logged once)\n",
                 static_cast<int>(path.size()), path.data(), why);
  }
  cb(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_UNAUTHENTICATED, why);
}

void DestroyTokenCheck(void* state) { delete static_cast<TokenCheck*>(state); }

// ServerCredentials built from gRPC core's, so that the token processor can be attached to
// plaintext ports too (the C++ InsecureServerCredentials() refuses processors).
class CollectorServerCredentials final : public grpc::ServerCredentials {
 public:
  explicit CollectorServerCredentials(ServerSecurityOptions options)
      : options_(std::move(options)) {}

  // The token processor is built in; another one cannot be combined with it.
  void SetAuthMetadataProcessor(const std::shared_ptr<grpc::AuthMetadataProcessor>&) override {
    std::fprintf(stderr, "memtrace-collector: SetAuthMetadataProcessor ignored\n");
  }

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    grpc_server_credentials* creds = nullptr;
    if (options_.tls()) {
      grpc_ssl_pem_key_cert_pair pair = {options_.tls_key_pem.c_str(),
                                         options_.tls_cert_pem.c_str()};
      const bool mutual = !options_.tls_client_ca_pem.empty();
      creds = grpc_ssl_server_credentials_create_ex(
          mutual ? options_.tls_client_ca_pem.c_str() : nullptr, &pair, 1,
          mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                 : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
          nullptr);
    } else {
      creds = grpc_insecure_server_credentials_create();
    }
    if (creds == nullptr) return 0;
    if (!options_.token.empty()) {
      auto check = std::make_unique<TokenCheck>();
      check->token = options_.token;
      // Owned by the core credentials from here on: they call DestroyTokenCheck.
      grpc_server_credentials_set_auth_metadata_processor(
          creds,
          grpc_auth_metadata_processor{ProcessAuthMetadata, DestroyTokenCheck, check.release()});
    }
    const int port = grpc_server_add_http2_port(server, addr.c_str(), creds);
    grpc_server_credentials_release(creds);
    return port;
  }

  const ServerSecurityOptions options_;
};

}  // namespace

bool BearerTokenMatches(absl::string_view header_value, absl::string_view token) {
  if (token.empty() || !absl::StartsWith(header_value, kBearer)) return false;
  const absl::string_view given = header_value.substr(kBearer.size());
  // Length is not secret (the server's token length is fixed); content is compared fully.
  if (given.size() != token.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < token.size(); ++i) diff |= given[i] ^ token[i];
  return diff == 0;
}

bool IsLoopbackHost(absl::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (absl::EqualsIgnoreCase(host, "localhost") || host == "::1" ||
      absl::EqualsIgnoreCase(host, "0:0:0:0:0:0:0:1")) {
    return true;
  }
  std::vector<absl::string_view> octets = absl::StrSplit(host, '.');
  if (octets.size() != 4) return false;
  for (absl::string_view o : octets) {
    int v = 0;
    if (o.empty() || !absl::SimpleAtoi(o, &v) || v < 0 || v > 255) return false;
  }
  return octets[0] == "127";
}

absl::Status CheckListenPolicy(absl::string_view host, const ServerSecurityOptions& options,
                               bool allow_insecure) {
  if (options.tls_cert_pem.empty() != options.tls_key_pem.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both --tls_cert and --tls_key (only one was given)");
  }
  if (!options.tls_client_ca_pem.empty() && !options.tls()) {
    return absl::InvalidArgumentError(
        "--tls_client_ca (mutual TLS) needs --tls_cert and --tls_key");
  }
  if (IsLoopbackHost(host) || options.tls() || allow_insecure) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "listening on \"", host, "\" (reachable from other machines) needs TLS: pass --tls_cert "
      "and --tls_key (and --tls_client_ca for mutual TLS), or --insecure to accept plaintext "
      "on purpose"));
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerSecurityOptions& options) {
  if (options.tls_cert_pem.empty() != options.tls_key_pem.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate and a key");
  }
  if (!options.token.empty()) {
    for (char c : options.token) {
      if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
        return absl::InvalidArgumentError("the token has a space, control or non-ASCII byte");
      }
    }
  }
  return std::shared_ptr<grpc::ServerCredentials>(
      std::make_shared<CollectorServerCredentials>(options));
}

}  // namespace memtrace::security
