// `growth`: which tag (FSDP shard, module), source library or rank grows, how fast, and where.
//
// For every (group, rank) the live bytes at each step end after warm-up (for --by rank: the
// step floor) are fitted with a Theil-Sen line, over the whole window or, when the series was
// flat before it rose, from where it started to rise (current_trend.h: a leak that began late
// keeps its own rate). A series grows when all of these hold:
//   - it spans at least min_points steps and its range (max - min) is >= min_growth_bytes;
//   - the fitted growth (slope x steps from where the rise began, GrowthStart) is >=
//     min_growth_bytes;
//   - its Kendall trend statistic is >= min_trend_z (a monotone rise noise rarely makes);
//   - it still rises in the later half of the fit (StillRising: not one jump, then flat);
// or it ends on a RecentRise (current_trend.h: each of its last 3+ steps rose out of the noise,
// too few points for the trend statistic), which is then the fit (FitRise).
// This floor is what keeps allocator jitter, spikes and one-off jumps off the list. Groups are
// ranked by bytes/step summed over the ranks where they grow, and classified as growing on all
// ranks of the job that could grow (min_points steps in the window after their own warm-up:
// gradients kept on every rank) or on some (a leak on one rank). Warm-up counts from each
// rank's own first step: a rank that restarted or joined late warms up again.
#ifndef MEMTRACE_QUERY_ANALYSIS_GROWTH_H_
#define MEMTRACE_QUERY_ANALYSIS_GROWTH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "query/analysis/timeline.h"

namespace memtrace::analysis {

enum class GrowthBy { kTag, kRank, kTagRank, kSource, kSourceRank };

absl::string_view GrowthByName(GrowthBy by);

struct GrowthParams {
  GrowthBy by = GrowthBy::kTag;
  Metric rank_metric = Metric::kFloor;  // the series of --by rank
  uint32_t warmup_steps = 5;
  uint32_t window_steps = 0;  // only the last N steps after warm-up; 0 = all of them
  uint64_t min_growth_bytes = 64 * kMiB;
  double min_trend_z = 3.0;
  uint32_t min_points = 8;
  // Pairs per Theil-Sen fit before sub-sampling (see TheilSen); bounds the cost per series.
  uint32_t max_pairs = 2048;
  std::optional<uint32_t> attempt;
};

enum class GrowthScope { kAllRanks, kSomeRanks };

// One growing (group, rank) series.
struct RankGrowth {
  uint32_t rank = 0;
  double bytes_per_step = 0;
  double growth_bytes = 0;   // bytes_per_step x steps from first_step to last_step
  uint64_t first_bytes = 0;  // the series at first_step and last_step
  uint64_t last_bytes = 0;
  double trend_z = 0;
  // From the window's first step, or, for a series flat until then, the last step before it
  // rose (GrowthStart: where leaks' "rising since" stands), to the window's last.
  int64_t first_step = 0;
  int64_t last_step = 0;
};

struct GroupGrowth {
  // Tag or source name ("" for --by rank and for memory without one).
  std::string name;
  // Set for the per-rank groupings (rank, tag,rank, source,rank).
  std::optional<uint32_t> rank;
  GrowthScope scope = GrowthScope::kSomeRanks;
  uint32_t ranks_growing = 0;        // ranks where this tag/source grows (for --by rank: the job's)
  uint32_t ranks_with_group = 0;     // ranks where it held memory at all
  double total_bytes_per_step = 0;   // summed over growing ranks
  double median_bytes_per_step = 0;  // median over growing ranks
  std::vector<RankGrowth> ranks;     // the growing ranks, fastest first
};

struct GrowthReport {
  std::string job_id;
  GrowthBy by = GrowthBy::kTag;
  uint32_t ranks = 0;
  // Of `ranks`, those with min_points steps in the window after their own warm-up (the others
  // died early, restarted late or are still warming up): a group's kAllRanks scope is all of
  // these, not all of `ranks`.
  uint32_t ranks_fitted = 0;
  int64_t first_step = 0;  // the fitted window
  int64_t last_step = 0;
  // > 0 for a job without step markers: its "steps" are time-bucket indexes of this width.
  int64_t bucket_ns = 0;
  uint32_t groups_examined = 0;     // (group, rank) series fitted
  std::vector<GroupGrowth> groups;  // growing groups only, fastest first; empty = nothing grows
  GrowthParams params;
};

// Runs the analysis over `job`. O(series x min(points^2, max_pairs)); pure.
GrowthReport FindGrowth(const JobTimeline& job, const GrowthParams& params = {});

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_GROWTH_H_
