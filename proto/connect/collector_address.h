// Addresses of a collector, checked the same way wherever one is given: what the collector
// listens on (--listen) and what clients dial (the CLI's and simulator's --collector, the agent's
// MEMTRACE_COLLECTOR). gRPC takes "host:99999" or "host" without complaint and dials a port
// nobody meant (99999 wraps to 34463, a missing port is 0), so a bad address must be refused
// before it reaches a channel.
#ifndef MEMTRACE_COLLECTOR_SECURITY_COLLECTOR_ADDRESS_H_
#define MEMTRACE_COLLECTOR_SECURITY_COLLECTOR_ADDRESS_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memtrace::connect {

// Splits "HOST:PORT" (or "[v6]:PORT", brackets kept in the host) into host and a port in
// 0..65535. INVALID_ARGUMENT "<what>='<address>': <why>" otherwise, e.g.
// "--collector='127.0.0.1:99999': port must be 0..65535".
absl::StatusOr<std::pair<std::string, int>> SplitHostPort(absl::string_view what,
                                                          const std::string& address);

// An address a client may dial: HOST:PORT as SplitHostPort reads it with a port in 1..65535
// (port 0 only means something to a listener), or a gRPC target with a scheme (dns:///...,
// unix:/path, ipv4:..., ipv6:...), which gRPC parses itself. Errors as SplitHostPort's, naming
// `what` (the flag or variable) and the address.
absl::Status CheckCollectorAddress(absl::string_view what, const std::string& address);

}  // namespace memtrace::connect

#endif  // MEMTRACE_COLLECTOR_SECURITY_COLLECTOR_ADDRESS_H_
