// `diverged`: the earliest rank whose memory leaves the cohort, and the ranks that followed.
//
// Per step, the cohort's median and MAD (median absolute deviation) of each rank's metric (the
// step floor by default: see Metric). A rank is outside the cohort at a step when its deviation
// from the median is both large against the cohort's spread (robust z >= min_z) and large in
// bytes (>= max(min_excess_bytes, min_excess_fraction * cohort median)); the byte test is what
// keeps a job whose ranks are identical to the byte (MAD 0) from flagging a 2 MiB difference.
// It diverges when that holds, on the same side, for persistence_steps compared steps in a row,
// so one spike, or a checkpoint step, does not count. Its onset is the first step of that run.
// A step where the rank is still out but the test fails (other ranks spiked, widening the
// spread) neither counts nor breaks the run; one where it is back within a quarter of the byte
// threshold breaks it.
//
// By default each rank is measured against its own baseline (its level at the start of the
// baseline_steps after warm-up: their Theil-Sen line read at the first, so a rank already rising
// then is measured from where it began), so "diverged" means "left the cohort": a rank that always
// held 1 GiB more (rank 0's logging buffers) is reported among `offsets`, not as diverged (one
// whose baseline steps already rose by a divergence's worth is leaking, not offset; one with
// fewer than 3 baseline steps cannot show either, and is not called offset), and
// growth that every rank shares (gradients kept on all ranks) moves the median with it and is no
// divergence (see growth.h for that). Growth that most ranks share while some keep their baseline
// is measured against the ones that kept it: the growing ranks are named, above.
// relative_to_baseline = false compares absolute values.
#ifndef MEMTRACE_QUERY_ANALYSIS_DIVERGED_H_
#define MEMTRACE_QUERY_ANALYSIS_DIVERGED_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "query/analysis/step_metrics.h"
#include "query/analysis/timeline.h"

namespace memtrace::analysis {

struct DivergenceParams {
  Metric metric = Metric::kFloor;
  uint32_t persistence_steps = 5;
  double min_z = 3.5;
  uint64_t min_excess_bytes = 64 * kMiB;
  double min_excess_fraction = 0.02;
  // Steps at the start of each rank that are not compared: optimizer state and allocator caches
  // are still being created. Counted from the rank's own first step, so a rank that restarted
  // or joined late warms up again.
  uint32_t warmup_steps = 5;
  uint32_t baseline_steps = 5;
  bool relative_to_baseline = true;
  std::optional<uint32_t> attempt;  // default: each rank's latest attempt
};

enum class DivergenceStatus {
  kNoneDiverged,  // a full answer: every rank stayed with the cohort
  kDiverged,
  kTooFewRanks,  // fewer than 3 ranks: there is no cohort to leave
  kTooFewSteps,  // no step after warm-up had 3 ranks to compare
};

struct RankDivergence {
  uint32_t rank = 0;
  uint32_t attempt = 0;
  std::string host;
  // First step of the persistent run, and that step's start (in the collector's clock, as the
  // store hands step rows out).
  int64_t onset_step = 0;
  int64_t onset_ns = 0;
  // Where the rank started to drift: the start of the same-side run of deviations above a
  // quarter of the threshold that leads into the onset (<= onset_step).
  int64_t departure_step = 0;
  // It was drifting already over its baseline steps (the first compared after warm-up), more
  // than the cohort, and rose into the first of them from its last warm-up step: the drift may
  // have begun in warm-up.
  bool departed_before_compared = false;
  // At onset: the rank's metric, the cohort's median metric, and the rank's deviation from the
  // cohort (its change since its baseline minus the cohort's median change, when relative).
  uint64_t value_bytes = 0;
  uint64_t cohort_median_bytes = 0;
  int64_t excess_bytes = 0;
  double robust_z = 0;    // excess / (1.4826 * MAD); +-inf when the rest of the cohort is identical
  int32_t direction = 1;  // +1 above the cohort, -1 below
  uint32_t run_steps = 0;  // steps from onset to the run's last flagged step, inclusive
  // The latest compared step: the gap as it stands.
  int64_t last_step = 0;
  uint64_t last_value_bytes = 0;
  uint64_t last_cohort_median_bytes = 0;
  int64_t last_excess_bytes = 0;
};

// A rank whose baseline differs from the cohort's by the same test as a divergence.
struct RankOffset {
  uint32_t rank = 0;
  uint64_t baseline_bytes = 0;
  uint64_t cohort_baseline_bytes = 0;
  int64_t offset_bytes = 0;
};

struct DivergenceReport {
  std::string job_id;
  DivergenceStatus status = DivergenceStatus::kNoneDiverged;
  std::string message;  // one sentence saying what was found, or why nothing could be
  uint32_t ranks = 0;
  // Of `ranks`, those compared with the cohort in at least one step, and the others (a rank that
  // died in warm-up, or whose steps no 2 other ranks shared): "all 5 ranks stayed within the
  // cohort" was said of a rank compared nowhere.
  uint32_t ranks_compared = 0;
  std::vector<uint32_t> ranks_not_compared;
  int64_t first_step = 0;  // compared steps: after warm-up
  int64_t last_step = 0;
  uint32_t steps_compared = 0;
  // > 0 for a job without step markers: its "steps" are time-bucket indexes of this width.
  int64_t bucket_ns = 0;
  std::vector<RankDivergence> diverged;  // onset order; diverged[0] is the earliest
  std::vector<RankOffset> offsets;
  DivergenceParams params;
};

// Runs the analysis over `job` (one attempt per rank, see DivergenceParams::attempt).
// O(ranks x steps); pure. The two forms answer alike: the timeline is read through its columns.
DivergenceReport FindDivergence(const JobStepMetrics& job, const DivergenceParams& params = {});
DivergenceReport FindDivergence(const JobTimeline& job, const DivergenceParams& params = {});

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_DIVERGED_H_
