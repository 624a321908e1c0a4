#include "query/cli/query_client.h"

#include <utility>

#include "absl/strings/str_cat.h"

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
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxQueryResponseBytes);
  absl::StatusOr<ServiceCaller<v1::Query>> caller =
      ServiceCaller<v1::Query>::Create(std::move(address), timeout, args, &FromGrpcStatus);
  if (!caller.ok()) return caller.status();
  return QueryClient(*std::move(caller));
}

absl::StatusOr<v1::ListJobsResponse> QueryClient::ListJobs() const {
  return caller_.Call("ListJobs", v1::ListJobsRequest(), &v1::Query::Stub::ListJobs);
}

absl::StatusOr<v1::ListRanksResponse> QueryClient::ListRanks(const std::string& job_id) const {
  v1::ListRanksRequest request;
  request.set_job_id(job_id);
  return caller_.Call("ListRanks", request, &v1::Query::Stub::ListRanks);
}

absl::StatusOr<v1::TimelineResponse> QueryClient::Timeline(
    const v1::TimelineRequest& request) const {
  return caller_.Call("Timeline", request, &v1::Query::Stub::Timeline);
}

absl::StatusOr<v1::GetRollupsResponse> QueryClient::GetRollups(
    const v1::GetRollupsRequest& request) const {
  return caller_.Call("GetRollups", request, &v1::Query::Stub::GetRollups);
}

}  // namespace memtrace::cli
