// How the collector authenticates: TLS (optionally mutual) or plaintext on the wire, and a
// bearer token checked on every call before it reaches a service.
//
// The token check runs as a gRPC auth-metadata processor inside the transport, for plaintext
// and TLS ports alike, so no service can forget it: a call without "authorization: Bearer
// <token>" (or with another token) ends with UNAUTHENTICATED before its handler runs, so
// nothing of it is stored or answered. Standard health checking (grpc.health.v1.Health) and
// server reflection stay open: they reveal only that a collector runs and the public schema.
#ifndef MEMTRACE_COLLECTOR_SECURITY_SERVER_SECURITY_H_
#define MEMTRACE_COLLECTOR_SECURITY_SERVER_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grpc {
class ServerCredentials;
}  // namespace grpc

namespace memtrace::security {

struct ServerSecurityOptions {
  // Required bearer token; empty = calls are not authenticated.
  std::string token;
  // PEM server certificate (chain) and key; both empty = plaintext.
  std::string tls_cert_pem;
  std::string tls_key_pem;
  // PEM CA bundle: when set, clients must present a certificate it signed (mutual TLS).
  std::string tls_client_ca_pem;

  bool tls() const { return !tls_cert_pem.empty(); }
};

// Where the token may be omitted from the calls (exact method-path prefixes).
inline constexpr absl::string_view kOpenMethodPrefixes[] = {
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1alpha.ServerReflection/",
    "/grpc.reflection.v1.ServerReflection/",
};

// True for "localhost", 127.0.0.0/8 and ::1 (with or without brackets). "0.0.0.0", "[::]"
// and every other name are not loopback: they can be reached from other machines.
bool IsLoopbackHost(absl::string_view host);

// The listening policy: a non-loopback `host` needs TLS (options.tls()) or `allow_insecure`;
// INVALID_ARGUMENT saying which flags to add otherwise. Also rejects a certificate without a
// key (or the reverse) and a client CA without a certificate.
absl::Status CheckListenPolicy(absl::string_view host, const ServerSecurityOptions& options,
                               bool allow_insecure);

// Credentials for ServerBuilder::AddListeningPort implementing `options` (TLS or plaintext, plus
// the token check when options.token is set). The PEM contents are checked by gRPC when the port
// is added: a bad certificate or key makes AddListeningPort fail (port 0).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerSecurityOptions& options);

// Whether `header_value` (the "authorization" metadata) carries exactly `token` as a Bearer
// token. Compares in time independent of where the values differ.
bool BearerTokenMatches(absl::string_view header_value, absl::string_view token);

}  // namespace memtrace::security

#endif  // MEMTRACE_COLLECTOR_SECURITY_SERVER_SECURITY_H_
