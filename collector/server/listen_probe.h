// Whether the collector could bind its --listen address, asked before the store is opened: the
// store's open creates its directory and replays its write-ahead log, which can take seconds on a
// large store, and a collector started on a port another one holds should say so at once and
// leave no new directory behind.
#ifndef MEMTRACE_COLLECTOR_SERVER_LISTEN_PROBE_H_
#define MEMTRACE_COLLECTOR_SERVER_LISTEN_PROBE_H_

#include <string>

#include "absl/status/status.h"

namespace memtrace::collector {

// Binds (without listening) a TCP socket to each address `host` resolves to, on `port`, and closes
// it. OK when port is 0 (the OS picks a free one) or at least one address binds, as gRPC needs
// (for "[::]" also when 0.0.0.0 does, as gRPC falls back to it without IPv6);
// UNAVAILABLE "cannot listen on <listen>: <why>" when none does (address in use, not an address of
// this machine, host unknown). A port taken between this probe and gRPC's own bind is still
// reported by the server's start; this only makes the common case fast and side-effect free.
absl::Status ProbeListenAddress(const std::string& listen, const std::string& host, int port);

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_SERVER_LISTEN_PROBE_H_
