#include "query/cli/commands/analysis_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "collector/security/client_channel.h"
#include "collector/security/collector_address.h"
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
  // gRPC would dial "host:99999" on port 34463 and "host" on port 0: refuse them here.
  if (absl::Status s = security::CheckCollectorAddress("--collector", address); !s.ok()) return s;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxAnalysisResponseBytes);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      security::CreateCollectorChannelFromEnv(address, args);
  if (!channel.ok()) return channel.status();
  return AnalysisClient(std::move(address), timeout, *std::move(channel));
}

AnalysisClient::AnalysisClient(std::string address, absl::Duration timeout,
                               std::shared_ptr<grpc::Channel> channel)
    : address_(std::move(address)),
      timeout_(timeout),
      channel_(std::move(channel)),
      stub_(v1::Analysis::NewStub(channel_)) {}

template <typename Request, typename Response, typename Method>
absl::StatusOr<Response> AnalysisClient::Call(absl::string_view rpc, const Request& request,
                                              Method method) const {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  Response response;
  grpc::Status status = ((*stub_).*method)(&context, request, &response);
  if (!status.ok()) return FromAnalysisStatus(status, address_, rpc, timeout_);
  return response;
}

absl::StatusOr<v1::DivergenceReport> AnalysisClient::Diverged(
    const v1::DivergedRequest& request) const {
  return Call<v1::DivergedRequest, v1::DivergenceReport>("Diverged", request,
                                                         &v1::Analysis::Stub::Diverged);
}

absl::StatusOr<v1::GrowthReport> AnalysisClient::Growth(const v1::GrowthRequest& request) const {
  return Call<v1::GrowthRequest, v1::GrowthReport>("Growth", request, &v1::Analysis::Stub::Growth);
}

absl::StatusOr<v1::LeakReport> AnalysisClient::Leaks(const v1::LeaksRequest& request) const {
  return Call<v1::LeaksRequest, v1::LeakReport>("Leaks", request, &v1::Analysis::Stub::Leaks);
}

absl::StatusOr<v1::LiveReport> AnalysisClient::Live(const v1::LiveRequest& request) const {
  return Call<v1::LiveRequest, v1::LiveReport>("Live", request, &v1::Analysis::Stub::Live);
}

absl::StatusOr<v1::PeakReport> AnalysisClient::Peak(const v1::PeakRequest& request) const {
  return Call<v1::PeakRequest, v1::PeakReport>("Peak", request, &v1::Analysis::Stub::Peak);
}

absl::StatusOr<v1::HeadroomReport> AnalysisClient::Headroom(
    const v1::HeadroomRequest& request) const {
  return Call<v1::HeadroomRequest, v1::HeadroomReport>("Headroom", request,
                                                       &v1::Analysis::Stub::Headroom);
}

absl::StatusOr<v1::CompareReport> AnalysisClient::Compare(const v1::CompareRequest& request) const {
  return Call<v1::CompareRequest, v1::CompareReport>("Compare", request,
                                                     &v1::Analysis::Stub::Compare);
}

}  // namespace memtrace::cli
