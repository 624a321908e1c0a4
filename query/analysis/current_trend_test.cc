#include "query/analysis/current_trend.h"

#include <cmath>
#include <optional>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace memtrace::analysis {
namespace {

constexpr double kMiB = 1 << 20;

struct Series {
  std::vector<double> x, y;
};

// Steps 0..n-1: `level` plus a little deterministic jitter, rising by `rate` a step from `from`.
Series FlatThenRising(size_t n, size_t from, double rate, double level = 10'000 * kMiB) {
  Series s;
  for (size_t i = 0; i < n; ++i) {
    s.x.push_back(static_cast<double>(i));
    const double jitter = ((i * 7919) % 13) * kMiB / 4;
    s.y.push_back(level + jitter + (i >= from ? rate * static_cast<double>(i - from + 1) : 0));
  }
  return s;
}

TEST(CurrentTrendTest, ALeakThatStartedLateKeepsItsOwnRate) {
  TheilSen fitter;
  // 64 MiB a step over the last 20 of 75 steps: one line over all of them finds ~16 MiB.
  Series s = FlatThenRising(75, 55, 64 * kMiB);
  EXPECT_LT(fitter.Fit(s.x, s.y).slope, 32 * kMiB);
  CurrentTrend t = FitCurrentTrend(s.x, s.y, 8, fitter);
  EXPECT_NEAR(t.fit.slope, 64 * kMiB, 2 * kMiB);
  EXPECT_NEAR(static_cast<double>(t.onset), 55, 2);
  EXPECT_GT(t.fit.trend_z, 3);
}

TEST(CurrentTrendTest, ALeakOverMostOfTheWindowStartsWhereTheFlatPartEnds) {
  TheilSen fitter;
  // Rising over the last 80 of 95 steps, steadily: one line has the leak's slope and ends on it,
  // but runs below the flat start, so it said nothing of where the rise began.
  Series s;
  for (size_t i = 0; i < 95; ++i) {
    s.x.push_back(static_cast<double>(i));
    s.y.push_back(10'000 * kMiB + (i >= 15 ? 256 * kMiB * static_cast<double>(i - 14) : 0));
  }
  CurrentTrend t = FitCurrentTrend(s.x, s.y, 8, fitter);
  EXPECT_NEAR(t.fit.slope, 256 * kMiB, 4 * kMiB);
  EXPECT_NEAR(static_cast<double>(t.onset), 15, 2);
}

// A rank already growing (gradients accumulating at 64 MiB a step) that also leaks from step 30
// at 256: taking the start as flat put the onset 2-5 steps early ("rising since 25"), where its
// median level meets the steeper rise. The onset is where the rise steepens.
TEST(CurrentTrendTest, ALeakOnARankThatWasAlreadyGrowingStartsWhereTheRiseSteepens) {
  TheilSen fitter;
  for (size_t from : {20, 30, 50}) {
    for (double before : {64 * kMiB, 128 * kMiB}) {
      SCOPED_TRACE(absl::StrCat("leak from ", from, ", growing ", before / kMiB, " MiB before"));
      Series s = FlatThenRising(95, from, 256 * kMiB);
      for (size_t i = 0; i < s.y.size(); ++i) s.y[i] += before * static_cast<double>(i);
      const CurrentTrend t = FitCurrentTrend(s.x, s.y, 8, fitter);
      EXPECT_NEAR(static_cast<double>(t.onset), static_cast<double>(from), 1);
      EXPECT_NEAR(t.fit.slope, before + 256 * kMiB, 4 * kMiB);
    }
  }
  // A start rising as fast as what follows is one line, split or not: no bend to move.
  Series line = FlatThenRising(95, 0, 256 * kMiB);
  EXPECT_EQ(FitCurrentTrend(line.x, line.y, 8, fitter).onset, 0u);
}

TEST(CurrentTrendTest, AFlatStartTooShortToSplitOffIsFoundWhereItEnds) {
  TheilSen fitter;
  // Flat for `from` points (fewer than the 8 each part of a split keeps), then 64 MiB a step:
  // FitCurrentTrend keeps one line, which reads as rising from the first point.
  for (size_t from : {2, 3, 5, 7}) {
    SCOPED_TRACE(from);
    Series s = FlatThenRising(95, from, 64 * kMiB);
    CurrentTrend t = FitCurrentTrend(s.x, s.y, 8, fitter);
    ASSERT_EQ(t.onset, 0u);
    EXPECT_EQ(ShortFlatStart(s.x, s.y, t.fit, 8, fitter), from);
  }
}

// Flat for one point fewer than a split's parts keep, in a window long enough to split: the
// split search, which starts at min_points, stopped there and put the onset a step late (a leak
// from 7 steps after warm-up read "rising since" the step after its own, 1 step of growth lost).
TEST(CurrentTrendTest, AFlatStartJustShorterThanASplitsPartsIsFoundWhereItEnds) {
  TheilSen fitter;
  for (size_t n : {24, 35, 60}) {
    for (size_t from : {5, 6, 7}) {
      SCOPED_TRACE(testing::Message() << n << " points, flat for " << from);
      Series s = FlatThenRising(n, from, 256 * kMiB);
      CurrentTrend t =
          PastShortFlatStart(s.x, s.y, FitCurrentTrend(s.x, s.y, 8, fitter), 8, fitter);
      EXPECT_EQ(t.onset, from);
      EXPECT_NEAR(t.fit.slope, 256 * kMiB, 2 * kMiB);
    }
  }
}

// As FlatThenRising, with Gaussian noise of sd `noise` instead of the jitter (whose step-to-step
// differences have no spread, so the noise estimate there is 0), and the first `raised` points
// `bump` higher (memory freed a few steps in).
Series Noisy(size_t from, double rate, double noise, uint64_t seed, size_t raised = 0,
             double bump = 0, size_t n = 95) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0, noise);
  Series s;
  for (size_t i = 0; i < n; ++i) {
    s.x.push_back(static_cast<double>(i));
    s.y.push_back(10'000 * kMiB + normal(rng) + (i < raised ? bump : 0) +
                  (i >= from ? rate * static_cast<double>(i - from + 1) : 0));
  }
  return s;
}

TEST(CurrentTrendTest, ANoisyShortFlatStartIsFoundAndANoisyRiseFromTheFirstPointHasNone) {
  TheilSen fitter;
  constexpr int kSeeds = 100;
  int found = 0, rising_moved = 0, bumped_moved = 0;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const Series flat5 = Noisy(5, 64 * kMiB, 8 * kMiB, seed);
    CurrentTrend t = FitCurrentTrend(flat5.x, flat5.y, 8, fitter);
    const size_t start = ShortFlatStart(flat5.x, flat5.y, t.fit, 8, fitter);
    if (t.onset == 0 && start >= 4 && start <= 6) ++found;
    const Series rising = Noisy(0, 64 * kMiB, 8 * kMiB, seed);
    t = FitCurrentTrend(rising.x, rising.y, 8, fitter);
    if (ShortFlatStart(rising.x, rising.y, t.fit, 8, fitter) != 0) ++rising_moved;
    // Three points 1 GiB up, then the same rise: the line fits the rise, the raised points sit
    // far above it, and a short "flat" start that takes them in fitted better than the line.
    const Series bumped = Noisy(0, 64 * kMiB, 8 * kMiB, seed, 3, 1024 * kMiB);
    t = FitCurrentTrend(bumped.x, bumped.y, 8, fitter);
    if (ShortFlatStart(bumped.x, bumped.y, t.fit, 8, fitter) != 0) ++bumped_moved;
  }
  EXPECT_GE(found, 90) << "of " << kSeeds;
  EXPECT_EQ(rising_moved, 0);
  EXPECT_EQ(bumped_moved, 0);
}

TEST(CurrentTrendTest, ALineRisingFromItsFirstPointHasNoFlatStart) {
  TheilSen fitter;
  for (double rate : {1 * kMiB, 16 * kMiB, 256 * kMiB}) {
    SCOPED_TRACE(rate);
    Series s = FlatThenRising(95, 0, rate);
    CurrentTrend t = FitCurrentTrend(s.x, s.y, 8, fitter);
    EXPECT_EQ(ShortFlatStart(s.x, s.y, t.fit, 8, fitter), 0u);
  }
  // Too short for FitCurrentTrend to split, rising from the first point all the same.
  for (size_t n : {8, 12, 15}) {
    Series s = FlatThenRising(n, 0, 64 * kMiB);
    EXPECT_EQ(ShortFlatStart(s.x, s.y, fitter.Fit(s.x, s.y), 8, fitter), 0u) << n;
  }
}

// The same in a 15-point window, too short for FitCurrentTrend to split: a flat start of 4 is
// found, and a rise from the first point, bumped or not, keeps its start.
TEST(CurrentTrendTest, ANoisyFlatStartInAShortWindowIsFoundAndANoisyRiseThereHasNone) {
  TheilSen fitter;
  constexpr int kSeeds = 100;
  int found = 0, rising_moved = 0, bumped_moved = 0;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const Series flat4 = Noisy(4, 256 * kMiB, 8 * kMiB, seed, 0, 0, 15);
    TrendFit line = fitter.Fit(flat4.x, flat4.y);
    const size_t start = ShortFlatStart(flat4.x, flat4.y, line, 8, fitter);
    if (start >= 3 && start <= 5) ++found;
    const Series rising = Noisy(0, 256 * kMiB, 8 * kMiB, seed, 0, 0, 15);
    line = fitter.Fit(rising.x, rising.y);
    if (ShortFlatStart(rising.x, rising.y, line, 8, fitter) != 0) ++rising_moved;
    const Series bumped = Noisy(0, 256 * kMiB, 8 * kMiB, seed, 2, 2048 * kMiB, 15);
    line = fitter.Fit(bumped.x, bumped.y);
    if (ShortFlatStart(bumped.x, bumped.y, line, 8, fitter) != 0) ++bumped_moved;
  }
  EXPECT_GE(found, 90) << "of " << kSeeds;
  EXPECT_EQ(rising_moved, 0);
  EXPECT_EQ(bumped_moved, 0);
}

// Found by review: past a long flat start in a short window, the line through the flat points
// ran at a fraction of the rise's rate, and the growth reported (that rate x the rise's steps)
// came out near half of what the series rose by, under min_growth for a series accepted as
// growing. In a short window the fit is redone over the rise.
TEST(CurrentTrendTest, PastALongFlatStartInAShortWindowTheRiseKeepsItsRate) {
  TheilSen fitter;
  for (size_t from : {4, 5, 6, 7, 8}) {
    Series s = FlatThenRising(15, from, 256 * kMiB);
    const RiseFit rise = FitRise(s.x, s.y, 8, 64 * kMiB, 3, fitter);
    if (!rise.rising || rise.trend.onset > 0) continue;  // a RecentRise has its own onset
    const CurrentTrend past = PastShortFlatStart(s.x, s.y, rise.trend, 8, fitter);
    ASSERT_EQ(past.onset, from) << from;
    EXPECT_NEAR(past.fit.slope, 256 * kMiB, 16 * kMiB) << from;
    EXPECT_NEAR(TrendGrowth(s.x, past), s.y.back() - s.y[from - 1], 64 * kMiB) << from;
  }
  // In a long window the line stays the fit (a flat start there is under min_points).
  Series s = FlatThenRising(95, 5, 64 * kMiB);
  const CurrentTrend line = FitCurrentTrend(s.x, s.y, 8, fitter);
  const CurrentTrend past = PastShortFlatStart(s.x, s.y, line, 8, fitter);
  EXPECT_EQ(past.onset, 5u);
  EXPECT_EQ(past.fit.slope, line.fit.slope);
}

// A flat start longer than the rise after it pulls the line down onto it: no start sits above
// the line, the end does. 8 flat points of 15 were found 9 times in 100 (the rise's steps read
// as the noise they had to stand out of), and growth read the line's diluted rate.
TEST(CurrentTrendTest, AFlatStartLongerThanTheRiseInAShortWindowIsFoundToo) {
  TheilSen fitter;
  for (size_t from = 8; from <= 12; ++from) {
    int rising = 0, onset_ok = 0, growth_ok = 0;
    for (uint64_t seed = 1; seed <= 100; ++seed) {
      const Series s = Noisy(from, 64 * kMiB, 8 * kMiB, seed, 0, 0, 15);
      const RiseFit rise = FitRise(s.x, s.y, 8, 64 * kMiB, 3, fitter);
      if (!rise.rising) continue;  // too noisy to be a leak at all: another question
      ++rising;
      const CurrentTrend past = PastShortFlatStart(s.x, s.y, rise.trend, 8, fitter);
      if (past.onset + 1 >= from && past.onset <= from + 1) ++onset_ok;
      const double grown = 64 * kMiB * static_cast<double>(15 - from);
      if (std::abs(TrendGrowth(s.x, past) - grown) < 0.15 * grown) ++growth_ok;
    }
    EXPECT_GE(rising, 60) << "flat for " << from;
    EXPECT_GE(onset_ok, 0.95 * rising) << "flat for " << from << ", " << rising << " rising";
    EXPECT_GE(growth_ok, 0.85 * rising) << "flat for " << from << ", " << rising << " rising";
  }
}

// Found with the simulator: 15 steps after warm-up, flat for 3 of them, then a leak. No window
// under 16 points (2 x min_points) was searched, so leaks said "rising since" the first step
// examined and growth counted the line's rate over the flat steps (+3.50 GiB for 3.0).
TEST(CurrentTrendTest, AFlatStartInAWindowTooShortToSplitIsFoundWhereItEnds) {
  TheilSen fitter;
  for (size_t n : {8, 10, 12, 15}) {
    for (size_t from = 2; from + 3 <= n; ++from) {
      Series s = FlatThenRising(n, from, 256 * kMiB);
      const TrendFit line = fitter.Fit(s.x, s.y);
      const size_t start = ShortFlatStart(s.x, s.y, line, 8, fitter);
      // Where a long flat start pulls the line under half the rise's rate, a clean rise is a
      // RecentRise's (FitRise), with its own onset; noisy ones are the test above's.
      if (line.slope < 128 * kMiB) continue;
      EXPECT_EQ(start, from) << n << " points, flat for " << from;
    }
  }
}

TEST(CurrentTrendTest, ALineOverTheWholeWindowStaysOneLine) {
  TheilSen fitter;
  Series s = FlatThenRising(100, 0, 16 * kMiB);
  CurrentTrend t = FitCurrentTrend(s.x, s.y, 8, fitter);
  EXPECT_NEAR(t.fit.slope, 16 * kMiB, 0.5 * kMiB);
  EXPECT_LT(t.onset, 10u);
}

TEST(CurrentTrendTest, AFlatSeriesHasNoTrend) {
  TheilSen fitter;
  Series s = FlatThenRising(100, 1000, 0);
  CurrentTrend t = FitCurrentTrend(s.x, s.y, 8, fitter);
  EXPECT_LT(std::abs(t.fit.slope), 0.1 * kMiB);
}

TEST(CurrentTrendTest, TheTrendingPartKeepsAtLeastMinPoints) {
  TheilSen fitter;
  // Rising over the last 5 steps only: the trending part still has 8 points.
  Series s = FlatThenRising(60, 55, 64 * kMiB);
  CurrentTrend t = FitCurrentTrend(s.x, s.y, 8, fitter);
  EXPECT_LE(t.onset, 52u);
  EXPECT_EQ(t.fit.points, 60 - t.onset);
  // A series shorter than two parts is one line.
  Series short_series = FlatThenRising(15, 8, 64 * kMiB);
  EXPECT_EQ(FitCurrentTrend(short_series.x, short_series.y, 8, fitter).onset, 0u);
}

TEST(CurrentTrendTest, RisesEnoughNeedsTheGrowthTheSignificanceAndTheRange) {
  TheilSen fitter;
  Series leak = FlatThenRising(100, 50, 64 * kMiB);
  CurrentTrend t = FitCurrentTrend(leak.x, leak.y, 8, fitter);
  EXPECT_TRUE(RisesEnough(leak.x, leak.y, t, 1024 * kMiB, 3));
  EXPECT_NEAR(TrendGrowth(leak.x, t), 50 * 64 * kMiB, 3 * 64 * kMiB);
  // More than it grew, or more significance than it has: no.
  EXPECT_FALSE(RisesEnough(leak.x, leak.y, t, 8192 * kMiB, 3));
  EXPECT_FALSE(RisesEnough(leak.x, leak.y, t, 1024 * kMiB, t.fit.trend_z + 1));
  // The fit's growth alone is not enough when the data's own range is smaller.
  CurrentTrend stretched = t;
  stretched.fit.slope *= 10;
  EXPECT_FALSE(RisesEnough(leak.x, leak.y, stretched, 8192 * kMiB, 3));
  Series flat = FlatThenRising(100, 1000, 0);
  EXPECT_FALSE(RisesEnough(flat.x, flat.y, FitCurrentTrend(flat.x, flat.y, 8, fitter), kMiB, 3));
}

// The last few steps of a fast leak: too few points for FitCurrentTrend's split (8 a side) or
// for trend z to reach 3 (an unbroken rise of 5 points has z 2.4). In a noisy series that read
// as no rise at all; in this clean one, as a rise from 8 points before the end.
TEST(CurrentTrendTest, ARiseOverTheLastFewStepsIsARecentRise) {
  TheilSen fitter;
  for (size_t from : {93, 95, 97}) {
    SCOPED_TRACE(from);
    Series s = FlatThenRising(100, from, 1024 * kMiB);
    // The split keeps 8 points: it starts the rise early.
    EXPECT_EQ(FitCurrentTrend(s.x, s.y, 8, fitter).onset, 92u);
    std::optional<CurrentTrend> recent = RecentRise(s.x, s.y, 64 * kMiB, fitter);
    ASSERT_TRUE(recent.has_value());
    EXPECT_TRUE(recent->recent);
    EXPECT_EQ(recent->onset, from);  // the point before it, from - 1, is the last flat one
    EXPECT_NEAR(recent->fit.slope, 1024 * kMiB, 8 * kMiB);
    RiseFit rise = FitRise(s.x, s.y, 8, 64 * kMiB, 3, fitter);
    EXPECT_TRUE(rise.rising);
    EXPECT_EQ(rise.trend.onset, from);
  }
}

TEST(CurrentTrendTest, WhatIsNotARecentRise) {
  TheilSen fitter;
  // Two rises: a step up and one more is not yet a run.
  Series two = FlatThenRising(100, 98, 1024 * kMiB);
  EXPECT_FALSE(RecentRise(two.x, two.y, 64 * kMiB, fitter).has_value());
  // Rises smaller than min_growth in all.
  Series small = FlatThenRising(100, 95, 8 * kMiB);
  EXPECT_FALSE(RecentRise(small.x, small.y, 64 * kMiB, fitter).has_value());
  // Rises within the step-to-step noise (jitter of up to 3 MiB against rises of 1 MiB).
  Series noisy = FlatThenRising(100, 95, 1 * kMiB);
  EXPECT_FALSE(RecentRise(noisy.x, noisy.y, 0, fitter).has_value());
  // Small rises and then one jump: a jump.
  Series jump = FlatThenRising(100, 95, 16 * kMiB, 10'000 * kMiB);
  jump.y.back() += 4096 * kMiB;
  EXPECT_FALSE(RecentRise(jump.x, jump.y, 64 * kMiB, fitter).has_value());
  // A rise from the first point is the whole window's trend, not a recent one.
  Series all = FlatThenRising(100, 0, 64 * kMiB);
  EXPECT_FALSE(RecentRise(all.x, all.y, 64 * kMiB, fitter).has_value());
  // A flat series.
  Series flat = FlatThenRising(100, 1000, 0);
  EXPECT_FALSE(RecentRise(flat.x, flat.y, 0, fitter).has_value());
  // A dip, then the climb back to the old level (a cache freed, then refilled): it rises 3 GiB
  // in 3 steps, but ends where it stood.
  Series dip;
  for (size_t i = 0; i < 100; ++i) {
    dip.x.push_back(static_cast<double>(i));
    dip.y.push_back(10'240 * kMiB);
  }
  dip.y[96] = 7'168 * kMiB;
  dip.y[97] = 8'192 * kMiB;
  dip.y[98] = 9'216 * kMiB;
  dip.y[99] = 10'240 * kMiB;
  EXPECT_FALSE(RecentRise(dip.x, dip.y, 64 * kMiB, fitter).has_value());
  // Three rises of 20 MiB: 60 MiB from the base (growth counts from the point before the run,
  // as for every trend), under a 64 MiB floor; three of 25 MiB, 75 MiB, are over it.
  for (const auto& [rise, found] : {std::pair<double, bool>{20 * kMiB, false}, {25 * kMiB, true}}) {
    Series three = FlatThenRising(100, 97, rise, 10'000 * kMiB);
    for (size_t i = 0; i < 100; ++i) three.y[i] = 10'000 * kMiB + (i >= 97 ? rise * (i - 96) : 0);
    EXPECT_EQ(RecentRise(three.x, three.y, 64 * kMiB, fitter).has_value(), found) << rise / kMiB;
  }
}

// The growth of a trend counts the rise into its first trending point: measured from that
// point, it came out one step short of what the series rose by (+14.5 GiB for 14.75).
TEST(CurrentTrendTest, GrowthIsMeasuredFromThePointBeforeTheRise) {
  TheilSen fitter;
  Series s = FlatThenRising(95, 40, 64 * kMiB);  // flat to point 39, then +64 MiB a point
  CurrentTrend t = FitCurrentTrend(s.x, s.y, 8, fitter);
  ASSERT_NEAR(static_cast<double>(t.onset), 40, 1);
  EXPECT_EQ(GrowthStart(t), t.onset - 1);
  EXPECT_NEAR(TrendGrowth(s.x, t), s.y.back() - s.y[t.onset - 1], 4 * kMiB);
  CurrentTrend from_first = t;
  from_first.onset = 0;
  EXPECT_EQ(GrowthStart(from_first), 0u);
}

}  // namespace
}  // namespace memtrace::analysis
