// The numbers per rank and step that `diverged` compares, in columns: step, start time, and
// live bytes at the step's floor, end and peak. A JobTimeline holds the same numbers among a
// StepPoint's many; a 1024-rank x 200-step job is 200 k points, and reading them into
// StepPoints made the first touch of ~30 MB most of a cold `diverged` (docs/PERFORMANCE.md).
// These columns take 40 bytes a point. The collector fills them straight from its series
// (rollup_convert.h's StepMetricsBuilder); StepMetricsOf converts a timeline.
#ifndef MEMTRACE_QUERY_ANALYSIS_STEP_METRICS_H_
#define MEMTRACE_QUERY_ANALYSIS_STEP_METRICS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "query/analysis/timeline.h"

namespace memtrace::analysis {

// One rank (one attempt): parallel columns, one entry per step, steps ascending and unique.
struct RankStepMetrics {
  uint32_t rank = 0;
  uint32_t attempt = 0;
  std::string host;
  std::vector<int64_t> step;
  std::vector<int64_t> start_ns;
  std::vector<uint64_t> floor_bytes;
  std::vector<uint64_t> end_bytes;
  std::vector<uint64_t> peak_bytes;
  // The row its stream is still filling, as RankTimeline::in_progress: after the columns and
  // not in them.
  struct Row {
    int64_t step = 0;
    int64_t start_ns = 0;
    uint64_t floor_bytes = 0;
    uint64_t end_bytes = 0;
    uint64_t peak_bytes = 0;
  };
  std::optional<Row> in_progress;
  bool cut_short = false;  // as RankTimeline::cut_short

  size_t size() const { return step.size(); }
  // As RankTimeline's: its rows with the one in progress last, their count, and the i-th's step
  // and start. Whether it has any, and its last step (has_rows() first): the step a running
  // rank is in is as far as it got.
  size_t row_count() const { return size() + (in_progress.has_value() ? 1 : 0); }
  int64_t step_at(size_t i) const { return i < size() ? step[i] : in_progress->step; }
  int64_t start_at(size_t i) const { return i < size() ? start_ns[i] : in_progress->start_ns; }
  bool has_rows() const { return row_count() > 0; }
  int64_t last_step() const { return step_at(row_count() - 1); }
  // The metric of the i-th step (MetricValue's choice of column).
  uint64_t Value(size_t i, Metric metric) const;
  // Appends one step (after the last).
  void Add(const StepPoint& point);
  // Takes the last step out of the columns into in_progress (the rank has one).
  void MoveLastToInProgress();
};

struct JobStepMetrics {
  std::string job_id;
  // As JobTimeline: true when `step` is a time-bucket index (the job had no step markers).
  bool time_axis = false;
  int64_t bucket_ns = 0;
  std::vector<RankStepMetrics> ranks;
};

// The columns of `job`.
JobStepMetrics StepMetricsOf(const JobTimeline& job);

// As SelectRanks for a timeline: one per rank number, ordered by rank; with `attempt`, only
// that attempt, otherwise each rank's highest.
std::vector<const RankStepMetrics*> SelectRanks(const JobStepMetrics& job,
                                                std::optional<uint32_t> attempt = std::nullopt);

// As HasStepMarkers for timelines (timeline.h).
bool HasStepMarkers(const JobStepMetrics& job);

// As BuildStepGrid for timelines.
StepGrid BuildStepGrid(const std::vector<const RankStepMetrics*>& ranks);

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_STEP_METRICS_H_
