// `leaks`: is each rank's memory a plateau, spikes, or a leak (a rising floor); which live
// allocations are the candidates; and which phase's memory outlives the phase.
//
// Curve (per rank, from rollups, after warm-up):
//   leak    the step floors rise: Theil-Sen slope > 0 with fitted growth >= min_growth_bytes and
//           trend z >= min_trend_z over the window, or from where a floor flat until then began
//           to rise (current_trend.h), and still rising in the second half of that fit (slope
//           >= a quarter of the fit's, trend z >= 2); or its last 3+ floors each rose out of the
//           step-to-step noise, too few for those tests (RecentRise; FitRise in current_trend.h
//           has the rule). A floor that jumped once and then stayed is not a leak.
//   spikes  not a leak, and some steps' peaks stand above the floor's running median (and above
//           the floor the step began from, carried on at the rate it last rose) by more
//           than max(min_spike_bytes, spike_mad_factor x the peaks' robust spread), in at most
//           max_spike_fraction of the steps (more often than that is the job's normal peak).
//           A peak that rose by memory the next step's floor still holds is a step up (a leak's
//           allocation, which the floor follows a step later), not a spike; so is a last step's
//           whose floor rose by as much in each of the two steps before it.
//   plateau neither.
// Candidates (from live sets): allocations made after warm-up that are still live across at least
// min_boundaries step boundaries, grouped by rank, tag and source, with counts, bytes, and how
// many distinct steps made them (a leak allocates in many steps; a late cache growth in one).
// Phases (verl-style rollout / actor_update / ...):
//   - from live sets: memory allocated while phase P was open that is live at a moment when
//     that instance of P has ended (allocated in an earlier step, or P is not open now);
//   - from rollups alone: bytes under a tag named like a phase ("rollout", or "rollout:..." /
//     "rollout/...": the agent tags an allocation with its innermost NVTX range, so memory
//     allocated directly inside a phase carries its name) still live at the end of steps in
//     which the phase ran and closed, in at least min_residue_steps of them (a phase still open
//     at a step's or time bucket's end is left out of that step; rows written before rollups
//     marked open phases count as closed).
#ifndef MEMTRACE_QUERY_ANALYSIS_LEAKS_H_
#define MEMTRACE_QUERY_ANALYSIS_LEAKS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "query/analysis/live_set.h"
#include "query/analysis/step_metrics.h"
#include "query/analysis/timeline.h"

namespace memtrace::analysis {

struct LeakParams {
  std::optional<uint32_t> rank;  // only this rank
  uint32_t warmup_steps = 5;
  uint64_t min_growth_bytes = 64 * kMiB;
  double min_trend_z = 3.0;
  uint32_t min_points = 8;
  uint64_t min_spike_bytes = 512 * kMiB;
  double spike_mad_factor = 5.0;
  double max_spike_fraction = 0.2;
  uint32_t min_boundaries = 3;
  uint32_t top_n = 20;  // candidates per rank
  uint64_t min_phase_bytes = 64 * kMiB;
  uint32_t min_residue_steps = 3;
  uint32_t max_pairs = 2048;
  std::optional<uint32_t> attempt;
};

enum class CurveClass { kPlateau, kSpikes, kLeak, kTooShort };
absl::string_view CurveClassName(CurveClass c);

struct CurveEvidence {
  int64_t first_step = 0;
  int64_t last_step = 0;
  uint32_t points = 0;
  // Medians of the first and last few floors of the window.
  uint64_t floor_start_bytes = 0;
  uint64_t floor_end_bytes = 0;
  // The floor's fit: over the window, or from where a flat floor began to rise.
  double floor_bytes_per_step = 0;
  double floor_growth_bytes = 0;
  double floor_trend_z = 0;
  double recent_bytes_per_step = 0;  // second half of that fit

  double recent_trend_z = 0;
  // For a leak: where the floor began to rise, as the last point of the flat stretch before
  // its trending part, or of a flat start too short for the fit to split off (ShortFlatStart;
  // the figures above still come from the fit over every point then), or the first step
  // examined when the floor rose from it; -1 otherwise.
  int64_t rising_since_step = -1;
  // The leak's floor rose from the first step examined, and into it from the last warm-up step:
  // it may have begun before the window. rising_since_step alone cannot say so, as a floor flat
  // at the first step and rising after it also puts it there.
  bool rising_from_first_examined = false;
  uint64_t median_peak_bytes = 0;
  uint32_t spike_steps = 0;
  uint64_t max_spike_excess_bytes = 0;  // above the typical peak over the floor trend
  int64_t max_spike_step = -1;
  int64_t spike_period_steps = 0;     // median gap between spikes; 0 with fewer than 2
  std::vector<int64_t> first_spikes;  // up to 8 spike steps
};

struct RankCurve {
  uint32_t rank = 0;
  CurveClass curve = CurveClass::kPlateau;
  // The rank's allocator path (RankTimeline::allocator): with "segments" (PyTorch's caching
  // allocator) a leak shows as new segments that are never freed, not as tensors.
  std::string allocator;
  CurveEvidence evidence;
};

struct LeakCandidate {
  uint32_t rank = 0;
  std::string tag;
  std::string source;
  uint64_t count = 0;
  uint64_t bytes = 0;
  int64_t oldest_step = 0;
  int64_t newest_step = 0;
  uint32_t distinct_steps = 0;
  int64_t at_step = 0;  // the live set's moment
  uint32_t attempt = 0;  // the live set's (before a restart: not the curves' latest)
};

// Memory of `phase` found live after that phase instance ended (from a live set).
struct PhaseSurvivor {
  uint32_t rank = 0;
  std::string phase;
  std::string tag;
  std::string source;
  uint64_t count = 0;
  uint64_t bytes = 0;
  int64_t oldest_step = 0;
  int64_t at_step = 0;
  uint32_t attempt = 0;                  // the live set's
  std::vector<std::string> open_phases;  // at the moment
  // Steps whose run of the phase left these allocations: 1 = kept once (an optimizer's state,
  // made by the first update, is the common healthy case); more = each run leaves more. In a
  // job without step markers, their runs told apart by time (allocations more than half a
  // bucket apart). There, at a moment inside a run of the phase, the open run is the phase's
  // latest run by time: one that has not allocated yet takes the run before it for its own.
  uint32_t distinct_steps = 0;
};

// A phase-named tag still live at step ends (from rollups).
struct PhaseResidue {
  uint32_t rank = 0;
  std::string phase;
  uint32_t phase_steps = 0;    // steps after warm-up in which the phase ran
  uint32_t residue_steps = 0;  // of those, steps ending with >= min_phase_bytes of its memory
  uint64_t median_residue_bytes = 0;
  uint64_t last_residue_bytes = 0;
  uint64_t max_residue_bytes = 0;
};

struct LeakReport {
  std::string job_id;
  uint32_t ranks = 0;  // selected; with params.rank only that one is classified
  uint32_t leaking_ranks = 0;
  std::vector<RankCurve> curves;               // by rank
  std::vector<LeakCandidate> candidates;       // by rank, then bytes descending
  // Those left by more than one run of their phase first (accumulating), then by bytes
  // descending, then by rank.
  std::vector<PhaseSurvivor> phase_survivors;
  std::vector<PhaseResidue> phase_residues;    // by rank, then phase
  // > 0 for a job without step markers: the curves' steps are time-bucket indexes of this width.
  int64_t bucket_ns = 0;
  LeakParams params;
};

// Classifies every rank of `job` and, for the ranks in `live` (empty is fine), lists candidates
// and phase survivors. Pure.
//
// A candidate's warm-up and step boundaries are counted in steps, as its allocations' steps are.
// When `job` is on the time axis its points are time buckets, so the warm-up comes from
// `steps`, the same job's step columns (JobStepMetrics on the step axis); without them, or when
// the job has no step markers at all (every allocation is then in step 0, and none survives a
// step boundary), there are no candidates.
LeakReport FindLeaks(const JobTimeline& job, absl::Span<const RankLiveSet> live = {},
                     const LeakParams& params = {}, const JobStepMetrics* steps = nullptr);

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_LEAKS_H_
