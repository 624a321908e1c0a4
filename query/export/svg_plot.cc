#include "query/export/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "query/analysis/bucket_windows.h"
#include "query/analysis/diverged.h"
#include "query/analysis/leaks.h"
#include "query/analysis/units.h"
#include "query/cli/text_escape.h"

namespace memtrace::exporter {
namespace {

using analysis::kGiB;

constexpr int kLeft = 90;
constexpr int kRight = 210;
constexpr int kTop = 78;
constexpr int kBottom = 60;

constexpr const char* kPalette[] = {"#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
                                    "#17becf", "#bcbd22", "#7f7f7f", "#aec7e8", "#98df8a"};
constexpr char kHighlight[] = "#d62728";
constexpr char kFollower[] = "#ff7f0e";
constexpr char kMuted[] = "#a8b3bf";
constexpr char kLeakColor[] = "#6a3d9a";
constexpr char kOomColor[] = "#b00020";

std::string Number(double v) {
  std::string s = absl::StrFormat("%.2f", v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

std::string GibLabel(double gib) { return absl::StrCat(Number(gib), " GiB"); }

// The x axis: steps, or time buckets (a job without step markers, or --axis time). A bucket's
// key is its start in ns since the epoch / bucket_ns: a number like 1796613477 for 1 s buckets,
// which is written under its own attribute names and labelled as a clock time, never as a step.
struct XAxis {
  int64_t bucket_ns = 0;  // 0: steps

  bool time() const { return bucket_ns > 0; }
  // As in "the first step examined after warm-up".
  const char* name() const { return time() ? "time bucket" : "step"; }
  const char* tick_attribute() const { return time() ? "data-bucket" : "data-step"; }
  const char* onset_attribute() const { return time() ? "data-onset-bucket" : "data-onset-step"; }
};

// A rate per key: "/step"; on a time axis per second or minute, which neither the buckets drawn
// nor the analyses' wider windows of them (bucket_windows.h) can be taken for: both were
// "/bucket", 2.13 MiB/bucket on the line and 128 MiB/bucket in `memtrace leaks`.
std::string RateText(double bytes_per_key, const XAxis& axis) {
  return analysis::FormatRate(bytes_per_key, axis.bucket_ns);
}

absl::Time KeyTime(double key, int64_t bucket_ns) {
  return absl::FromUnixNanos(static_cast<int64_t>(std::llround(key * bucket_ns)));
}

struct Series {
  const analysis::RankTimeline* rank;
  std::vector<std::pair<int64_t, uint64_t>> points;  // (step, bytes)
  uint64_t max_bytes = 0;
};

// The ranks drawn: each one's latest attempt, those --rank left out dropped.
std::vector<Series> CollectSeries(const analysis::JobTimeline& job, const PlotOptions& options) {
  std::vector<Series> series;
  for (const analysis::RankTimeline* rank : analysis::SelectRanks(job)) {
    if (!options.ranks.empty() && !options.ranks.count(rank->rank)) continue;
    Series s{rank, {}, 0};
    for (const analysis::StepPoint& p : rank->steps) {
      uint64_t v = analysis::MetricValue(p, options.metric);
      s.points.push_back({p.step, v});
      s.max_bytes = std::max(s.max_bytes, v);
    }
    series.push_back(std::move(s));
  }
  return series;
}

// Where things go on the canvas: the plot area inside the margins, the ticks, and the scales
// from steps and bytes to pixels.
class PlotFrame {
 public:
  PlotFrame(const PlotOptions& options, const std::vector<Series>& series, const XAxis& axis,
            const PlotMarks& marks)
      : width_(std::max(options.width, kLeft + kRight + 100)),
        height_(std::max(options.height, kTop + kBottom + 100)),
        plot_w_(width_ - kLeft - kRight),
        plot_h_(height_ - kTop - kBottom) {
    uint64_t max_bytes = 0;
    for (const Series& s : series) {
      for (const auto& [step, bytes] : s.points) {
        min_step_ = std::min(min_step_, step);
        max_step_ = std::max(max_step_, step);
      }
      max_bytes = std::max(max_bytes, s.max_bytes);
    }
    // An OOM ends its rank's stream within its step, a row cut short that no line draws
    // (RankTimeline::cut_short): the axis reaches it, so its mark is drawn where it happened.
    if (min_step_ != INT64_MAX) {
      for (const PlotMarks::Oom& oom : marks.ooms) {
        if (!options.ranks.empty() && options.ranks.count(oom.rank) == 0) continue;  // not drawn
        max_step_ = std::max(max_step_, oom.step);
      }
    }
    if (min_step_ == INT64_MAX) min_step_ = 0, max_step_ = 1;
    if (max_step_ == min_step_) max_step_ = min_step_ + 1;
    y_ticks_ = NiceTicks(0, std::max(max_bytes * 1.05, 0.1 * kGiB) / kGiB);
    x_ticks_ = axis.time()
                   ? TimeTicks(min_step_, max_step_, axis.bucket_ns)
                   : NiceTicks(static_cast<double>(min_step_), static_cast<double>(max_step_));
    // Ticks are whole steps (buckets) inside the range.
    x_ticks_.erase(std::remove_if(x_ticks_.begin(), x_ticks_.end(),
                                  [&](double v) {
                                    return std::floor(v) != v || v < min_step_ || v > max_step_;
                                  }),
                   x_ticks_.end());
  }

  double X(double step) const {
    return kLeft + (step - min_step_) / static_cast<double>(max_step_ - min_step_) * plot_w_;
  }
  double Y(double bytes) const { return kTop + plot_h_ - bytes / kGiB / y_ticks_.back() * plot_h_; }
  bool Spans(int64_t step) const { return step >= min_step_ && step <= max_step_; }
  int64_t min_key() const { return min_step_; }
  int64_t max_key() const { return max_step_; }

  int width() const { return width_; }
  int height() const { return height_; }
  int plot_w() const { return plot_w_; }
  int plot_h() const { return plot_h_; }
  const std::vector<double>& x_ticks() const { return x_ticks_; }
  const std::vector<double>& y_ticks() const { return y_ticks_; }  // GiB; the last is the top

 private:
  int width_, height_, plot_w_, plot_h_;
  int64_t min_step_ = INT64_MAX, max_step_ = INT64_MIN;
  std::vector<double> x_ticks_, y_ticks_;
};

// How each rank is drawn: the diverged rank on top in red, the ranks that followed it in
// orange, the rest muted beside them (or in palette colours when no rank is highlighted).
class RankStyles {
 public:
  RankStyles(const PlotMarks& marks, const std::vector<Series>& series) : marks_(marks) {
    highlight_drawn_ = marks.highlighted_rank.has_value() &&
                       std::any_of(series.begin(), series.end(), [&](const Series& s) {
                         return s.rank->rank == *marks.highlighted_rank;
                       });
  }

  // Whether the diverged rank is among those drawn.
  bool highlight_drawn() const { return highlight_drawn_; }
  bool Highlighted(uint32_t rank) const {
    return highlight_drawn_ && rank == *marks_.highlighted_rank;
  }
  bool Follower(uint32_t rank) const {
    return std::find(marks_.followers.begin(), marks_.followers.end(), rank) !=
           marks_.followers.end();
  }
  // Drawing order: ordinary ranks (0), then followers (1), the highlighted rank (2) on top.
  int Layer(uint32_t rank) const {
    if (Highlighted(rank)) return 2;
    return Follower(rank) ? 1 : 0;
  }
  // (colour, stroke width) of the rank drawn at `index` among the series.
  std::pair<std::string, double> Of(uint32_t rank, size_t index) const {
    if (Highlighted(rank)) return {kHighlight, 3.0};
    if (Follower(rank)) return {kFollower, 2.0};
    if (highlight_drawn_) return {kMuted, 1.2};
    return {kPalette[index % (sizeof(kPalette) / sizeof(kPalette[0]))], 1.6};
  }

 private:
  const PlotMarks& marks_;
  bool highlight_drawn_ = false;
};

// Indices of `series` ordered by layer, stably: ascending to draw, descending for the legend.
std::vector<size_t> ByLayer(const std::vector<Series>& series, const RankStyles& styles,
                            bool top_first) {
  std::vector<size_t> order(series.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int la = styles.Layer(series[a].rank->rank);
    const int lb = styles.Layer(series[b].rank->rank);
    return top_first ? la > lb : la < lb;
  });
  return order;
}

// `highlight_drawn`: the diverging rank is among the ranks drawn (--ranks may leave it out).
void AppendHeader(const analysis::JobTimeline& job, const PlotMarks& marks,
                  const PlotOptions& options, const PlotFrame& frame, size_t ranks,
                  bool highlight_drawn, const XAxis& axis, std::string* svg) {
  const std::string metric = std::string(PlotMetricName(options.metric));
  std::optional<int64_t> onset;
  if (highlight_drawn) {
    onset = marks.onset_step;
  } else {
    for (const PlotMarks::Leak& leak : marks.leaks) {
      if (!options.ranks.empty() && options.ranks.count(leak.rank) == 0) continue;
      onset = leak.since_step;  // the first leak drawn
      break;
    }
  }
  absl::StrAppendFormat(
      svg,
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"12\" "
      "data-job=\"%s\" data-metric=\"%s\" data-ranks=\"%d\" data-status=\"%s\" "
      "data-highlighted-rank=\"%s\" data-axis=\"%s\" data-bucket-ns=\"%d\" %s=\"%s\">\n",
      frame.width(), frame.height(), frame.width(), frame.height(), cli::XmlEscaped(job.job_id),
      metric, ranks, cli::XmlEscaped(marks.status),
      highlight_drawn ? absl::StrCat(*marks.highlighted_rank) : "", axis.time() ? "time" : "step",
      axis.bucket_ns, axis.onset_attribute(), onset ? absl::StrCat(*onset) : "");
  absl::StrAppend(svg, "<title>", cli::XmlEscaped(job.job_id), ": ", metric, " bytes by ",
                  axis.name(), "</title>\n");
  absl::StrAppendFormat(svg, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", frame.width(),
                        frame.height());
  absl::StrAppendFormat(
      svg,
      "<text class=\"title\" x=\"%d\" y=\"28\" font-size=\"18\" font-weight=\"bold\">"
      "job %s: %s bytes per %s, %d ranks</text>\n",
      kLeft, cli::XmlEscaped(job.job_id),
      options.metric == analysis::Metric::kEnd ? "live" : metric, axis.name(), ranks);
  // The ranks --ranks leaves out that ran out of memory: their OOM is the job's news too.
  std::vector<std::string> oom_not_drawn;
  for (const PlotMarks::Oom& oom : marks.ooms) {
    if (!options.ranks.empty() && !options.ranks.count(oom.rank)) {
      oom_not_drawn.push_back(absl::StrCat(oom.rank));
    }
  }
  if (!marks.message.empty() || !oom_not_drawn.empty()) {
    // The message is the job's (diverged over every rank); say when its rank is not drawn.
    std::string message =
        marks.highlighted_rank && !highlight_drawn
            ? absl::StrCat(marks.message, " (rank ", *marks.highlighted_rank, " is not drawn)")
            : marks.message;
    if (!oom_not_drawn.empty()) {
      // At most 4 named: 512 ranks out of memory made a line far wider than the plot.
      const size_t named = std::min<size_t>(oom_not_drawn.size(), 4);
      absl::StrAppend(&message, message.empty() ? "" : "; ", "rank",
                      oom_not_drawn.size() == 1 ? " " : "s ",
                      absl::StrJoin(oom_not_drawn.begin(), oom_not_drawn.begin() + named, ","),
                      oom_not_drawn.size() > named
                          ? absl::StrCat(" and ", oom_not_drawn.size() - named, " more")
                          : "",
                      " ran out of memory (not drawn)");
    }
    absl::StrAppendFormat(svg,
                          "<text class=\"subtitle\" x=\"%d\" y=\"50\" fill=\"#444\">%s</text>\n",
                          kLeft, cli::XmlEscaped(message));
  }
}

// The GiB and step axes with their grid lines, and the frame around the plot.
void AppendAxes(const PlotFrame& frame, absl::string_view metric, const XAxis& axis,
                std::string* svg) {
  const int plot_w = frame.plot_w(), plot_h = frame.plot_h();
  absl::StrAppend(svg, "<g class=\"axis\" data-axis=\"y\">\n");
  for (double gib : frame.y_ticks()) {
    double y = frame.Y(gib * kGiB);
    absl::StrAppendFormat(svg,
                          "<line x1=\"%d\" y1=\"%s\" x2=\"%d\" y2=\"%s\" stroke=\"#e3e7eb\"/>"
                          "<text class=\"tick\" data-gib=\"%s\" x=\"%d\" y=\"%s\" "
                          "text-anchor=\"end\">%s</text>\n",
                          kLeft, Number(y), kLeft + plot_w, Number(y), Number(gib), kLeft - 8,
                          Number(y + 4), GibLabel(gib));
  }
  absl::StrAppendFormat(svg,
                        "<text x=\"18\" y=\"%d\" transform=\"rotate(-90 18 %d)\" "
                        "text-anchor=\"middle\">%s bytes (GiB)</text>\n</g>\n",
                        kTop + plot_h / 2, kTop + plot_h / 2, metric);
  absl::StrAppend(svg, "<g class=\"axis\" data-axis=\"x\">\n");
  const std::vector<double>& ticks = frame.x_ticks();
  // The labels' precision: ms only where the ticks fall between whole seconds.
  // (TimeTicks' fallback may space them less than a bucket apart: then a bucket's.)
  const int64_t tick_every_ns = ticks.size() >= 2 && ticks[1] - ticks[0] >= 1
                                    ? std::llround(ticks[1] - ticks[0]) * axis.bucket_ns
                                    : axis.bucket_ns;
  for (double key : ticks) {
    double x = frame.X(key);
    absl::StrAppendFormat(
        svg,
        "<line x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\" stroke=\"#555\"/>"
        "<text class=\"tick\" %s=\"%s\" x=\"%s\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
        Number(x), kTop + plot_h, Number(x), kTop + plot_h + 5, axis.tick_attribute(), Number(key),
        Number(x), kTop + plot_h + 19,
        axis.time()
            ? TimeKeyLabel(key, axis.bucket_ns, frame.min_key(), frame.max_key(), tick_every_ns)
            : Number(key));
  }
  // A time axis names the day its clock times are on, and its bucket width.
  const std::string axis_title =
      axis.time()
          ? absl::StrCat(
                "time, UTC, from ",
                absl::FormatTime("%Y-%m-%d %H:%M:%S",
                                 KeyTime(static_cast<double>(frame.min_key()), axis.bucket_ns),
                                 absl::UTCTimeZone()),
                " (", absl::FormatDuration(absl::Nanoseconds(axis.bucket_ns)), " buckets)")
          : std::string("step");
  absl::StrAppendFormat(svg, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n</g>\n",
                        kLeft + plot_w / 2, frame.height() - 14, axis_title);
  absl::StrAppendFormat(svg,
                        "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
                        "stroke=\"#555\"/>\n",
                        kLeft, kTop, plot_w, plot_h);
}

void AppendLines(const std::vector<Series>& series, const PlotFrame& frame,
                 const RankStyles& styles, std::string* svg) {
  absl::StrAppend(svg, "<g class=\"lines\" fill=\"none\" stroke-linejoin=\"round\">\n");
  for (size_t i : ByLayer(series, styles, /*top_first=*/false)) {
    const Series& s = series[i];
    const uint32_t rank = s.rank->rank;
    auto [color, stroke] = styles.Of(rank, i);
    std::vector<std::string> pts;
    pts.reserve(std::min(s.points.size(), 4 * static_cast<size_t>(frame.plot_w() + 1)));
    for (size_t p : DrawnPoints(s.points, frame.min_key(), frame.max_key(), frame.plot_w())) {
      const auto& [step, bytes] = s.points[p];
      pts.push_back(absl::StrCat(Number(frame.X(step)), ",", Number(frame.Y(bytes))));
    }
    const bool highlighted = styles.Highlighted(rank);
    absl::StrAppendFormat(
        svg,
        "<polyline class=\"rank-line\" data-rank=\"%d\" data-attempt=\"%d\" "
        "data-highlighted=\"%s\" data-diverged=\"%s\" data-points=\"%d\" data-max-bytes=\"%d\" "
        "stroke=\"%s\" stroke-width=\"%s\" points=\"%s\"/>\n",
        rank, s.rank->attempt, highlighted ? "true" : "false",
        highlighted || styles.Follower(rank) ? "true" : "false", s.points.size(), s.max_bytes,
        color, Number(stroke), absl::StrJoin(pts, " "));
  }
  absl::StrAppend(svg, "</g>\n");
}

// A dashed vertical line where something begins, with its label.
struct Onset {
  std::string kind;  // data-kind: "divergence", "leak" or "divergence leak"
  uint32_t rank;
  int64_t step;
  std::string label;
  const char* color;
  // A shorter label for when `label` fits on neither side of the line; empty: none.
  std::string short_label;
};

// The divergence and each leak inside the plotted steps; a leak on the diverged rank from the
// same step is merged into the divergence's line rather than drawn over it.
std::vector<Onset> CollectOnsets(const PlotMarks& marks, const PlotOptions& options,
                                 const PlotFrame& frame, const RankStyles& styles,
                                 const XAxis& axis) {
  const int64_t bucket_ns = axis.bucket_ns;
  // "step 32", or on time buckets the clock time as the ticks show it ("03:17:57"): the axis
  // title names the day, and the label must fit beside the line.
  auto key_text = [&](int64_t key) {
    return axis.time() ? TimeKeyLabel(static_cast<double>(key), bucket_ns, frame.min_key(),
                                      frame.max_key(), bucket_ns)
                       : analysis::FormatKey(key, 0);
  };
  std::vector<Onset> onsets;
  auto add = [&](const std::string& kind, uint32_t rank, int64_t step, const std::string& label,
                 const char* color) {
    if (frame.Spans(step)) onsets.push_back({kind, rank, step, label, color, ""});
  };
  std::vector<PlotMarks::Leak> leaks = marks.leaks;
  if (styles.highlight_drawn()) {
    std::string label =
        absl::StrCat("rank ", *marks.highlighted_rank, " diverges at ", key_text(marks.onset_step));
    // The line stands at the onset, so the gap it is labelled with is the onset's; the gap
    // it grew to follows ("(+410 MiB vs cohort, +12.0 GiB at step 99)"), unless there is no
    // room for it.
    std::string short_label = label;
    if (marks.onset_excess_bytes != 0) {
      absl::StrAppend(&label, " (", analysis::FormatSignedBytes(marks.onset_excess_bytes),
                      " vs cohort");
      short_label = absl::StrCat(label, ")");
      if (marks.last_step != marks.onset_step && marks.last_excess_bytes != 0) {
        absl::StrAppend(&label, ", ", analysis::FormatSignedBytes(marks.last_excess_bytes), " at ",
                        key_text(marks.last_step));
      }
      absl::StrAppend(&label, ")");
    }
    std::string kind = "divergence";
    auto same = std::find_if(leaks.begin(), leaks.end(), [&](const PlotMarks::Leak& l) {
      return l.rank == *marks.highlighted_rank && l.since_step == marks.onset_step;
    });
    if (same != leaks.end()) {
      kind = "divergence leak";
      absl::StrAppend(&label, ", leaking ", RateText(same->bytes_per_step, axis));
      absl::StrAppend(&short_label, ", leaking ", RateText(same->bytes_per_step, axis));
      leaks.erase(same);
    }
    add(kind, *marks.highlighted_rank, marks.onset_step, label, kHighlight);
    if (!onsets.empty() && short_label != label) onsets.back().short_label = short_label;
  }
  size_t leak_labels = 0;
  for (const PlotMarks::Leak& leak : leaks) {
    if (!options.ranks.empty() && !options.ranks.count(leak.rank)) continue;
    if (++leak_labels > 4) break;  // a job-wide growth would otherwise draw a line per rank
    add("leak", leak.rank, leak.since_step,
        absl::StrCat("leak on rank ", leak.rank, " from ", key_text(leak.since_step), " (",
                     RateText(leak.bytes_per_step, axis), ")",
                     leak.since_first_examined
                         ? absl::StrCat(", the first ", axis.name(),
                                        " examined after warm-up: it may have begun earlier")
                         : ""),
        kLeakColor);
  }
  // The first 4 drawn ranks' OOMs; the last label counts the others.
  std::vector<const PlotMarks::Oom*> ooms;
  for (const PlotMarks::Oom& oom : marks.ooms) {
    if (options.ranks.empty() || options.ranks.count(oom.rank)) ooms.push_back(&oom);
  }
  constexpr size_t kOomLabels = 4;
  for (size_t i = 0; i < ooms.size() && i < kOomLabels; ++i) {
    const PlotMarks::Oom& oom = *ooms[i];
    std::string label = absl::StrCat("rank ", oom.rank, " out of memory at ", key_text(oom.step));
    if (oom.requested_bytes > 0) {
      absl::StrAppend(&label, " (a ",
                      analysis::FormatBytes(static_cast<double>(oom.requested_bytes)),
                      " allocation failed)");
    }
    if (i + 1 == kOomLabels && ooms.size() > kOomLabels) {
      const size_t more = ooms.size() - kOomLabels;
      absl::StrAppend(&label, "; ", more, more == 1 ? " more rank" : " more ranks",
                      " ran out of memory");
    }
    add("oom", oom.rank, oom.step, label, kOomColor);
  }
  return onsets;
}

void AppendOnsets(const std::vector<Onset>& onsets, const XAxis& axis, const PlotFrame& frame,
                  std::string* svg) {
  absl::StrAppend(svg, "<g class=\"onsets\">\n");
  // Labels start beside the outermost of the lines near them, so no label crosses a line.
  for (size_t i = 0; i < onsets.size(); ++i) {
    const Onset& o = onsets[i];
    double x = frame.X(static_cast<double>(o.step));
    // Inside the plot: to the left of the line when the label does not fit to its right and
    // has more room there (about 6.8 px a character of DejaVu Sans at 12 px). A fixed share of
    // the width let long labels run into the legend.
    // A label starts beside the outermost line near its own (within 60 px), on the side it goes.
    double leftmost = x, rightmost = x;
    for (const Onset& other : onsets) {
      const double ox = frame.X(static_cast<double>(other.step));
      if (std::fabs(ox - x) < 60) {
        leftmost = std::min(leftmost, ox);
        rightmost = std::max(rightmost, ox);
      }
    }
    const double right_room = kLeft + frame.plot_w() - (rightmost + 5);
    const double left_room = leftmost - 5 - kLeft;
    const auto width = [](const std::string& text) {
      return 6.8 * static_cast<double>(text.size());
    };
    const std::string& label =
        width(o.label) > std::max(left_room, right_room) && !o.short_label.empty() ? o.short_label
                                                                                   : o.label;
    const bool flip = right_room < width(label) && left_room > right_room;
    const double anchor = flip ? leftmost : rightmost;
    double label_y = kTop + 16 + 16 * (i % 6);
    absl::StrAppendFormat(
        svg,
        "<line class=\"onset\" data-kind=\"%s\" data-rank=\"%d\" %s=\"%d\" "
        "x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\" stroke=\"%s\" stroke-width=\"1.5\" "
        "stroke-dasharray=\"6 4\"/>"
        "<text class=\"onset-label\" data-rank=\"%d\" x=\"%s\" y=\"%s\" fill=\"%s\" "
        "text-anchor=\"%s\">%s</text>\n",
        o.kind, o.rank, axis.onset_attribute(), o.step, Number(x), kTop, Number(x),
        kTop + frame.plot_h(), o.color, o.rank, Number(flip ? anchor - 5 : anchor + 5),
        Number(label_y), o.color, flip ? "end" : "start", cli::XmlEscaped(label));
  }
  absl::StrAppend(svg, "</g>\n");
}

// The highlighted rank and followers first, then the others, up to max_legend_entries.
void AppendLegend(const std::vector<Series>& series, const RankStyles& styles,
                  const PlotOptions& options, const PlotFrame& frame, std::string* svg) {
  absl::StrAppendFormat(svg, "<g class=\"legend\" transform=\"translate(%d %d)\">\n",
                        kLeft + frame.plot_w() + 20, kTop + 4);
  size_t shown = 0;
  for (size_t i : ByLayer(series, styles, /*top_first=*/true)) {
    if (shown == options.max_legend_entries) break;
    const Series& s = series[i];
    const uint32_t rank = s.rank->rank;
    auto [color, stroke] = styles.Of(rank, i);
    const bool highlighted = styles.Highlighted(rank);
    std::string name = absl::StrCat("rank ", rank);
    if (s.rank->attempt > 0) absl::StrAppend(&name, " attempt ", s.rank->attempt);
    if (highlighted) {
      absl::StrAppend(&name, " (diverged)");
    } else if (styles.Follower(rank)) {
      absl::StrAppend(&name, " (followed)");
    }
    int y = static_cast<int>(shown) * 20;
    absl::StrAppendFormat(svg,
                          "<g class=\"legend-entry\" data-rank=\"%d\" data-highlighted=\"%s\">"
                          "<line x1=\"0\" y1=\"%d\" x2=\"24\" y2=\"%d\" stroke=\"%s\" "
                          "stroke-width=\"%s\"/><text x=\"30\" y=\"%d\">%s</text></g>\n",
                          rank, highlighted ? "true" : "false", y, y, color, Number(stroke), y + 4,
                          cli::XmlEscaped(name));
    ++shown;
  }
  if (shown < series.size()) {
    absl::StrAppendFormat(svg,
                          "<text class=\"legend-more\" x=\"0\" y=\"%d\">+ %d more ranks</text>\n",
                          static_cast<int>(shown) * 20 + 4, series.size() - shown);
  }
  absl::StrAppend(svg, "</g>\n");
}

}  // namespace

absl::StatusOr<analysis::Metric> ParsePlotMetric(absl::string_view text) {
  if (text == "live") return analysis::Metric::kEnd;
  if (text == "floor") return analysis::Metric::kFloor;
  if (text == "peak") return analysis::Metric::kPeak;
  return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not one of live, floor, peak"));
}

absl::string_view PlotMetricName(analysis::Metric metric) {
  switch (metric) {
    case analysis::Metric::kEnd:
      return "live";
    case analysis::Metric::kFloor:
      return "floor";
    case analysis::Metric::kPeak:
      return "peak";
  }
  return "live";
}

std::vector<size_t> DrawnPoints(const std::vector<std::pair<int64_t, uint64_t>>& points,
                                int64_t min_key, int64_t max_key, int columns) {
  std::vector<size_t> drawn;
  if (points.size() <= 4 * static_cast<size_t>(std::max(columns, 1)) || max_key <= min_key) {
    drawn.resize(points.size());
    for (size_t i = 0; i < points.size(); ++i) drawn[i] = i;
    return drawn;
  }
  const double per_key = static_cast<double>(columns) / static_cast<double>(max_key - min_key);
  const auto column = [&](size_t i) {
    return static_cast<int64_t>(
        std::floor(static_cast<double>(points[i].first - min_key) * per_key));
  };
  for (size_t begin = 0; begin < points.size();) {
    const int64_t c = column(begin);
    size_t end = begin + 1, lowest = begin, highest = begin;
    for (; end < points.size() && column(end) == c; ++end) {
      if (points[end].second < points[lowest].second) lowest = end;
      if (points[end].second > points[highest].second) highest = end;
    }
    size_t kept[4] = {begin, lowest, highest, end - 1};
    std::sort(kept, kept + 4);
    for (size_t k = 0; k < 4; ++k) {
      if (k == 0 || kept[k] != kept[k - 1]) drawn.push_back(kept[k]);
    }
    begin = end;
  }
  return drawn;
}

std::vector<double> NiceTicks(double min, double max) {
  if (!(max > min)) max = min + 1;
  double span = max - min;
  double step = 1;
  double magnitude = std::pow(10.0, std::floor(std::log10(span)) - 1);
  for (double m : {1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0}) {
    step = m * magnitude;
    if (span / step <= 10) break;
  }
  std::vector<double> ticks;
  // Multiples of the step, not a running sum, so 0.1 + 0.05 rounding never accumulates; the
  // last tick is at or above `max`, so the axis covers every value.
  int64_t first = static_cast<int64_t>(std::floor(min / step + 1e-9));
  int64_t last = static_cast<int64_t>(std::ceil(max / step - 1e-9));
  for (int64_t k = first; k <= last; ++k) ticks.push_back(k * step);
  return ticks;
}

std::vector<double> TimeTicks(int64_t min_key, int64_t max_key, int64_t bucket_ns) {
  if (max_key <= min_key) max_key = min_key + 1;
  constexpr int64_t kMs = 1'000'000, kS = 1000 * kMs, kMin = 60 * kS, kH = 60 * kMin;
  constexpr int64_t kIntervals[] = {kMs,       2 * kMs,   5 * kMs,   10 * kMs, 20 * kMs,   50 * kMs,
                                    100 * kMs, 200 * kMs, 500 * kMs, kS,       2 * kS,     5 * kS,
                                    10 * kS,   15 * kS,   30 * kS,   kMin,     2 * kMin,   5 * kMin,
                                    10 * kMin, 15 * kMin, 30 * kMin, kH,       2 * kH,     3 * kH,
                                    6 * kH,    12 * kH,   24 * kH,   48 * kH,  7 * 24 * kH};
  // In buckets, so a tick is a whole bucket: a round clock time when the bucket divides it.
  const double span = static_cast<double>(max_key - min_key);
  int64_t every = 0;
  for (int64_t interval : kIntervals) {
    if (interval < bucket_ns || interval % bucket_ns != 0) continue;
    every = interval / bucket_ns;
    if (span / static_cast<double>(every) <= 10) break;
  }
  if (every == 0 || span / static_cast<double>(every) > 10) {
    // Beyond a week (or buckets that divide no round interval): plain 1-2-5 bucket counts.
    return NiceTicks(static_cast<double>(min_key), static_cast<double>(max_key));
  }
  std::vector<double> ticks;
  const int64_t first = min_key / every + (min_key % every > 0 ? 1 : 0);
  for (int64_t k = first; k * every <= max_key; ++k)
    ticks.push_back(static_cast<double>(k * every));
  return ticks;
}

std::string TimeKeyLabel(double key, int64_t bucket_ns, int64_t min_key, int64_t max_key,
                         int64_t precision_ns) {
  constexpr int64_t kS = 1'000'000'000;
  const absl::TimeZone utc = absl::UTCTimeZone();
  const auto day = [&](int64_t k) {
    return absl::FormatTime("%Y-%m-%d", KeyTime(static_cast<double>(k), bucket_ns), utc);
  };
  const bool dated =
      static_cast<double>(max_key - min_key) * static_cast<double>(bucket_ns) >= 86400e9 ||
      day(min_key) != day(max_key);
  const bool ms = precision_ns % kS != 0;
  std::string format = dated ? "%m-%d %H:%M" : "%H:%M";
  // A dated axis ticked in whole minutes needs no seconds; an undated one always shows them.
  if (!dated || ms || precision_ns % (60 * kS) != 0) format += ms ? ":%E3S" : ":%S";
  return absl::FormatTime(format, KeyTime(key, bucket_ns), utc);
}

PlotMarks MarksFromAnalyses(const analysis::JobTimeline& plotted, bool step_windows) {
  // As the collector does (bucket_windows.h): time buckets shorter than the job's steps are
  // analysed in windows of whole steps; the marks go back to the buckets plotted (a window's
  // first), and rates to per bucket.
  const int64_t window = step_windows ? analysis::StepWindowOf(plotted) : 1;
  std::optional<analysis::JobTimeline> windows;
  if (window > 1) windows = analysis::InStepWindows(plotted, window);
  const analysis::JobTimeline& job = windows.has_value() ? *windows : plotted;
  PlotMarks marks;
  analysis::DivergenceReport divergence = analysis::FindDivergence(job);
  marks.message = divergence.message;
  if (window > 1 && !marks.message.empty()) {
    // Its "buckets" are the windows, not the buckets drawn.
    absl::StrAppend(&marks.message, " (its buckets: the analyses' ",
                    analysis::FormatDuration(static_cast<double>(window * plotted.bucket_ns)),
                    " windows of the buckets drawn)");
  }
  switch (divergence.status) {
    case analysis::DivergenceStatus::kDiverged:
      marks.status = "diverged";
      break;
    case analysis::DivergenceStatus::kNoneDiverged:
      marks.status = "none";
      break;
    case analysis::DivergenceStatus::kTooFewRanks:
      marks.status = "too-few-ranks";
      break;
    case analysis::DivergenceStatus::kTooFewSteps:
      marks.status = "too-few-steps";
      break;
  }
  if (!divergence.diverged.empty()) {
    const analysis::RankDivergence& first = divergence.diverged.front();
    marks.highlighted_rank = first.rank;
    marks.onset_step = first.onset_step * window;
    marks.onset_excess_bytes = first.excess_bytes;
    marks.last_step = first.last_step * window;
    marks.last_excess_bytes = first.last_excess_bytes;
    for (size_t i = 1; i < divergence.diverged.size(); ++i) {
      marks.followers.push_back(divergence.diverged[i].rank);
    }
  }
  // Where a rank ran out of memory: the end of the story the lines tell. Of a restarted job,
  // the lines are each rank's latest attempt; an earlier attempt's OOM drawn over them read as
  // the current run's (the summary names it as not drawn: plot_command.cc).
  for (const analysis::RankTimeline* rank : analysis::SelectRanks(plotted)) {
    if (const analysis::StepPoint* p = rank->FirstOomRow()) {
      marks.ooms.push_back({rank->rank, p->step, p->oom_requested_bytes});
    }
  }
  analysis::LeakReport leaks = analysis::FindLeaks(job);
  for (const analysis::RankCurve& curve : leaks.curves) {
    if (curve.curve != analysis::CurveClass::kLeak) continue;
    int64_t since = curve.evidence.rising_since_step >= 0 ? curve.evidence.rising_since_step
                                                          : curve.evidence.first_step;
    marks.leaks.push_back(
        {curve.rank, since * window,
         curve.evidence.floor_bytes_per_step / static_cast<double>(window),
         curve.evidence.rising_from_first_examined && leaks.params.warmup_steps > 0});
  }
  return marks;
}

std::string RenderMemoryPlot(const analysis::JobTimeline& job, const PlotMarks& marks,
                             const PlotOptions& options) {
  const std::vector<Series> series = CollectSeries(job, options);
  const XAxis axis{job.time_axis ? job.bucket_ns : 0};
  const PlotFrame frame(options, series, axis, marks);
  const RankStyles styles(marks, series);
  std::string svg;
  AppendHeader(job, marks, options, frame, series.size(), styles.highlight_drawn(), axis, &svg);
  AppendAxes(frame, PlotMetricName(options.metric), axis, &svg);
  AppendLines(series, frame, styles, &svg);
  // A job without step markers leaks per time bucket: "128 MiB/step" there was a bucket's.
  AppendOnsets(CollectOnsets(marks, options, frame, styles, axis), axis, frame, &svg);
  AppendLegend(series, styles, options, frame, &svg);
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

}  // namespace memtrace::exporter
