// A client of the collector's memtrace.v1.Query service that turns every gRPC failure into an
// absl::Status whose one-line message says what went wrong in the user's terms ("cannot reach
// collector at 127.0.0.1:7431: ...", or the collector's own NOT_FOUND message).
#ifndef MEMTRACE_QUERY_CLI_QUERY_CLIENT_H_
#define MEMTRACE_QUERY_CLI_QUERY_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/memtrace/v1/query.grpc.pb.h"
#include "query/cli/service_caller.h"

namespace memtrace::cli {

// The largest answer a QueryClient takes. GetRollups of a whole job is 7.6 MB already at 16
// ranks x 2000 steps, past gRPC's default 4 MiB, and it grows with ranks x steps x tags
// (GetJobRollups pages by ranks past this).
inline constexpr int kMaxQueryResponseBytes = 1 << 30;

class QueryClient {
 public:
  // Prepares a channel to `address` (host:port); nothing is contacted until the first call.
  // Each call waits at most `timeout`. INVALID_ARGUMENT for an empty address.
  static absl::StatusOr<QueryClient> Create(std::string address, absl::Duration timeout);

  // Thread-safe (gRPC stubs are).
  absl::StatusOr<v1::ListJobsResponse> ListJobs() const;
  absl::StatusOr<v1::ListRanksResponse> ListRanks(const std::string& job_id) const;
  absl::StatusOr<v1::TimelineResponse> Timeline(const v1::TimelineRequest& request) const;
  absl::StatusOr<v1::GetRollupsResponse> GetRollups(const v1::GetRollupsRequest& request) const;
  // Every rank's rollups of `job_id` on `axis`, in as many GetRollups calls as it takes for each
  // answer to stay within `max_response_bytes`: the collector answers with the whole ranks that
  // fit and where to go on (GetRollupsRequest.partial), a rank with all its attempts being the
  // smallest page. Each page is read at its own moment: of a job still running, later pages
  // are newer. RESOURCE_EXHAUSTED when one rank alone does not fit; FAILED_PRECONDITION from a
  // collector that does not page forward. 0 bytes: the default.
  // `with_subprocesses`: the ranks' subprocesses too (GetRollupsRequest.with_subprocesses);
  // `scalars_only`: the rows without their group lists (GetRollupsRequest.scalars_only).
  absl::StatusOr<v1::GetRollupsResponse> GetJobRollups(
      const std::string& job_id, v1::TimelineAxis axis,
      uint64_t max_response_bytes = kMaxQueryResponseBytes - (1 << 20),
      bool with_subprocesses = false, bool scalars_only = false) const;

  const std::string& address() const { return caller_.address(); }

 private:
  explicit QueryClient(ServiceCaller<v1::Query> caller) : caller_(std::move(caller)) {}

  ServiceCaller<v1::Query> caller_;
};

// Maps the gRPC status of a failed call `rpc` to `address` into an absl::Status with the same
// code and a message naming the collector when the failure is about reaching it (UNAVAILABLE,
// DEADLINE_EXCEEDED, UNIMPLEMENTED); otherwise the collector's own message is kept.
absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view address,
                            absl::string_view rpc, absl::Duration timeout);

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_QUERY_CLIENT_H_
