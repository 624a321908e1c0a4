// absl::Status <-> grpc::Status at the RPC edge. The numeric codes of the two are the same
// (both follow google.rpc.Code), so the conversion keeps code and message.
#ifndef MEMTRACE_COLLECTOR_SERVER_STATUS_UTIL_H_
#define MEMTRACE_COLLECTOR_SERVER_STATUS_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace memtrace::collector {

// `prefix` (may be empty) is prepended to the message, e.g. "batch rejected: ".
inline grpc::Status ToGrpcStatus(const absl::Status& s, absl::string_view prefix = "") {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(prefix) + std::string(s.message()));
}

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_SERVER_STATUS_UTIL_H_
