#include "collector/server/subprocess_live.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collector/rollup/saturating.h"
#include "collector/server/analysis_loader.h"
#include "query/analysis/live.h"
#include "query/analysis/report_proto.h"
#include "query/analysis/units.h"

namespace memtrace::collector {

namespace an = ::memtrace::analysis;

namespace {

// The row in which the subprocess's live bytes first reached their highest, of every row it
// has (the one it is still filling too: that peak was reached).
absl::StatusOr<v1::StepRollup> PeakRow(const EventStore& store, const v1::RankSummary& stream,
                                       absl::string_view job_id, absl::string_view who) {
  std::optional<v1::StepRollup> peak;
  int64_t bucket_ns = 0;
  absl::Status s = store.VisitRollups(
      job_id, RollupAxis::kStep, RollupDetail::kScalars, &bucket_ns,
      [](const v1::RankRollups&) { return absl::OkStatus(); },
      [&](const v1::StepRollup& row) {
        if (!peak.has_value() || row.peak_bytes() > peak->peak_bytes()) peak = row;
      },
      {stream.rank()});
  if (!s.ok()) return s;
  if (!peak.has_value()) return absl::NotFoundError(absl::StrCat(who, " has no rollups yet"));
  if (peak->peak_bytes() == 0) {
    return absl::NotFoundError(absl::StrCat(who, " never held device memory: it has no peak"));
  }
  if (peak->peak_ns() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(who,
                     "'s rollups were written by a collector that did not keep the moment "
                     "of their peak; `memtrace timeline --rank ",
                     stream.rank(), "` shows its rows"));
  }
  return *std::move(peak);
}

// The end of the subprocess's own step `step` (one that records step markers): the next row's
// start, or kNow for its last row.
absl::StatusOr<LivePoint> OwnStepEnd(const EventStore& store, const v1::RankSummary& stream,
                                     absl::string_view job_id, int64_t step,
                                     absl::string_view who) {
  std::optional<LivePoint> end;
  bool found = false;
  int64_t first = 0, last = 0;
  size_t rows = 0;
  int64_t bucket_ns = 0;
  absl::Status s = store.VisitRollups(
      job_id, RollupAxis::kStep, RollupDetail::kScalars, &bucket_ns,
      [](const v1::RankRollups&) { return absl::OkStatus(); },
      [&](const v1::StepRollup& row) {
        if (rows++ == 0) first = row.step();
        last = row.step();
        if (found && !end.has_value()) {
          end = LivePoint{LivePoint::Kind::kAtCollectorTime, row.start_ns() - 1, 0};
        }
        found |= row.step() == step;
      },
      {stream.rank()});
  if (!s.ok()) return s;
  if (!found) {
    return absl::NotFoundError(
        absl::StrCat(who, " has no step ", step,
                     rows > 0 ? absl::StrCat(" (its steps: ", first, "..", last, ")") : ""));
  }
  return end.value_or(LivePoint{});
}

}  // namespace

const v1::RankSummary* FindSubprocessStream(const std::vector<v1::RankSummary>& streams,
                                            uint32_t rank) {
  for (const v1::RankSummary& s : streams) {
    if (s.rank() == rank && s.identity().has_subprocess_of_rank()) return &s;
  }
  return nullptr;
}

absl::Status DescribeSubprocessLive(const EventStore& store,
                                    const std::vector<v1::RankSummary>& streams,
                                    const v1::RankSummary& stream, const v1::LiveRequest& request,
                                    const RankStepEnd& rank_step_end, v1::LiveReport* report) {
  const v1::RankIdentity& id = stream.identity();
  const std::string& job_id = request.job_id();
  const std::string who =
      absl::StrCat("job \"", job_id, "\" stream ", stream.rank(), " (pid ", id.pid(), ", ",
                   an::FormatSubprocessOf(id.subprocess_of_rank(), id.started_the_rank()), ")");
  if (request.has_attempt() && request.attempt() != id.attempt()) {
    // Its process ran in one attempt of its rank's: a restart's engine is another stream.
    return absl::NotFoundError(absl::StrCat(who, " ran in its rank's attempt ", id.attempt(),
                                            ", not ", request.attempt()));
  }
  if (stream.events_stored() == 0) {
    // Connected, nothing recorded yet: an empty set "at 1970-01-01" would read as an answer.
    return absl::NotFoundError(absl::StrCat(who, " has recorded no event yet"));
  }
  LivePoint point;
  std::optional<v1::StepRollup> peak;
  bool at_rank_step = false;
  switch (request.moment_case()) {
    case v1::LiveRequest::kAtNs:
      point.kind = LivePoint::Kind::kAtCollectorTime;
      point.at_ns = request.at_ns();
      break;
    case v1::LiveRequest::kAtStep: {
      if (!stream.no_step_markers()) {
        absl::StatusOr<LivePoint> own = OwnStepEnd(store, stream, job_id, request.at_step(), who);
        if (!own.ok()) return own.status();
        point = *own;
        break;
      }
      absl::StatusOr<LivePoint> end = rank_step_end(request.at_step());
      if (!end.ok()) return end.status();
      point = *end;
      at_rank_step = true;
      if (point.kind == LivePoint::Kind::kNow) {
        // The rank's last step, whose end is its last event once its stream has ended (a
        // trainer that started this engine may live on after it, and an engine after its rank).
        for (const v1::RankSummary& s : streams) {
          if (s.identity().has_subprocess_of_rank() || s.connected() ||
              static_cast<int64_t>(s.rank()) != id.subprocess_of_rank() ||
              s.identity().attempt() != id.attempt()) {
            continue;
          }
          point.kind = LivePoint::Kind::kAtCollectorTime;
          point.at_ns = LastEventNs(s);
        }
      }
      break;
    }
    case v1::LiveRequest::kAtOom:
      if (request.at_oom()) point.kind = LivePoint::Kind::kFirstOom;
      break;
    case v1::LiveRequest::kAtPeak:
      if (request.at_peak()) {
        absl::StatusOr<v1::StepRollup> row = PeakRow(store, stream, job_id, who);
        if (!row.ok()) return row.status();
        peak = *std::move(row);
        point.kind = LivePoint::Kind::kAtCollectorTime;
        point.at_ns = peak->peak_ns();
        point.through_seq = peak->peak_seq();
      }
      break;
    case v1::LiveRequest::MOMENT_NOT_SET:
      break;
  }
  absl::StatusOr<LoadedLiveSet> live =
      LoadLiveSet(store, job_id, stream.rank(), id.attempt(), point, /*with_phases=*/true);
  if (!live.ok() && absl::IsNotFound(live.status()) && point.kind == LivePoint::Kind::kFirstOom) {
    return absl::NotFoundError(absl::StrCat(who, " has no OOM event"));
  }
  if (!live.ok()) return live.status();
  if (live->seq == 0 && point.kind == LivePoint::Kind::kAtCollectorTime) {
    return absl::OutOfRangeError(absl::StrCat(who, " has no event at or before ",
                                              an::FormatUtcMs(point.at_ns), "; its first is at ",
                                              an::FormatUtcMs(FirstEventNs(stream))));
  }
  std::optional<an::OomMoment> oom;
  if (point.kind == LivePoint::Kind::kFirstOom) {
    oom = an::OomMoment{live->set.at_step, live->set.at_ns, live->oom_requested_bytes,
                        live->oom_tag, live->oom_source};
  }
  an::ToProto(
      an::DescribeLive(job_id, live->set, /*others=*/{}, an::FromProto(request.params()), oom),
      report);
  report->set_no_step_markers(stream.no_step_markers());
  report->set_attempt(id.attempt());
  report->set_latest_attempt(id.attempt());
  report->set_subprocess_of_rank(static_cast<int32_t>(id.subprocess_of_rank()));
  report->set_subprocess_pid(id.pid());
  report->set_subprocess_started_the_rank(id.started_the_rank());
  if (request.moment_case() == v1::LiveRequest::kAtNs) report->set_asked_ns(request.at_ns());
  if (at_rank_step) report->set_rank_step(request.at_step());
  if (peak.has_value()) {
    report->set_at_peak(true);
    report->set_peak_bytes(peak->peak_bytes());
    report->set_peak_step(peak->step());
    report->set_asked_ns(peak->peak_ns());
  }
  return absl::OkStatus();
}

}  // namespace memtrace::collector
