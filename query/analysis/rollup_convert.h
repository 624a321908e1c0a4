// The edge between the collector's wire messages and the analyses' plain input: stored rollups
// (GetRollupsResponse) become a JobTimeline and a LiveAt answer becomes a RankLiveSet, with each
// rank's string-table ids resolved to names. The only analysis code that sees query.proto.
#ifndef MEMTRACE_QUERY_ANALYSIS_ROLLUP_CONVERT_H_
#define MEMTRACE_QUERY_ANALYSIS_ROLLUP_CONVERT_H_

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "proto/memtrace/v1/query.pb.h"
#include "query/analysis/live_set.h"
#include "query/analysis/step_metrics.h"
#include "query/analysis/timeline.h"

namespace memtrace::analysis {

// What TimelineBuilder and StepMetricsBuilder share: the job's header fields, each (rank,
// attempt) started once, the previous rank finished (Derived::FinishRank) before the next starts
// (Derived::BeginRank) and at Finish. `Job` is a JobTimeline or a JobStepMetrics.
template <typename Derived, typename Job>
class RankByRankBuilder {
 public:
  // Starts the next rank: `header` gives rank, attempt, identity and the string table that
  // resolves the ids of the rows that follow (its `steps` are ignored). INVALID_ARGUMENT when
  // the (rank, attempt) was already started, naming them, or when the rank before had the same
  // step twice.
  absl::Status StartRank(const v1::RankRollups& header) {
    if (absl::Status s = FinishCurrent(); !s.ok()) return s;
    if (!seen_.emplace(header.rank(), header.attempt()).second) {
      return RankTwice(job_.job_id, header.rank(), header.attempt());
    }
    in_rank_ = true;
    last_in_progress_ = header.last_row_in_progress();
    static_cast<Derived*>(this)->BeginRank(header);
    return absl::OkStatus();
  }
  // The job; INVALID_ARGUMENT when the last rank has the same step twice, naming it.
  absl::StatusOr<Job> Finish() && {
    if (absl::Status s = FinishCurrent(); !s.ok()) return s;
    return std::move(job_);
  }

 protected:
  RankByRankBuilder(absl::string_view job_id, v1::TimelineAxis axis, int64_t bucket_ns) {
    job_.job_id = std::string(job_id);
    job_.time_axis = axis == v1::TIMELINE_AXIS_TIME;
    job_.bucket_ns = bucket_ns;
  }
  static absl::Status StepTwice(absl::string_view job_id, uint32_t rank, uint32_t attempt,
                                int64_t step) {
    return absl::InvalidArgumentError(absl::StrCat("job '", job_id, "': rank ", rank, " attempt ",
                                                   attempt, " has step ", step, " twice"));
  }

  Job job_;
  bool last_in_progress_ = false;  // the current rank's last row goes to its in_progress

 private:
  static absl::Status RankTwice(absl::string_view job_id, uint32_t rank, uint32_t attempt) {
    return absl::InvalidArgumentError(absl::StrCat("job '", job_id, "': rank ", rank, " attempt ",
                                                   attempt, " appears twice in the rollups"));
  }
  absl::Status FinishCurrent() {
    if (!in_rank_) return absl::OkStatus();
    in_rank_ = false;
    return static_cast<Derived*>(this)->FinishRank();
  }

  bool in_rank_ = false;
  std::set<std::pair<uint32_t, uint32_t>> seen_;
};

// Builds a JobTimeline one rank and one rollup row at a time, so that a reader of stored rows
// (collector/server/analysis_loader) converts each as it comes instead of first holding the
// job's hundreds of thousands of rows as messages. Steps are sorted; an id missing from a
// rank's string table is named "tag#7" / "source#7" / "phase#7" (the entry's batch was lost,
// the bytes are still real). The last row of a rank whose header says it is in progress goes to
// RankTimeline::in_progress, out of the steps the analyses compare. StartRank, then AddRow for each
// of its rows; then Finish. Not thread-safe.
class TimelineBuilder : public RankByRankBuilder<TimelineBuilder, JobTimeline> {
 public:
  TimelineBuilder(absl::string_view job_id, v1::TimelineAxis axis, int64_t bucket_ns)
      : RankByRankBuilder(job_id, axis, bucket_ns) {}
  // Adds one row of the current rank (StartRank first).
  void AddRow(const v1::StepRollup& row);

 private:
  friend class RankByRankBuilder<TimelineBuilder, JobTimeline>;
  void BeginRank(const v1::RankRollups& header);
  absl::Status FinishRank();

  RankTimeline rank_;
  absl::flat_hash_map<uint32_t, NameId> ids_;        // the current rank's wire id -> name
  uint32_t allocator_paths_ = 0;                     // bits: segments, pool, vmm
  bool imported_ = false;                            // the rank came from `memtrace import`
  std::vector<GroupBytes> tags_, sources_, phases_;  // AddRow's scratch: keeps its capacity
};

// As TimelineBuilder, but keeps only the columns diverged compares (step_metrics.h): a few
// bytes per row instead of a StepPoint. Same order, checks and errors. Not thread-safe.
class StepMetricsBuilder : public RankByRankBuilder<StepMetricsBuilder, JobStepMetrics> {
 public:
  StepMetricsBuilder(absl::string_view job_id, v1::TimelineAxis axis, int64_t bucket_ns)
      : RankByRankBuilder(job_id, axis, bucket_ns) {}
  void AddRow(const v1::StepRollup& row);

 private:
  friend class RankByRankBuilder<StepMetricsBuilder, JobStepMetrics>;
  void BeginRank(const v1::RankRollups& header);
  absl::Status FinishRank();

  // The current rank's greatest step and its row's end (EndedWithinItsLastStep).
  int64_t last_step_ = INT64_MIN;
  int64_t last_end_ns_ = INT64_MIN;
};

// The timeline of `job_id` from a whole GetRollupsResponse (TimelineBuilder over its ranks).
absl::StatusOr<JobTimeline> TimelineFromRollups(absl::string_view job_id,
                                                const v1::GetRollupsResponse& rollups,
                                                v1::TimelineAxis axis = v1::TIMELINE_AXIS_STEP);

// Converts one rank's live allocations. Those left out of live bytes (host memory, imported VMM
// mappings: LeftOutOfLiveBytes) are left out unless include_host: the analyses compare the
// rank's own device memory. The wire form carries no phase per
// allocation yet, so LiveAllocation::phase and open_phases stay empty.
RankLiveSet LiveSetFromProto(const v1::LiveAtResponse& live, bool include_host = false);

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_ROLLUP_CONVERT_H_
