// `peak --by phase|tag|source|rank`: the most memory each group reached on each rank, when, and
// its typical peak, so an RL trainer's rollout, weight sync and actor update each get their own.
// For phases the peak is all live bytes while the phase was open (and "end" what was live when
// it closed); for tags and sources it is that group's own bytes; for ranks the step peak.
#ifndef MEMTRACE_QUERY_ANALYSIS_PEAK_H_
#define MEMTRACE_QUERY_ANALYSIS_PEAK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "query/analysis/timeline.h"

namespace memtrace::analysis {

enum class PeakBy { kPhase, kTag, kSource, kRank };
absl::string_view PeakByName(PeakBy by);

struct PeakParams {
  PeakBy by = PeakBy::kPhase;
  uint32_t warmup_steps = 0;  // peaks in the first steps count by default
  std::optional<uint32_t> attempt;
};

struct PeakEntry {
  std::string group;  // phase / tag / source name; "" for --by rank
  uint32_t rank = 0;
  uint64_t peak_bytes = 0;
  int64_t peak_step = 0;
  // When: by rank, the moment live bytes first reached the peak (at_moment); else (a group's
  // peak, whose moment rows do not keep, or rows written before they kept the rank's) the start
  // of the step that held it. Collector's clock, as the rows come.
  int64_t peak_ns = 0;
  bool at_moment = false;
  // Of its peaks per step; of a phase's per run (one spanning buckets peaks at their highest).
  uint64_t median_peak_bytes = 0;
  uint64_t median_end_bytes = 0;  // at phase close (its last in a step) / step end
  uint32_t steps = 0;             // steps in which the group appeared
  // Phases: steps in which it did not close, left out of median_end_bytes (== steps: it never
  // closed in the window, and median_end_bytes is 0).
  uint32_t open_at_end = 0;
};

struct PeakSummary {
  std::string group;
  uint64_t max_peak_bytes = 0;
  uint32_t max_rank = 0;
  int64_t max_step = 0;
  uint64_t median_rank_peak_bytes = 0;  // median over ranks of each rank's peak
  uint64_t min_rank_peak_bytes = 0;
  uint32_t ranks = 0;
};

struct PeakReport {
  std::string job_id;
  PeakBy by = PeakBy::kPhase;
  uint32_t ranks = 0;
  std::vector<PeakSummary> summaries;  // highest peak first
  std::vector<PeakEntry> entries;      // in summary order, then by rank
  // > 0 for a job without step markers: its "steps" are time-bucket indexes of this width.
  int64_t bucket_ns = 0;
  PeakParams params;
};

// Runs the analysis over `job`. An empty report (no summaries) for --by phase means the job
// recorded no phases. Pure.
PeakReport FindPeaks(const JobTimeline& job, const PeakParams& params = {});

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_PEAK_H_
