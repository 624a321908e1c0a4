// The edge between the collector's wire messages and the analyses' plain input: stored rollups
// (GetRollupsResponse) become a JobTimeline and a LiveAt answer becomes a RankLiveSet, with each
// rank's string-table ids resolved to names. The only analysis code that sees query.proto.
#ifndef MEMTRACE_QUERY_ANALYSIS_ROLLUP_CONVERT_H_
#define MEMTRACE_QUERY_ANALYSIS_ROLLUP_CONVERT_H_

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/memtrace/v1/query.pb.h"
#include "query/analysis/live_set.h"
#include "query/analysis/step_metrics.h"
#include "query/analysis/timeline.h"

namespace memtrace::analysis {

// Builds a JobTimeline one rank and one rollup row at a time, so that a reader of stored rows
// (collector/server/analysis_loader) converts each as it comes instead of first holding the
// job's hundreds of thousands of rows as messages. Steps are sorted; an id missing from a
// rank's string table is named "tag#7" / "source#7" / "phase#7" (the entry's batch was lost,
// the bytes are still real). Not thread-safe.
class TimelineBuilder {
 public:
  TimelineBuilder(absl::string_view job_id, v1::TimelineAxis axis, int64_t bucket_ns);

  // Starts the next rank: `header` gives rank, attempt, identity and the string table that
  // resolves the ids of the rows that follow (its `steps` are ignored). INVALID_ARGUMENT when
  // the (rank, attempt) was already started, naming them.
  absl::Status StartRank(const v1::RankRollups& header);
  // Adds one row of the current rank (StartRank first).
  void AddRow(const v1::StepRollup& row);
  // The timeline; INVALID_ARGUMENT when a rank has the same step twice, naming it.
  absl::StatusOr<JobTimeline> Finish() &&;

 private:
  absl::Status FinishRank();

  JobTimeline job_;
  bool in_rank_ = false;
  RankTimeline rank_;
  absl::flat_hash_map<uint32_t, NameId> ids_;  // the current rank's wire id -> name
  uint32_t allocator_paths_ = 0;               // bits: segments, pool, vmm
  std::set<std::pair<uint32_t, uint32_t>> seen_;
  std::vector<GroupBytes> tags_, sources_, phases_;  // AddRow's scratch: keeps its capacity
};

// As TimelineBuilder, but keeps only the columns diverged compares (step_metrics.h): a few
// bytes per row instead of a StepPoint. Same order, checks and errors. Not thread-safe.
class StepMetricsBuilder {
 public:
  StepMetricsBuilder(absl::string_view job_id, v1::TimelineAxis axis, int64_t bucket_ns);
  absl::Status StartRank(const v1::RankRollups& header);
  void AddRow(const v1::StepRollup& row);
  absl::StatusOr<JobStepMetrics> Finish() &&;

 private:
  absl::Status FinishRank();

  JobStepMetrics job_;
  bool in_rank_ = false;
  std::set<std::pair<uint32_t, uint32_t>> seen_;
};

// The timeline of `job_id` from a whole GetRollupsResponse (TimelineBuilder over its ranks).
absl::StatusOr<JobTimeline> TimelineFromRollups(absl::string_view job_id,
                                                const v1::GetRollupsResponse& rollups,
                                                v1::TimelineAxis axis = v1::TIMELINE_AXIS_STEP);

// Converts one rank's live allocations. Host allocations (pageable, pinned) are left out unless
// include_host: the analyses compare device memory. The wire form carries no phase per
// allocation yet, so LiveAllocation::phase and open_phases stay empty.
RankLiveSet LiveSetFromProto(const v1::LiveAtResponse& live, bool include_host = false);

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_ROLLUP_CONVERT_H_
