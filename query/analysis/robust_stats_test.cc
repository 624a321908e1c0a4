#include "query/analysis/robust_stats.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace memtrace::analysis {
namespace {

TEST(RobustStatsTest, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(Median(std::vector<double>{5, 1, 3}), 3);
  EXPECT_DOUBLE_EQ(Median(std::vector<double>{4, 1, 3, 2}), 2.5);
  EXPECT_TRUE(std::isnan(Median(std::vector<double>{})));
}

TEST(RobustStatsTest, SpreadIgnoresAMinorityOfOutliers) {
  std::vector<double> v = {10, 11, 9, 10, 12, 8, 10, 1e9};
  Spread s = RobustSpread(v);
  EXPECT_DOUBLE_EQ(s.median, 10);
  EXPECT_DOUBLE_EQ(s.mad, 1);
  EXPECT_NEAR(s.scale, 1.4826, 1e-9);
}

TEST(RobustStatsTest, TheilSenRecoversAnExactLine) {
  std::vector<double> x, y;
  for (int i = 0; i < 50; ++i) {
    x.push_back(i * 2);
    y.push_back(7 + 3.5 * i * 2);
  }
  TheilSen ts;
  TrendFit fit = ts.Fit(x, y);
  EXPECT_DOUBLE_EQ(fit.slope, 3.5);
  EXPECT_DOUBLE_EQ(fit.intercept, 7);
  EXPECT_EQ(fit.pairs, 50u * 49 / 2);
  EXPECT_GT(fit.trend_z, 10);
}

TEST(RobustStatsTest, TheilSenIgnoresThirtyPercentOutliers) {
  std::vector<double> x, y;
  for (int i = 0; i < 200; ++i) {
    x.push_back(i);
    double v = 100 + 2 * i;
    if (i % 10 < 3) v += 1e6;  // 30% huge spikes
    y.push_back(v);
  }
  TheilSen ts;
  TrendFit fit = ts.Fit(x, y);
  EXPECT_NEAR(fit.slope, 2, 0.01);
}

TEST(RobustStatsTest, SubsampledFitStaysCloseToTheFullOne) {
  std::vector<double> x, y;
  uint64_t state = 12345;
  for (int i = 0; i < 2000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    double noise = static_cast<double>(state >> 40) / double(1 << 24) - 0.5;
    x.push_back(i);
    y.push_back(5 * i + 400 * noise);
  }
  TheilSen sampled(2048);
  TheilSen full(2000 * 1999 / 2);
  TrendFit a = sampled.Fit(x, y);
  TrendFit b = full.Fit(x, y);
  EXPECT_EQ(a.pairs, 2048u);
  EXPECT_NEAR(a.slope, 5, 0.1);
  EXPECT_NEAR(b.slope, 5, 0.05);
  EXPECT_GT(a.trend_z, 10);
}

TEST(RobustStatsTest, PureNoiseHasNoTrend) {
  std::vector<double> x, y;
  uint64_t state = 99;
  for (int i = 0; i < 500; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x.push_back(i);
    y.push_back(static_cast<double>(state >> 40));
  }
  TheilSen ts;
  TrendFit fit = ts.Fit(x, y);
  EXPECT_LT(std::fabs(fit.trend_z), 3);
}

TEST(RobustStatsTest, ConstantSeriesHasZeroSlopeAndZ) {
  std::vector<double> x = {1, 2, 3, 4}, y = {8, 8, 8, 8};
  TheilSen ts;
  TrendFit fit = ts.Fit(x, y);
  EXPECT_EQ(fit.slope, 0);
  EXPECT_EQ(fit.trend_z, 0);
  EXPECT_EQ(fit.intercept, 8);
}

TEST(RobustStatsTest, TooFewPointsGiveAZeroFit) {
  TheilSen ts;
  std::vector<double> x = {1}, y = {4};
  TrendFit fit = ts.Fit(x, y);
  EXPECT_EQ(fit.slope, 0);
  EXPECT_EQ(fit.points, 1u);
}

}  // namespace
}  // namespace memtrace::analysis
