// How a client (the agent's Transport, the memtrace CLI, tests) reaches a collector: TLS when a
// CA is configured, the bearer token on every call, from the same environment variables
// everywhere:
//   MEMTRACE_TOKEN        the token itself
//   MEMTRACE_TOKEN_FILE   a file holding it (used when MEMTRACE_TOKEN is unset)
//   MEMTRACE_TLS_CA       PEM CA bundle that signed the collector's certificate: turns TLS on
//   MEMTRACE_TLS_CERT, MEMTRACE_TLS_KEY   PEM client certificate and key (mutual TLS)
//   MEMTRACE_TLS_SERVER_NAME   name to verify in the collector's certificate when it differs
//                              from the host in the address (e.g. connecting by IP)
#ifndef MEMTRACE_COLLECTOR_SECURITY_CLIENT_CHANNEL_H_
#define MEMTRACE_COLLECTOR_SECURITY_CLIENT_CHANNEL_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/channel_arguments.h"

namespace memtrace::connect {

struct ClientSecurity {
  // Sent as "authorization: Bearer <token>" on every call; empty = none.
  std::string token;
  // PEM contents (not paths). tls_ca_pem empty = plaintext.
  std::string tls_ca_pem;
  std::string tls_cert_pem;
  std::string tls_key_pem;
  std::string tls_server_name;

  bool tls() const { return !tls_ca_pem.empty(); }
};

// Looks up an environment variable; nullptr when unset. Tests pass their own.
using EnvLookup = std::function<const char*(const char* name)>;

// Reads the variables above (through `env`, std::getenv by default) and the files they name.
// Unset variables leave the defaults (no token, plaintext). Errors name the variable and file:
// an unreadable MEMTRACE_TOKEN_FILE, a non-PEM MEMTRACE_TLS_CA, a client certificate without
// its key, or TLS client files without MEMTRACE_TLS_CA.
absl::StatusOr<ClientSecurity> ClientSecurityFromEnv(const EnvLookup& env = {});

// A channel to `target` ("host:port" or any gRPC target) with `security` applied: TLS
// credentials (or plaintext) and an interceptor that adds the token to every call's metadata
// (on plaintext channels too, where gRPC would refuse call credentials). Nothing is contacted
// until the first call. `args` carries the caller's own settings (message sizes, keepalive).
std::shared_ptr<grpc::Channel> CreateCollectorChannel(const std::string& target,
                                                      const ClientSecurity& security,
                                                      grpc::ChannelArguments args = {});

// CreateCollectorChannel with what ClientSecurityFromEnv() reads from the process environment:
// for commands that open one channel.
absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateCollectorChannelFromEnv(
    const std::string& target, grpc::ChannelArguments args = {});

// CreateCollectorChannel with `security`, as a factory: for the agent's Transport, which opens a
// channel again on every reconnect (TransportOptions::channel_factory).
using CollectorChannelFactory = std::function<std::shared_ptr<grpc::Channel>(
    const std::string& target, const grpc::ChannelArguments& args)>;
CollectorChannelFactory ChannelFactoryFor(ClientSecurity security);

}  // namespace memtrace::connect

#endif  // MEMTRACE_COLLECTOR_SECURITY_CLIENT_CHANNEL_H_
