// A short reachability check of a collector before a job starts, and while it runs: the
// standard gRPC health service (grpc.health.v1.Health/Check) for memtrace.v1.Ingest, which the
// collector registers. Called without generated health stubs (Debian ships none): the request
// and response are two tiny protobuf messages encoded by hand.
#ifndef MEMTRACE_TOOLS_LAUNCH_HEALTH_CHECK_H_
#define MEMTRACE_TOOLS_LAUNCH_HEALTH_CHECK_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace memtrace::launch {

// OK when the collector at `address` (host:port or any gRPC target) answers SERVING for the
// Ingest service within `timeout`. UNAVAILABLE / DEADLINE_EXCEEDED naming the address when it
// cannot be reached; FAILED_PRECONDITION when something answers but not as a serving collector
// (NOT_SERVING, or no health service). Blocks the caller at most about `timeout`; thread-safe.
absl::Status CheckCollector(const std::string& address, absl::Duration timeout);

}  // namespace memtrace::launch

#endif  // MEMTRACE_TOOLS_LAUNCH_HEALTH_CHECK_H_
