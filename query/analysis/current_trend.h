// The current trend of a memory series. A leak often starts part-way through the window, after
// a flat stretch; one Theil-Sen line over the whole window then takes the median of mostly flat
// pairs' slopes and reports a fraction of the leak's rate, or none (a leak of 64 MiB/step over
// the last 20 of 75 steps fitted to 16 MiB/step). FitCurrentTrend chooses, by least absolute
// deviation, between one line over every point and "flat, then a line from where the flat part
// ends", and fits Theil-Sen to the trending part only. A start that rises significantly at
// under half the later rate (a leak on a rank already growing) is flat against its own slope:
// the split is found again there, where the rise steepens.
#ifndef MEMTRACE_QUERY_ANALYSIS_CURRENT_TREND_H_
#define MEMTRACE_QUERY_ANALYSIS_CURRENT_TREND_H_

#include <cstddef>
#include <optional>

#include "absl/types/span.h"
#include "query/analysis/robust_stats.h"

namespace memtrace::analysis {

struct CurrentTrend {
  TrendFit fit;      // Theil-Sen over points [onset, n)
  size_t onset = 0;  // first point of the trending part; 0 = one line over all points
  // A RecentRise: the rise rests on every one of its steps standing out of the noise, not on
  // fit.trend_z (which a few points cannot reach).
  bool recent = false;
};

// x strictly increasing and as long as y. Each part of a split keeps at least min_points points
// (and 3), so a series shorter than twice that is fitted as one line, and so is one whose first
// and last points do not sit above the line by more than twice the noise of one point
// (estimated from step-to-step differences: no split would fit it better, the common case,
// checked in O(n)).
// Otherwise O(n) per candidate split, 30-50 candidates; `fitter` as in TheilSen (one per thread).
// Limitation: two or three one-off jumps close together late in the window fit "flat, then
// rising" too; only later steps tell them from a leak that has just begun (StillRising rules
// out a single jump).
CurrentTrend FitCurrentTrend(absl::Span<const double> x, absl::Span<const double> y,
                             size_t min_points, TheilSen& fitter);

// For a series that FitCurrentTrend fitted as one line (onset 0): where a flat stretch at its
// start ends when it is too short for FitCurrentTrend to split off (fewer than min_points
// points; this looks no further), or, in a series too short for FitCurrentTrend to split at all
// (fewer than 2 x max(min_points, 3) points), wherever it leaves 3 points of rise.
// FitCurrentTrend keeps min_points on each side of a split so that noise cannot buy a split; a
// leak that began a few points into the window then read as rising from its first point.
// Returns the first point of the rise (2 .. max(min_points, 3) - 1, or 2 .. n - 3 in a short
// series), or 0 when no flat start is found. A start counts when its own slope (the median of its
// pairs') is less than half the line's, its first half sits above the line by more than twice
// the noise of one point (from step-to-step differences, as FitCurrentTrend asks of a series
// before it searches; the points near the bend lie on the line, and asked of the whole start
// this put the onset a point early where the start was half the window), and flat-then-rising
// fits better than the line. In a short series a start of half of it or more sits on the line
// (it pulls the line down to it) and the end above: it counts when the last half of the rise
// sits above the line by more than twice the two parts' own noise and the start's slope is less
// than half the rise's. Only the start moves: the line
// stays the fit. O(n x min_points), O(n^2) in a short series; `fitter` as in TheilSen.
size_t ShortFlatStart(absl::Span<const double> x, absl::Span<const double> y, const TrendFit& line,
                      size_t min_points, TheilSen& fitter);

// `trend` (of a series FitCurrentTrend fitted as one line) with its onset moved past a short
// flat start (ShortFlatStart). In a series too short for FitCurrentTrend to split, where the
// flat start may be most of it, the fit is redone over the rise: the line through the flat
// points ran at a fraction of the rise's rate, and growth came out under min_growth for a
// series accepted as growing. Elsewhere the flat start is under min_points of 2 x min_points or
// more, and the line stays the fit. When trend's split is at its limit (onset ==
// min_points: a flat start one point shorter stops FitCurrentTrend's search there), a shorter
// flat start that fits better than that split is taken, and the fit redone from it. Otherwise
// unchanged when trend.onset > 0, or when no flat start is found.
CurrentTrend PastShortFlatStart(absl::Span<const double> x, absl::Span<const double> y,
                                const CurrentTrend& trend, size_t min_points, TheilSen& fitter);

// The Theil-Sen fit of the second half of `trend`'s trending part (what it did lately).
TrendFit FitLaterHalf(absl::Span<const double> x, absl::Span<const double> y,
                      const CurrentTrend& trend, TheilSen& fitter);

// Whether `trend`, fitted to (x, y), rose enough to count as growth for growth, leaks and
// headroom alike: a positive slope that added at least min_growth over the trending part, a
// series whose own range spans that much (a fit over noise can extrapolate growth the data never
// showed), and trend z >= min_trend_z. A sustained rise is this and StillRising.
bool RisesEnough(absl::Span<const double> x, absl::Span<const double> y, const CurrentTrend& trend,
                 double min_growth, double min_trend_z);

// Where the trend's growth is measured from: the last point before its trending part (where
// the rise began: the rise into the trending part's first point is part of it), or the first
// point when it trends from there. Measured from the first risen point, growth came out one
// step's rise short of what the series rose by (+14.5 GiB for 14.75).
size_t GrowthStart(const CurrentTrend& trend);

// The growth the trend's fit gives since it began: slope x the span of x from GrowthStart.
double TrendGrowth(absl::Span<const double> x, const CurrentTrend& trend);

// A rise the series ends on that is too recent for the trend test: FitCurrentTrend keeps
// min_points on each side of a split, and trend z needs about 7 points of an unbroken rise to
// reach 3, so a leak of 1 GiB a step that began 5 steps before the window's end read as no rise
// at all (leaks even called its last steps spikes). Found when each of the series' last
// kMinRecentRises or more step-to-step differences exceeds the differences' median by more than
// twice their robust spread (normal noise does that once in about 44 differences, three in a
// row once in about 85,000 series), none of them is under a quarter of their mean (several
// small rises and one jump are a jump), and they add at least min_growth. The trend's onset is
// the first point of that run (the point before it is where the rise began) and its fit is over
// the run. nullopt otherwise. O(n); `fitter` as in TheilSen.
inline constexpr size_t kMinRecentRises = 3;
std::optional<CurrentTrend> RecentRise(absl::Span<const double> x, absl::Span<const double> y,
                                       double min_growth, TheilSen& fitter);

// The current trend of (x, y) and whether it is a sustained rise: RisesEnough and StillRising,
// else a RecentRise (whose trend it returns then). A RecentRise is also preferred to a split
// that sits at its limit (min_points from the end: the rise may be shorter) or to one line over
// a series too short to split, when it begins later. The one rule growth, leaks and headroom
// apply alike.
struct RiseFit {
  CurrentTrend trend;
  bool rising = false;
};
RiseFit FitRise(absl::Span<const double> x, absl::Span<const double> y, size_t min_points,
                double min_growth, double min_trend_z, TheilSen& fitter);

// Whether a rising trend is still rising in the later half of its fit: a slope at least a
// quarter of the whole fit's, with trend z >= 2. A series that jumped once and then stayed
// fits a rising line too (the pairs across the jump rise), but is flat after it; this is what
// tells the two apart for growth, leaks and headroom alike.
bool StillRising(const TrendFit& whole, const TrendFit& later_half);

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_CURRENT_TREND_H_
