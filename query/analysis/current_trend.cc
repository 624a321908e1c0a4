#include "query/analysis/current_trend.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace memtrace::analysis {
namespace {

// Split points tried on the first pass; each later pass looks closer around the best one.
constexpr size_t kCandidatesPerPass = 16;

// The noise of one point, from the spread of step-to-step differences.
double PointNoise(absl::Span<const double> y, std::vector<double>& scratch) {
  scratch.resize(y.size() - 1);
  for (size_t i = 1; i < y.size(); ++i) scratch[i - 1] = y[i] - y[i - 1];
  return RobustSpread(scratch).scale / std::sqrt(2.0);
}

// The noise of one point if the series is flat before `split` and a line after it: the spread
// of each part's step-to-step differences about that part's own median, pooled. Across a bend
// PointNoise counts the rise's steps as noise (half the differences flat, half a rise, read
// the rate as the noise).
double SplitNoise(absl::Span<const double> y, size_t split, std::vector<double>& scratch) {
  std::vector<double> part;
  scratch.clear();
  for (auto [begin, end] : {std::pair<size_t, size_t>{0, split}, {split, y.size()}}) {
    part.clear();
    for (size_t i = begin + 1; i < end; ++i) part.push_back(y[i] - y[i - 1]);
    if (part.empty()) continue;
    std::vector<double> sorted = part;
    const double median = MedianInPlace(absl::MakeSpan(sorted));
    for (double d : part) scratch.push_back(d - median);
  }
  if (scratch.size() < 2) return 0;
  return RobustSpread(scratch).scale / std::sqrt(2.0);
}

// The median residual of points [begin, begin + count) against the line.
double MedianResidual(absl::Span<const double> x, absl::Span<const double> y, const TrendFit& fit,
                      size_t begin, size_t count, std::vector<double>& scratch) {
  scratch.resize(count);
  for (size_t k = 0; k < count; ++k) {
    scratch[k] = y[begin + k] - (fit.intercept + fit.slope * x[begin + k]);
  }
  return MedianInPlace(absl::MakeSpan(scratch));
}

// Whether one end of the series sits above its line by more than its noise: the median of the
// first or the last `tail` residuals against twice the noise of one point (from the spread of
// step-to-step differences, which a trend or a bend barely moves, where the residuals' own
// spread grows with the misfit). A leak over the later part of the window ends above the line
// when it rose for less than half the window (the line's slope is diluted) and starts above it
// when it rose for more (the line follows the rise down past the flat start). A series that kept
// to one line (flat, or rising all along) rarely does either, and then no split can explain it
// better; this keeps the search off most series, whose cost it would multiply.
bool BendsAwayFromTheLine(absl::Span<const double> x, absl::Span<const double> y,
                          const TrendFit& fit, size_t tail, std::vector<double>& scratch) {
  const double noise = PointNoise(y, scratch);
  const double end = MedianResidual(x, y, fit, y.size() - tail, tail, scratch);
  if (end > 0 && end > 2 * noise) return true;
  const double start = MedianResidual(x, y, fit, 0, tail, scratch);
  return start > 0 && start > 2 * noise;
}

double LineCost(absl::Span<const double> x, absl::Span<const double> y, const TrendFit& fit) {
  double cost = 0;
  for (size_t i = 0; i < y.size(); ++i) cost += std::abs(y[i] - (fit.intercept + fit.slope * x[i]));
  return cost;
}

// Cost of "y[0, split) flat at their median, then a line from (x[split - 1], that median)" whose
// slope is the median of the later points' slopes from that corner: the continuous two-part
// shape of a leak that starts after a plateau.
double SplitCost(absl::Span<const double> x, absl::Span<const double> y, size_t split,
                 std::vector<double>& scratch) {
  scratch.assign(y.begin(), y.begin() + split);
  const double level = MedianInPlace(absl::MakeSpan(scratch));
  const double corner = x[split - 1];
  scratch.clear();
  for (size_t i = split; i < y.size(); ++i) scratch.push_back((y[i] - level) / (x[i] - corner));
  const double slope = MedianInPlace(absl::MakeSpan(scratch));
  double cost = 0;
  for (size_t i = 0; i < split; ++i) cost += std::abs(y[i] - level);
  for (size_t i = split; i < y.size(); ++i) {
    cost += std::abs(y[i] - (level + slope * (x[i] - corner)));
  }
  return cost;
}

// The split in [lo, hi] of least SplitCost, and that cost. The cost is not smooth in the split,
// so a coarse pass finds the region and finer passes around the best split so far find the
// point: ~16 candidates a pass, not n.
std::pair<size_t, double> BestSplit(absl::Span<const double> x, absl::Span<const double> y,
                                    size_t lo, size_t hi, std::vector<double>& scratch) {
  size_t best_split = lo;
  double best_cost = SplitCost(x, y, lo, scratch);
  size_t stride = std::max<size_t>(1, (hi - lo) / kCandidatesPerPass);
  size_t from = lo;
  size_t to = hi;
  while (true) {
    for (size_t split = from; split <= to; split += stride) {
      const double cost = SplitCost(x, y, split, scratch);
      if (cost < best_cost) {
        best_cost = cost;
        best_split = split;
      }
    }
    if (stride == 1) break;
    from = best_split > lo + stride ? best_split - stride : lo;
    to = std::min(hi, best_split + stride);
    stride = std::max<size_t>(1, stride / kCandidatesPerPass * 2);
  }
  return {best_split, best_cost};
}

// A start that rose already, slower (gradients accumulating, a rollout's KV cache kept, under a
// leak that began later): SplitCost takes the start as flat at its median level, which meets
// the steeper rise steps before the bend ("rising since 18" for a leak from step 20 on a rank
// growing 64 MiB a step, 25 for 30 under a rollout leak). Against the start's own slope the
// start is flat and the bend is where the rise steepens: `split` found again on y less that
// slope, while the start before it rises significantly (trend z >= 3) at under half the rate
// after it. `split` unchanged otherwise.
size_t SplitPastARisingStart(absl::Span<const double> x, absl::Span<const double> y, size_t split,
                             size_t lo, size_t hi, TheilSen& fitter, std::vector<double>& scratch) {
  constexpr int kRefits = 3;  // each from the start as the last found it; usually one moves it
  std::vector<double> tilted(y.size());
  for (int i = 0; i < kRefits; ++i) {
    const TrendFit before = fitter.Fit(x.first(split), y.first(split));
    const TrendFit after = fitter.Fit(x.subspan(split), y.subspan(split));
    if (!(before.slope > 0) || before.trend_z < 3 || !(before.slope < 0.5 * after.slope)) break;
    for (size_t k = 0; k < y.size(); ++k) tilted[k] = y[k] - before.slope * (x[k] - x[0]);
    const size_t next = BestSplit(x, tilted, lo, hi, scratch).first;
    if (next == split) break;
    split = next;
  }
  return split;
}

}  // namespace

CurrentTrend FitCurrentTrend(absl::Span<const double> x, absl::Span<const double> y,
                             size_t min_points, TheilSen& fitter) {
  CurrentTrend out;
  out.fit = fitter.Fit(x, y);
  const size_t n = std::min(x.size(), y.size());
  const size_t min_part = std::max<size_t>(min_points, 3);
  if (n < 2 * min_part) return out;
  std::vector<double> scratch;
  if (!BendsAwayFromTheLine(x, y, out.fit, min_part, scratch)) return out;

  const size_t lo = min_part;
  const size_t hi = n - min_part;
  const auto [best_split, best_cost] = BestSplit(x.first(n), y.first(n), lo, hi, scratch);
  // A split must explain the series better than one line does.
  if (best_cost >= LineCost(x, y, out.fit)) return out;
  out.onset = SplitPastARisingStart(x.first(n), y.first(n), best_split, lo, hi, fitter, scratch);
  out.fit = fitter.Fit(x.subspan(out.onset, n - out.onset), y.subspan(out.onset, n - out.onset));
  return out;
}

size_t ShortFlatStart(absl::Span<const double> x, absl::Span<const double> y, const TrendFit& line,
                      size_t min_points, TheilSen& fitter) {
  const size_t n = std::min(x.size(), y.size());
  const size_t min_part = std::max<size_t>(min_points, 3);
  // FitCurrentTrend splits only where both parts keep min_part points, so this takes the flat
  // starts shorter than that; in a window too short for any split (fewer than 2 x min_part
  // points) it takes every flat start that leaves 3 points of rise. Looking at none there put a
  // leak that began 3 steps into a 15-step window at its first step, with the line's rate over
  // the flat steps counted as growth.
  if (n < 5) return 0;
  const size_t last_split = n < 2 * min_part ? n - 3 : min_part - 1;
  std::vector<double> scratch;
  const double noise = PointNoise(y.first(n), scratch);
  double best_cost = LineCost(x.first(n), y.first(n), line);
  size_t best_split = 0;
  for (size_t split = 2; split <= last_split; ++split) {
    // Its first half: the points near the bend lie on the line (see the header).
    const double above =
        MedianResidual(x, y, line, 0, std::max<size_t>(2, (split + 1) / 2), scratch);
    const double flat_slope = std::abs(fitter.Fit(x.first(split), y.first(split)).slope);
    if (above > 0 && above > 2 * noise) {
      // Flat: its own Theil-Sen slope (the median of its pairs', robust to one odd point) is
      // less than half the line's. A start that rose at the line's rate, or points raised above
      // a rise that went on under them, are not a flat start.
      if (flat_slope > 0.5 * std::abs(line.slope)) continue;
    } else if (n < 2 * min_part && 2 * split >= n) {
      // A flat start longer than the rise after it pulls the line down to it: the start sits
      // on the line and the end above it (the last half of the rise, as the first half of the
      // start above). Then the start must be flat against the rise's own slope, which the
      // line's no longer is. Without this, 8 flat points of 15 put the onset at the first.
      const size_t rise = n - split;
      const double end_above = MedianResidual(x, y, line, n - std::max<size_t>(2, (rise + 1) / 2),
                                              std::max<size_t>(2, (rise + 1) / 2), scratch);
      if (!(end_above > 0 && end_above > 2 * SplitNoise(y.first(n), split, scratch))) continue;
      const double rise_slope = fitter.Fit(x.subspan(split, rise), y.subspan(split, rise)).slope;
      if (!(rise_slope > 0) || flat_slope > 0.5 * rise_slope) continue;
    } else {
      continue;
    }
    const double cost = SplitCost(x.first(n), y.first(n), split, scratch);
    if (cost < best_cost) {
      best_cost = cost;
      best_split = split;
    }
  }
  return best_split;
}

CurrentTrend PastShortFlatStart(absl::Span<const double> x, absl::Span<const double> y,
                                const CurrentTrend& trend, size_t min_points, TheilSen& fitter) {
  CurrentTrend out = trend;
  const size_t n = std::min(x.size(), y.size());
  if (!out.recent && out.onset == std::max<size_t>(min_points, 3)) {
    // FitCurrentTrend's split at its limit (min_points flat): a flat start one point shorter
    // stopped the search there, the onset a step late (a leak from 7 steps after warm-up read
    // "rising since" the step after its own). ShortFlatStart looks at the shorter ones against
    // the whole window's line; one that fits better than the split at the limit is taken.
    const size_t shorter =
        ShortFlatStart(x, y, fitter.Fit(x.first(n), y.first(n)), min_points, fitter);
    std::vector<double> scratch;
    if (shorter > 0 && SplitCost(x.first(n), y.first(n), shorter, scratch) <
                           SplitCost(x.first(n), y.first(n), out.onset, scratch)) {
      out.onset = shorter;
      out.fit = fitter.Fit(x.subspan(shorter, n - shorter), y.subspan(shorter, n - shorter));
    }
    return out;
  }
  if (out.onset != 0) return out;
  out.onset = ShortFlatStart(x, y, trend.fit, min_points, fitter);
  if (out.onset > 0 && n < 2 * std::max<size_t>(min_points, 3)) {
    out.fit = fitter.Fit(x.subspan(out.onset, n - out.onset), y.subspan(out.onset, n - out.onset));
  }
  return out;
}

TrendFit FitLaterHalf(absl::Span<const double> x, absl::Span<const double> y,
                      const CurrentTrend& trend, TheilSen& fitter) {
  const size_t n = std::min(x.size(), y.size());
  const size_t half = trend.onset + (n - std::min(n, trend.onset)) / 2;
  return fitter.Fit(x.subspan(half, n - half), y.subspan(half, n - half));
}

size_t GrowthStart(const CurrentTrend& trend) { return trend.onset > 0 ? trend.onset - 1 : 0; }

double TrendGrowth(absl::Span<const double> x, const CurrentTrend& trend) {
  return x.empty() ? 0 : trend.fit.slope * (x.back() - x[GrowthStart(trend)]);
}

bool RisesEnough(absl::Span<const double> x, absl::Span<const double> y, const CurrentTrend& trend,
                 double min_growth, double min_trend_z) {
  if (y.empty() || trend.fit.slope <= 0 || trend.fit.trend_z < min_trend_z) return false;
  if (TrendGrowth(x, trend) < min_growth) return false;
  auto [lo, hi] = std::minmax_element(y.begin(), y.end());
  return *hi - *lo >= min_growth;
}

std::optional<CurrentTrend> RecentRise(absl::Span<const double> x, absl::Span<const double> y,
                                       double min_growth, TheilSen& fitter) {
  const size_t n = std::min(x.size(), y.size());
  if (n < kMinRecentRises + 2) return std::nullopt;
  std::vector<double> diffs(n - 1);
  for (size_t i = 1; i < n; ++i) diffs[i - 1] = y[i] - y[i - 1];
  const Spread noise = RobustSpread(diffs);
  const double cut = noise.median + 2 * noise.scale;
  size_t rises = 0;
  while (rises < diffs.size() && diffs[diffs.size() - 1 - rises] > cut) ++rises;
  // A run back to the first point is a rise over the whole window: FitCurrentTrend's to judge.
  if (rises < kMinRecentRises || rises == diffs.size()) return std::nullopt;
  const size_t onset = n - rises;
  const double total = y[n - 1] - y[onset - 1];
  if (total < min_growth) return std::nullopt;
  const double mean_rise = total / static_cast<double>(rises);
  for (size_t i = onset; i < n; ++i) {
    if (y[i] - y[i - 1] < 0.25 * mean_rise) return std::nullopt;
  }
  // It must end above where the series stood before it (the median of up to 8 points before the
  // run's base): a dip and the climb back to the old level (a cache freed, then refilled) rises
  // as much, and is no growth.
  const size_t before = std::min<size_t>(onset - 1, 8);
  if (before > 0) {
    std::vector<double> level(y.begin() + (onset - 1 - before), y.begin() + (onset - 1));
    if (y[n - 1] - MedianInPlace(absl::MakeSpan(level)) < min_growth) return std::nullopt;
  }
  CurrentTrend trend;
  trend.onset = onset;
  trend.fit = fitter.Fit(x.subspan(onset, rises), y.subspan(onset, rises));
  trend.recent = true;
  // What it reports as growth (TrendGrowth, from the point before the run, as for every trend)
  // must reach the floor too.
  if (TrendGrowth(x.first(n), trend) < min_growth) return std::nullopt;
  return trend;
}

RiseFit FitRise(absl::Span<const double> x, absl::Span<const double> y, size_t min_points,
                double min_growth, double min_trend_z, TheilSen& fitter) {
  RiseFit out;
  out.trend = FitCurrentTrend(x, y, min_points, fitter);
  out.rising = RisesEnough(x, y, out.trend, min_growth, min_trend_z) &&
               StillRising(out.trend.fit, FitLaterHalf(x, y, out.trend, fitter));
  // A split keeps min_points on its trending side, so a rise shorter than that is fitted from
  // flat points before it (a rate diluted by them, an onset early), when it is fitted at all.
  const size_t n = std::min(x.size(), y.size());
  const size_t min_part = std::max<size_t>(min_points, 3);
  const bool split_at_its_limit =
      out.trend.onset > 0 ? out.trend.onset + min_part >= n : n < 2 * min_part;
  if (!out.rising || split_at_its_limit) {
    std::optional<CurrentTrend> recent = RecentRise(x, y, min_growth, fitter);
    if (recent.has_value() && recent->onset > out.trend.onset) {
      out.trend = *recent;
      out.rising = true;
    }
  }
  return out;
}

bool StillRising(const TrendFit& whole, const TrendFit& later_half) {
  return later_half.slope >= 0.25 * whole.slope && later_half.trend_z >= 2.0;
}

}  // namespace memtrace::analysis
