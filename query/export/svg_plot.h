// An SVG line plot of a job's memory by step: one polyline per rank, GiB and step ticks, a
// legend, the rank that diverged from the cohort highlighted (query/analysis/diverged.h), and
// vertical lines with labels where that divergence and any leak (a rising floor,
// query/analysis/leaks.h) begin.
//
// The SVG carries what it shows as data attributes, so tests and scripts can check the picture's
// content without looking at pixels:
//   <svg data-job data-metric data-ranks data-status data-highlighted-rank data-axis="step|time"
//        data-bucket-ns data-onset-step>
//   <polyline class="rank-line" data-rank data-attempt data-highlighted data-diverged
//             data-points data-max-bytes>  (data-points: the rank's steps; past 4 per pixel
//             column, `points` holds each column's first, lowest, highest and last)
//   <line class="onset" data-kind="divergence|leak|divergence leak|oom" data-rank data-onset-step>
//   <g class="legend-entry" data-rank data-highlighted>, <text class="tick" data-gib|data-step>
// On a time axis (data-axis="time") a key is a bucket, its start in ns since the epoch /
// data-bucket-ns: data-onset-bucket and data-bucket replace data-onset-step and data-step, and
// the ticks are labelled as UTC clock times.
#ifndef MEMTRACE_QUERY_EXPORT_SVG_PLOT_H_
#define MEMTRACE_QUERY_EXPORT_SVG_PLOT_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "query/analysis/timeline.h"

namespace memtrace::exporter {

// --metric: "live" (live bytes at each step's end), "floor" or "peak".
absl::StatusOr<analysis::Metric> ParsePlotMetric(absl::string_view text);
absl::string_view PlotMetricName(analysis::Metric metric);

// What the analyses found that the plot marks.
struct PlotMarks {
  // "diverged", "none", "too-few-ranks", "too-few-steps" (the divergence analysis' status).
  std::string status = "none";
  std::string message;  // the analysis' sentence, shown under the title
  std::optional<uint32_t> highlighted_rank;  // the earliest rank to leave the cohort
  int64_t onset_step = 0;
  // Its gap to the cohort at the onset (where the line is drawn), and at the latest compared step.
  int64_t onset_excess_bytes = 0;
  int64_t last_step = 0;
  int64_t last_excess_bytes = 0;
  std::vector<uint32_t> followers;  // ranks that diverged after it
  struct Leak {
    uint32_t rank = 0;
    int64_t since_step = 0;
    double bytes_per_step = 0;
    // since_step is the first step examined after warm-up: the leak may have begun before it.
    bool since_first_examined = false;
  };
  std::vector<Leak> leaks;  // ranks whose floor rises, with where it began to
  struct Oom {
    uint32_t rank = 0;
    int64_t step = 0;  // the first step (or bucket) with an OOM on the rank
    uint64_t requested_bytes = 0;
  };
  std::vector<Oom> ooms;  // by rank
};

// Runs FindDivergence and FindLeaks (default parameters, as `memtrace diverged` / `leaks` do)
// over `job`. With `step_windows` (a job on time buckets: standing in for missing step markers,
// or asked for), in windows of whole steps when its buckets are shorter than its steps, as the
// collector reads them (bucket_windows.h); the marks are on `job`'s own buckets. Pure.
PlotMarks MarksFromAnalyses(const analysis::JobTimeline& job, bool step_windows = false);

struct PlotOptions {
  analysis::Metric metric = analysis::Metric::kEnd;
  // Only these ranks are drawn (the analyses still compare every rank). Empty: all.
  std::set<uint32_t> ranks;
  int width = 1200;
  int height = 700;
  size_t max_legend_entries = 16;
};

// The SVG document. Each rank's latest attempt is drawn. Pure.
std::string RenderMemoryPlot(const analysis::JobTimeline& job, const PlotMarks& marks,
                             const PlotOptions& options);

// The indexes of `points` (keys ascending within [min_key, max_key]) that a line across
// `columns` pixel columns is drawn through: all of them while they are at most 4 per column,
// else per column its first, lowest, highest and last point, in order (M4: Jugel et al., VLDB
// 2014; the line looks the same). A job without step markers has a point a second: a day's
// run is 86,400 per rank (exposed for tests).
std::vector<size_t> DrawnPoints(const std::vector<std::pair<int64_t, uint64_t>>& points,
                                int64_t min_key, int64_t max_key, int columns);

// Tick values for [0, max]: 1-2-5 steps giving 4 to 10 ticks (exposed for tests).
std::vector<double> NiceTicks(double min, double max);

// Tick keys for time buckets of `bucket_ns` over [min_key, max_key] (a key is a bucket's start
// in ns since the epoch / bucket_ns): at round clock times 1 ms to a week apart, 10 ticks or
// fewer, inside the range (exposed for tests).
std::vector<double> TimeTicks(int64_t min_key, int64_t max_key, int64_t bucket_ns);
// The label of a key on a time axis of `bucket_ns` buckets over [min_key, max_key], UTC:
// "03:17:50"; with ms where `precision_ns` (the ticks' spacing, or a bucket for a marked key) is
// not whole seconds; with the date ("12-07 03:17", seconds only when the precision needs them)
// when the axis spans a day or crosses midnight.
std::string TimeKeyLabel(double key, int64_t bucket_ns, int64_t min_key, int64_t max_key,
                         int64_t precision_ns);

}  // namespace memtrace::exporter

#endif  // MEMTRACE_QUERY_EXPORT_SVG_PLOT_H_
