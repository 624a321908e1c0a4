#include "query/cli/query_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "collector/security/client_channel.h"
#include "collector/security/collector_address.h"

namespace memtrace::cli {

absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view address,
                            absl::string_view rpc, absl::Duration timeout) {
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  const std::string& message = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return absl::OkStatus();
    case grpc::StatusCode::UNAVAILABLE:
      return absl::Status(code, absl::StrCat("cannot reach collector at ", address, ": ", message));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::Status(
          code, absl::StrCat("cannot reach collector at ", address, ": no answer to ", rpc,
                             " within ", absl::FormatDuration(timeout), " (raise --timeout?)"));
    case grpc::StatusCode::UNIMPLEMENTED:
      return absl::Status(
          code, absl::StrCat("the server at ", address, " does not implement ",
                             "memtrace.v1.Query/", rpc, " (is it a memtrace collector?)"));
    default:
      return absl::Status(code,
                          message.empty() ? absl::StrCat(rpc, " failed at ", address) : message);
  }
}

absl::StatusOr<QueryClient> QueryClient::Create(std::string address, absl::Duration timeout) {
  // gRPC would dial "host:99999" on port 34463 and "host" on port 0: refuse them here.
  if (absl::Status s = security::CheckCollectorAddress("--collector", address); !s.ok()) return s;
  // TLS and the token as the environment asks (collector/security/client_channel.h).
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      security::CreateCollectorChannelFromEnv(address);
  if (!channel.ok()) return channel.status();
  return QueryClient(std::move(address), timeout, *std::move(channel));
}

QueryClient::QueryClient(std::string address, absl::Duration timeout,
                         std::shared_ptr<grpc::Channel> channel)
    : address_(std::move(address)),
      timeout_(timeout),
      channel_(std::move(channel)),
      stub_(v1::Query::NewStub(channel_)) {}

template <typename Request, typename Response, typename Method>
absl::StatusOr<Response> QueryClient::Call(absl::string_view rpc, const Request& request,
                                           Method method) const {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  Response response;
  grpc::Status status = ((*stub_).*method)(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, address_, rpc, timeout_);
  return response;
}

absl::StatusOr<v1::ListJobsResponse> QueryClient::ListJobs() const {
  return Call<v1::ListJobsRequest, v1::ListJobsResponse>("ListJobs", v1::ListJobsRequest(),
                                                         &v1::Query::Stub::ListJobs);
}

absl::StatusOr<v1::ListRanksResponse> QueryClient::ListRanks(const std::string& job_id) const {
  v1::ListRanksRequest request;
  request.set_job_id(job_id);
  return Call<v1::ListRanksRequest, v1::ListRanksResponse>("ListRanks", request,
                                                           &v1::Query::Stub::ListRanks);
}

absl::StatusOr<v1::TimelineResponse> QueryClient::Timeline(
    const v1::TimelineRequest& request) const {
  return Call<v1::TimelineRequest, v1::TimelineResponse>("Timeline", request,
                                                         &v1::Query::Stub::Timeline);
}

absl::StatusOr<v1::GetRollupsResponse> QueryClient::GetRollups(
    const v1::GetRollupsRequest& request) const {
  return Call<v1::GetRollupsRequest, v1::GetRollupsResponse>("GetRollups", request,
                                                             &v1::Query::Stub::GetRollups);
}

}  // namespace memtrace::cli
