// A dependency-free SVG line chart: side-by-side panels, each with log or linear axes and a few
// named series of (x, y) points. Used for docs/scaling.svg.
#ifndef MEMTRACE_TOOLS_BENCH_SVG_PLOT_H_
#define MEMTRACE_TOOLS_BENCH_SVG_PLOT_H_

#include <string>
#include <utility>
#include <vector>

namespace memtrace::bench {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y); non-positive values skipped on log axes
};

struct Panel {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log_x = true;
  bool log_y = true;
  std::vector<Series> series;
};

// The chart as a complete SVG document, `panel_width` x `panel_height` pixels per panel, laid out
// left to right. Text is escaped; an empty panel gets axes and a "no data" label.
std::string RenderSvg(const std::string& title, const std::vector<Panel>& panels,
                      int panel_width = 480, int panel_height = 360);

}  // namespace memtrace::bench

#endif  // MEMTRACE_TOOLS_BENCH_SVG_PLOT_H_
