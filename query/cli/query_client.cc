#include "query/cli/query_client.h"

#include <cstdint>
#include <optional>
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
      // A collector that could not be reached fails fast (UNAVAILABLE, above); past the
      // deadline it may be one still working on a large job, which "cannot reach" denied.
      return absl::Status(
          code, absl::StrCat("no answer to ", rpc, " from the collector at ", address, " within ",
                             absl::FormatDuration(timeout),
                             " (busy with a large job, or unreachable: raise --timeout?)"));
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

absl::StatusOr<v1::GetRollupsResponse> QueryClient::GetJobRollups(const std::string& job_id,
                                                                  v1::TimelineAxis axis,
                                                                  uint64_t max_response_bytes,
                                                                  bool with_subprocesses,
                                                                  bool scalars_only) const {
  if (max_response_bytes == 0) max_response_bytes = kMaxQueryResponseBytes - (1 << 20);
  v1::GetRollupsRequest request;
  request.set_job_id(job_id);
  request.set_axis(axis);
  request.set_max_response_bytes(max_response_bytes);
  request.set_partial(true);
  request.set_with_subprocesses(with_subprocesses);
  request.set_scalars_only(scalars_only);
  v1::GetRollupsResponse out;
  for (bool first = true;; first = false) {
    absl::StatusOr<v1::GetRollupsResponse> page = GetRollups(request);
    if (!page.ok()) return page.status();
    // Pages come in rank order, each after the one before: a collector that ignored from_rank
    // would send the first ranks again, for ever.
    const int64_t last = out.ranks_size() == 0 ? -1 : out.ranks(out.ranks_size() - 1).rank();
    for (const v1::RankRollups& rank : page->ranks()) {
      if (rank.rank() < request.from_rank() || (!first && rank.rank() <= last)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the collector at ", address(), " answered GetRollups of job \"", job_id,
            "\" from rank ", request.from_rank(), " with rank ", rank.rank(),
            ": it is older than this memtrace, and the job is too big for one answer"));
      }
    }
    const std::optional<uint32_t> next =
        page->has_next_rank() ? std::optional<uint32_t>(page->next_rank()) : std::nullopt;
    if (first) {
      out = *std::move(page);
    } else {
      for (v1::RankRollups& rank : *page->mutable_ranks()) *out.add_ranks() = std::move(rank);
      out.set_bucket_ns(page->bucket_ns());
    }
    if (!next.has_value()) break;
    if (*next <= request.from_rank()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the collector at ", address(), " paged GetRollups of job \"", job_id, "\" from rank ",
          request.from_rank(), " to rank ", *next, ", not forward"));
    }
    request.set_from_rank(*next);
  }
  out.clear_next_rank();
  return out;
}

}  // namespace memtrace::cli
