#include "query/cli/commands/analysis_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "query/cli/query_client.h"

namespace memtrace::cli {

absl::Status FromAnalysisStatus(const grpc::Status& status, absl::string_view address,
                                absl::string_view rpc, absl::Duration timeout) {
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    return absl::UnimplementedError(
        absl::StrCat("the server at ", address, " does not implement memtrace.v1.Analysis/", rpc,
                     " (a memtrace collector without the analyses, or not a memtrace collector)"));
  }
  if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    return absl::ResourceExhaustedError(
        absl::StrCat(rpc, " answer from ", address, " is too large: ", status.error_message()));
  }
  return FromGrpcStatus(status, address, rpc, timeout);
}

absl::StatusOr<AnalysisClient> AnalysisClient::Create(std::string address, absl::Duration timeout) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxAnalysisResponseBytes);
  absl::StatusOr<ServiceCaller<v1::Analysis>> caller =
      ServiceCaller<v1::Analysis>::Create(std::move(address), timeout, args, &FromAnalysisStatus);
  if (!caller.ok()) return caller.status();
  return AnalysisClient(*std::move(caller));
}

absl::StatusOr<v1::DivergenceReport> AnalysisClient::Diverged(
    const v1::DivergedRequest& request) const {
  return caller_.Call("Diverged", request, &v1::Analysis::Stub::Diverged);
}

absl::StatusOr<v1::GrowthReport> AnalysisClient::Growth(const v1::GrowthRequest& request) const {
  return caller_.Call("Growth", request, &v1::Analysis::Stub::Growth);
}

absl::StatusOr<v1::LeakReport> AnalysisClient::Leaks(const v1::LeaksRequest& request) const {
  return caller_.Call("Leaks", request, &v1::Analysis::Stub::Leaks);
}

absl::StatusOr<v1::LiveReport> AnalysisClient::Live(const v1::LiveRequest& request) const {
  return caller_.Call("Live", request, &v1::Analysis::Stub::Live);
}

absl::StatusOr<v1::PeakReport> AnalysisClient::Peak(const v1::PeakRequest& request) const {
  return caller_.Call("Peak", request, &v1::Analysis::Stub::Peak);
}

absl::StatusOr<v1::HeadroomReport> AnalysisClient::Headroom(
    const v1::HeadroomRequest& request) const {
  return caller_.Call("Headroom", request, &v1::Analysis::Stub::Headroom);
}

absl::StatusOr<v1::CompareReport> AnalysisClient::Compare(const v1::CompareRequest& request) const {
  return caller_.Call("Compare", request, &v1::Analysis::Stub::Compare);
}

}  // namespace memtrace::cli
