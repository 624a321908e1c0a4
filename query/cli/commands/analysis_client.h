// A client of the collector's memtrace.v1.Analysis service for the analysis subcommands. Like
// QueryClient, every failure becomes an absl::Status with a one-line message in the user's terms
// (the collector's own NOT_FOUND message, or "cannot reach collector at ..."). Its channel accepts
// responses up to kMaxAnalysisResponseBytes: reports of large jobs (1024 ranks x many tags, a live
// set listing every other rank) exceed gRPC's default 4 MiB.
#ifndef MEMTRACE_QUERY_CLI_COMMANDS_ANALYSIS_CLIENT_H_
#define MEMTRACE_QUERY_CLI_COMMANDS_ANALYSIS_CLIENT_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/memtrace/v1/analysis.grpc.pb.h"
#include "query/cli/service_caller.h"

namespace memtrace::cli {

inline constexpr int kMaxAnalysisResponseBytes = 1 << 30;

class AnalysisClient {
 public:
  // Prepares a channel to `address` (host:port); nothing is contacted until the first call.
  // Each call waits at most `timeout`. INVALID_ARGUMENT for an empty address.
  static absl::StatusOr<AnalysisClient> Create(std::string address, absl::Duration timeout);

  // One per RPC of the service. Thread-safe (gRPC stubs are).
  absl::StatusOr<v1::DivergenceReport> Diverged(const v1::DivergedRequest& request) const;
  absl::StatusOr<v1::GrowthReport> Growth(const v1::GrowthRequest& request) const;
  absl::StatusOr<v1::LeakReport> Leaks(const v1::LeaksRequest& request) const;
  absl::StatusOr<v1::LiveReport> Live(const v1::LiveRequest& request) const;
  absl::StatusOr<v1::PeakReport> Peak(const v1::PeakRequest& request) const;
  absl::StatusOr<v1::HeadroomReport> Headroom(const v1::HeadroomRequest& request) const;
  absl::StatusOr<v1::CompareReport> Compare(const v1::CompareRequest& request) const;

  const std::string& address() const { return caller_.address(); }

 private:
  explicit AnalysisClient(ServiceCaller<v1::Analysis> caller) : caller_(std::move(caller)) {}

  ServiceCaller<v1::Analysis> caller_;
};

// The gRPC failure of Analysis/`rpc` at `address` as an absl::Status (see FromGrpcStatus in
// query_client.h); UNIMPLEMENTED names the Analysis service (a collector without it is older
// than the analyses).
absl::Status FromAnalysisStatus(const grpc::Status& status, absl::string_view address,
                                absl::string_view rpc, absl::Duration timeout);

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_COMMANDS_ANALYSIS_CLIENT_H_
