#include "query/cli/query_client.h"

#include <algorithm>
#include <functional>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

namespace memtrace::cli {
namespace {

// The collector's refusal of an answer past max_response_bytes (not gRPC's own of a message
// past the channel's limit, which asking again would only repeat).
bool TooBigForOneAnswer(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted &&
         absl::StrContains(status.message(), "max_response_bytes");
}

}  // namespace

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

absl::StatusOr<v1::GetRollupsResponse> QueryClient::GetJobRollups(
    const std::string& job_id, v1::TimelineAxis axis, uint64_t max_response_bytes) const {
  if (max_response_bytes == 0) max_response_bytes = kMaxQueryResponseBytes - (1 << 20);
  v1::GetRollupsRequest request;
  request.set_job_id(job_id);
  request.set_axis(axis);
  request.set_max_response_bytes(max_response_bytes);
  absl::StatusOr<v1::GetRollupsResponse> whole = GetRollups(request);
  if (whole.ok() || !TooBigForOneAnswer(whole.status())) return whole;

  absl::StatusOr<v1::ListRanksResponse> listed = ListRanks(job_id);
  if (!listed.ok()) return listed.status();
  std::set<uint32_t> distinct;
  for (const v1::RankSummary& r : listed->ranks()) distinct.insert(r.rank());
  const std::vector<uint32_t> ranks(distinct.begin(), distinct.end());
  // No ranks to divide (an empty selection is every rank): the refusal stands.
  if (ranks.empty()) return whole.status();
  v1::GetRollupsResponse out;
  // Halves until each part fits; parts come back in rank order, as one answer would.
  std::function<absl::Status(absl::Span<const uint32_t>)> fetch =
      [&](absl::Span<const uint32_t> part) -> absl::Status {
    request.mutable_ranks()->Assign(part.begin(), part.end());
    absl::StatusOr<v1::GetRollupsResponse> got = GetRollups(request);
    if (!got.ok()) {
      if (!TooBigForOneAnswer(got.status())) return got.status();
      if (part.size() == 1) {
        return absl::ResourceExhaustedError(
            absl::StrCat("the rollups of rank ", part[0], " of job \"", job_id, "\" alone exceed ",
                         max_response_bytes, " bytes, the most one answer may hold"));
      }
      const size_t half = part.size() / 2;
      if (absl::Status s = fetch(part.subspan(0, half)); !s.ok()) return s;
      return fetch(part.subspan(half));
    }
    for (v1::RankRollups& rank : *got->mutable_ranks()) {
      if (std::find(part.begin(), part.end(), rank.rank()) == part.end()) {
        return absl::FailedPreconditionError(
            absl::StrCat("the collector at ", address(),
                         " answered GetRollups for ranks it was not asked for: "
                         "it is older than this memtrace, and job \"",
                         job_id, "\" is too big for one answer"));
      }
      *out.add_ranks() = std::move(rank);
    }
    out.set_bucket_ns(got->bucket_ns());
    return absl::OkStatus();
  };
  if (absl::Status s = fetch(ranks); !s.ok()) return s;
  return out;
}

}  // namespace memtrace::cli
