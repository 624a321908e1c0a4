#include "tools/bench/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "query/cli/text_escape.h"
#include "tools/bench/figure_table.h"

namespace memtrace::bench {
namespace {

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                   "#9467bd", "#8c564b", "#e377c2", "#17becf"};
constexpr int kLeft = 70, kRight = 16, kTop = 40, kBottom = 50;

// Maps data values to [0, 1] along one axis.
struct Axis {
  bool log = false;
  double lo = 0, hi = 1;
  double Map(double v) const {
    if (log) return (std::log10(v) - lo) / (hi - lo);
    return (v - lo) / (hi - lo);
  }
  // Tick values: powers of ten (and 2x, 5x when few) on log axes, ~5 round steps otherwise.
  std::vector<double> Ticks() const {
    std::vector<double> out;
    if (log) {
      const int a = static_cast<int>(std::floor(lo)), b = static_cast<int>(std::ceil(hi));
      for (int e = a; e <= b; ++e) {
        for (double m : {1.0, 2.0, 5.0}) {
          if (b - a > 3 && m != 1.0) continue;
          const double v = m * std::pow(10.0, e);
          const double l = std::log10(v);
          if (l >= lo - 1e-9 && l <= hi + 1e-9) out.push_back(v);
        }
      }
      return out;
    }
    const double span = hi - lo;
    const double raw = span / 5;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 5.0, 10.0}) {
      if (raw <= m * mag) {
        step = m * mag;
        break;
      }
    }
    for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push_back(v);
    return out;
  }
};

Axis MakeAxis(bool log, double lo, double hi) {
  Axis a;
  a.log = log;
  if (!(lo <= hi)) {
    lo = log ? 1 : 0;
    hi = log ? 10 : 1;
  }
  if (log) {
    a.lo = std::floor(std::log10(lo) * 4) / 4;
    a.hi = std::ceil(std::log10(hi) * 4) / 4;
    if (a.hi - a.lo < 0.5) a.hi = a.lo + 1;
  } else {
    a.lo = std::min(0.0, lo);
    a.hi = hi > a.lo ? hi * 1.05 : a.lo + 1;
  }
  return a;
}

// Tick labels: whole numbers as they are ("8", "1000"), the rest with an SI suffix.
std::string TickLabel(double v) {
  if (v >= 1 && v < 1e4 && v == static_cast<double>(static_cast<int64_t>(v))) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  return FormatNumber(v);
}

bool Usable(bool log, double v) { return std::isfinite(v) && (!log || v > 0); }

std::string RenderPanel(const Panel& p, int x0, int w, int h) {
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  for (const Series& s : p.series) {
    for (const auto& [x, y] : s.points) {
      if (!Usable(p.log_x, x) || !Usable(p.log_y, y)) continue;
      xlo = std::min(xlo, x);
      xhi = std::max(xhi, x);
      ylo = std::min(ylo, y);
      yhi = std::max(yhi, y);
    }
  }
  const bool empty = !(xlo <= xhi);
  const Axis ax = MakeAxis(p.log_x, xlo, xhi), ay = MakeAxis(p.log_y, ylo, yhi);
  const int pw = w - kLeft - kRight, ph = h - kTop - kBottom;
  auto X = [&](double v) { return x0 + kLeft + ax.Map(v) * pw; };
  auto Y = [&](double v) { return kTop + (1 - ay.Map(v)) * ph; };
  std::string out;
  absl::StrAppendFormat(&out,
                        "<text x=\"%d\" y=\"22\" text-anchor=\"middle\" font-size=\"14\" "
                        "font-weight=\"bold\">%s</text>\n",
                        x0 + kLeft + pw / 2, cli::XmlEscaped(p.title));
  absl::StrAppendFormat(&out,
                        "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
                        "stroke=\"#444\"/>\n",
                        x0 + kLeft, kTop, pw, ph);
  for (double t : ax.Ticks()) {
    const double x = X(t);
    absl::StrAppendFormat(&out,
                          "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>"
                          "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"11\">%s"
                          "</text>\n",
                          x, kTop, x, kTop + ph, x, kTop + ph + 14, cli::XmlEscaped(TickLabel(t)));
  }
  for (double t : ay.Ticks()) {
    const double y = Y(t);
    absl::StrAppendFormat(&out,
                          "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                          "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" font-size=\"11\">%s"
                          "</text>\n",
                          x0 + kLeft, y, x0 + kLeft + pw, y, x0 + kLeft - 4, y + 4,
                          cli::XmlEscaped(TickLabel(t)));
  }
  absl::StrAppendFormat(
      &out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"12\">%s</text>\n",
      x0 + kLeft + pw / 2, h - 12, cli::XmlEscaped(p.x_label));
  absl::StrAppendFormat(&out,
                        "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"12\" "
                        "transform=\"rotate(-90 %d %d)\">%s</text>\n",
                        x0 + 16, kTop + ph / 2, x0 + 16, kTop + ph / 2, cli::XmlEscaped(p.y_label));
  if (empty) {
    absl::StrAppendFormat(&out,
                          "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"12\">"
                          "no data</text>\n",
                          x0 + kLeft + pw / 2, kTop + ph / 2);
    return out;
  }
  for (size_t i = 0; i < p.series.size(); ++i) {
    const Series& s = p.series[i];
    const char* color = kColors[i % (sizeof kColors / sizeof kColors[0])];
    std::vector<std::pair<double, double>> pts;
    for (const auto& [x, y] : s.points) {
      if (Usable(p.log_x, x) && Usable(p.log_y, y)) pts.emplace_back(x, y);
    }
    std::sort(pts.begin(), pts.end());
    std::string path;
    for (const auto& [x, y] : pts) {
      absl::StrAppendFormat(&path, "%s%.1f,%.1f", path.empty() ? "" : " ", X(x), Y(y));
    }
    if (pts.size() > 1) {
      absl::StrAppendFormat(&out,
                            "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" "
                            "stroke-width=\"2\"/>\n",
                            path, color);
    }
    for (const auto& [x, y] : pts) {
      absl::StrAppendFormat(&out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", X(x),
                            Y(y), color);
    }
    const int ly = kTop + 14 + 15 * static_cast<int>(i);
    absl::StrAppendFormat(&out,
                          "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                          "<text x=\"%d\" y=\"%d\" font-size=\"11\">%s</text>\n",
                          x0 + kLeft + 8, ly - 9, color, x0 + kLeft + 22, ly,
                          cli::XmlEscaped(s.name));
  }
  return out;
}

}  // namespace

std::string RenderSvg(const std::string& title, const std::vector<Panel>& panels, int panel_width,
                      int panel_height) {
  const int width = panel_width * std::max<int>(1, static_cast<int>(panels.size()));
  const int height = panel_height + 30;
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"12\" fill=\"#555\">%s</text>\n"
      "<g transform=\"translate(0,0)\">\n",
      width, height, width, height, width / 2, height - 8, cli::XmlEscaped(title));
  for (size_t i = 0; i < panels.size(); ++i) {
    absl::StrAppend(
        &out, RenderPanel(panels[i], static_cast<int>(i) * panel_width, panel_width, panel_height));
  }
  absl::StrAppend(&out, "</g>\n</svg>\n");
  return out;
}

}  // namespace memtrace::bench
