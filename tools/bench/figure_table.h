// One row per measured figure, each next to the baseline measured in the same run, and the table
// that `bazel run //tools/bench:all` prints (plain text) and docs/PERFORMANCE.md holds (markdown).
#ifndef MEMTRACE_TOOLS_BENCH_FIGURE_TABLE_H_
#define MEMTRACE_TOOLS_BENCH_FIGURE_TABLE_H_

#include <optional>
#include <string>
#include <vector>

namespace memtrace::bench {

// Which direction of a figure is the good one.
enum class Better { kHigher, kLower };

struct Figure {
  std::string section;  // "agent", "ingest", "storage", "query", "scaling"
  std::string name;     // what was measured, e.g. "CUPTI record -> Event, 1 thread"
  double value = 0;
  std::string unit;     // "events/s", "ns/event", "ms", "B/event", "MiB"
  Better better = Better::kHigher;
  // What the figure is compared with, in the same unit; empty / nullopt when there is none.
  std::string baseline;
  std::optional<double> baseline_value;
  // The target, in the same unit, when it sets one.
  std::optional<double> target;
  // A target on the ratio instead (e.g. ">= 0.5 of db_bench"): value / baseline_value.
  std::optional<double> ratio_target;
  std::string note;
};

// value / baseline_value, or nullopt when there is no (non-zero) baseline.
std::optional<double> Ratio(const Figure& figure);

// Whether the figure meets its target(s): nullopt when it has none.
std::optional<bool> MeetsTarget(const Figure& figure);

// "12.3 M", "870 k", "4.21", "0.0312": three significant digits with an SI suffix from k upwards.
std::string FormatNumber(double value);

// The table as aligned plain text, grouped by section in the order given.
std::string RenderText(const std::vector<Figure>& figures);

// The same table in GitHub markdown, with the notes as a last column.
std::string RenderMarkdown(const std::vector<Figure>& figures);

}  // namespace memtrace::bench

#endif  // MEMTRACE_TOOLS_BENCH_FIGURE_TABLE_H_
