#include "collector/server/query_service.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collector/server/status_util.h"
#include "proto/codec/batch_codec.h"
#include "query/analysis/timeline.h"
#include "query/analysis/units.h"

namespace memtrace::collector {

namespace {

// The most GetRollups answers with: the memtrace CLI takes 1 GiB, and protobuf serializes no
// message past 2 GiB.
constexpr uint64_t kMaxRollupsBytes = uint64_t{1} << 30;

grpc::Status RequireJob(const std::string& job_id) {
  if (!job_id.empty()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job_id is empty");
}

RollupAxis AxisOf(v1::TimelineAxis axis) {
  return axis == v1::TIMELINE_AXIS_TIME ? RollupAxis::kTime : RollupAxis::kStep;
}

}  // namespace

grpc::Status QueryService::ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*,
                                    v1::ListJobsResponse* response) {
  absl::StatusOr<std::vector<v1::JobSummary>> jobs = store_->ListJobs();
  if (!jobs.ok()) return ToGrpcStatus(jobs.status());
  for (v1::JobSummary& j : *jobs) *response->add_jobs() = std::move(j);
  return grpc::Status::OK;
}

grpc::Status QueryService::ListRanks(grpc::ServerContext*, const v1::ListRanksRequest* request,
                                     v1::ListRanksResponse* response) {
  if (grpc::Status s = RequireJob(request->job_id()); !s.ok()) return s;
  absl::StatusOr<std::vector<v1::RankSummary>> ranks = store_->ListRanks(request->job_id());
  if (!ranks.ok()) return ToGrpcStatus(ranks.status());
  for (v1::RankSummary& r : *ranks) *response->add_ranks() = std::move(r);
  return grpc::Status::OK;
}

grpc::Status QueryService::Timeline(grpc::ServerContext*, const v1::TimelineRequest* request,
                                    v1::TimelineResponse* response) {
  if (grpc::Status s = RequireJob(request->job_id()); !s.ok()) return s;
  std::vector<uint32_t> only_ranks(request->ranks().begin(), request->ranks().end());
  if (request->has_rank()) only_ranks.push_back(request->rank());
  int64_t bucket_ns = 0;
  v1::RankTimelineProto* out = nullptr;
  // A rank's last step is open: its end is its latest event, inside the row, where a closed
  // step's end is the next step's start, outside it. A step row that ends exactly where the
  // window starts waits here and is kept only when no row follows it on its rank.
  std::optional<v1::TimelinePoint> ends_at_from;
  // Whether the rank's agent is connected, and whether its last row visited so far was kept.
  bool rank_in_progress = false;
  bool last_row_kept = false;
  // Every row's start, shown or not, and the last one's end: whether an ended stream stopped
  // inside its last step.
  std::vector<int64_t> starts;
  int64_t last_end_ns = 0;
  auto finish_rank = [&] {
    if (ends_at_from.has_value() && out != nullptr) *out->add_points() = std::move(*ends_at_from);
    ends_at_from.reset();
    if (out == nullptr) return;
    out->set_last_point_in_progress(rank_in_progress && last_row_kept);
    out->set_last_point_cut_short(!rank_in_progress && last_row_kept &&
                                  request->axis() != v1::TIMELINE_AXIS_TIME &&
                                  analysis::EndedWithinItsLastStep(starts, last_end_ns));
  };
  // The scalars only (a timeline shows no tags): from the series family where a stream has
  // one, a fraction of the full rows' bytes.
  absl::Status visited = store_->VisitRollups(
      request->job_id(), AxisOf(request->axis()), RollupDetail::kScalars, &bucket_ns,
      [&](const v1::RankRollups& rank) {
        finish_rank();
        out = response->add_ranks();
        out->set_rank(rank.rank());
        out->set_attempt(rank.attempt());
        rank_in_progress = rank.last_row_in_progress();
        last_row_kept = false;
        starts.clear();
        return absl::OkStatus();
      },
      [&](const v1::StepRollup& r) {
        ends_at_from.reset();  // a row follows it: it was closed
        last_row_kept = false;
        starts.push_back(r.start_ns());
        last_end_ns = r.end_ns();
        // Rows are [start, end): one that ends where the window starts is not in it (a bucket
        // on a whole second came back with the one before it). A row of one instant is, and so
        // is a rank's open last step (above).
        bool ends_at_window_start = false;
        if (request->from_ns() != 0) {
          if (r.end_ns() < request->from_ns()) return;
          ends_at_window_start = r.end_ns() == request->from_ns() && r.start_ns() < r.end_ns();
          if (ends_at_window_start && request->axis() == v1::TIMELINE_AXIS_TIME) return;
        }
        if (request->to_ns() != 0 && r.start_ns() > request->to_ns()) return;
        v1::TimelinePoint p;
        p.set_key(r.step());
        p.set_start_ns(r.start_ns());
        p.set_end_ns(r.end_ns());
        p.set_floor_bytes(r.floor_bytes());
        p.set_peak_bytes(r.peak_bytes());
        p.set_end_bytes(r.end_bytes());
        if (ends_at_window_start) {
          ends_at_from = std::move(p);
        } else {
          *out->add_points() = std::move(p);
        }
        last_row_kept = true;
      },
      only_ranks);
  finish_rank();
  if (!visited.ok()) return ToGrpcStatus(visited);
  response->set_bucket_ns(bucket_ns);
  // The ranks asked for that the job does not have, named (runs collapsed, at most 16 items: a
  // status message travels in gRPC's trailing metadata, 8 KiB by default).
  std::set<uint32_t> missing(only_ranks.begin(), only_ranks.end());
  for (const v1::RankTimelineProto& rank : response->ranks()) missing.erase(rank.rank());
  if (!missing.empty()) {
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        absl::StrCat("job \"", request->job_id(), "\" has no rank",
                     missing.size() == 1 ? " " : "s ",
                     analysis::FormatRankList({missing.begin(), missing.end()}, 16)));
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::GetRollups(grpc::ServerContext*, const v1::GetRollupsRequest* request,
                                      v1::GetRollupsResponse* response) {
  if (grpc::Status s = RequireJob(request->job_id()); !s.ok()) return s;
  RollupSelection selection;
  selection.ranks.assign(request->ranks().begin(), request->ranks().end());
  selection.from_rank = request->from_rank();
  selection.partial = request->partial();
  selection.with_subprocesses = request->with_subprocesses();
  if (request->scalars_only()) selection.detail = RollupDetail::kScalars;
  // Past protobuf's 2 GiB a message does not serialize at all.
  selection.max_bytes = request->max_response_bytes() != 0
                            ? std::min<uint64_t>(request->max_response_bytes(), kMaxRollupsBytes)
                            : kMaxRollupsBytes;
  absl::StatusOr<v1::GetRollupsResponse> rollups =
      store_->Rollups(request->job_id(), AxisOf(request->axis()), selection);
  if (!rollups.ok()) return ToGrpcStatus(rollups.status());
  *response = std::move(*rollups);
  return grpc::Status::OK;
}

grpc::Status QueryService::LiveAt(grpc::ServerContext*, const v1::LiveAtRequest* request,
                                  v1::LiveAtResponse* response) {
  if (grpc::Status s = RequireJob(request->job_id()); !s.ok()) return s;
  LivePoint point;
  switch (request->at_case()) {
    case v1::LiveAtRequest::kAtNs:
      point.kind = LivePoint::Kind::kAtTime;
      point.at_ns = request->at_ns();
      break;
    case v1::LiveAtRequest::kFirstOom:
      point.kind = request->first_oom() ? LivePoint::Kind::kFirstOom : LivePoint::Kind::kNow;
      break;
    case v1::LiveAtRequest::AT_NOT_SET:
      break;
  }
  std::optional<uint32_t> attempt;
  if (request->has_attempt()) attempt = request->attempt();
  absl::StatusOr<LiveSnapshot> live =
      store_->LiveAllocations(request->job_id(), request->rank(), attempt, point);
  if (!live.ok()) return ToGrpcStatus(live.status());
  response->set_rank(live->key.rank);
  response->set_attempt(live->key.attempt);
  response->set_seq(live->seq);
  response->set_ts_ns(live->ts_ns);
  response->set_step(live->step);
  response->set_live_bytes(live->live_bytes);
  response->set_allocation_count(live->allocations.size());
  response->set_oom_requested_bytes(live->oom_requested_bytes);
  size_t n = live->allocations.size();
  if (request->max_allocations() > 0 && request->max_allocations() < n) {
    n = request->max_allocations();
  }
  response->mutable_allocations()->Reserve(static_cast<int>(n));
  for (size_t i = 0; i < n; ++i) {
    const auto& [address, a] = live->allocations[i];
    v1::LiveAllocation* out = response->add_allocations();
    out->set_address(address);
    out->set_bytes(a.bytes);
    out->set_tag_id(a.tag_id);
    out->set_source_id(a.source_id);
    out->set_step(a.step);
    out->set_ts_ns(a.ts_ns);
    out->set_seq(a.seq);
    out->set_memory_kind(a.memory_kind);
  }
  for (const StringDef& d : live->strings) {
    v1::StringEntry* e = response->add_strings();
    e->set_id(d.id);
    e->set_kind(static_cast<v1::StringKind>(d.kind));
    e->set_value(d.value);
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::ReadEvents(grpc::ServerContext*, const v1::ReadEventsRequest* request,
                                      v1::ReadEventsResponse* response) {
  if (grpc::Status s = RequireJob(request->job_id()); !s.ok()) return s;
  absl::StatusOr<StoredEvents> stored =
      store_->ReadEvents(request->job_id(), request->rank(), request->attempt(),
                         request->from_seq(), request->limit());
  if (!stored.ok()) return ToGrpcStatus(stored.status());
  EncodeBatch(stored->events, stored->strings, AgentCounterValues(), response->mutable_batch());
  response->mutable_batch()->clear_counters();
  response->set_next_seq(stored->next_seq);
  for (const TimeHorizonRun& run : stored->time_horizons) {
    v1::TimeHorizonRun* out = response->add_time_horizons();
    out->set_events(run.events);
    out->set_horizon_ns(run.horizon_ns);
  }
  return grpc::Status::OK;
}

}  // namespace memtrace::collector
