// Robust statistics the analyses share: median, MAD, and the Theil-Sen slope with a Kendall-style
// trend statistic. Memory series have spikes and heavy-tailed noise; these ignore a minority of
// outliers where a mean or least squares would follow them.
#ifndef MEMTRACE_QUERY_ANALYSIS_ROBUST_STATS_H_
#define MEMTRACE_QUERY_ANALYSIS_ROBUST_STATS_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace memtrace::analysis {

// Median of `values` (the lower/upper mean for an even count); reorders `values`. NaN if empty.
double MedianInPlace(absl::Span<double> values);
// Median of a copy; `values` is untouched.
double Median(absl::Span<const double> values);

struct Spread {
  double median = 0;
  double mad = 0;    // median absolute deviation from the median
  double scale = 0;  // 1.4826 * mad: the standard deviation for normal noise
};
// Median and MAD of `values`. All zeros for an empty span.
Spread RobustSpread(absl::Span<const double> values);

struct TrendFit {
  double slope = 0;      // y units per x unit
  double intercept = 0;  // median of y - slope * x
  // (concordant - discordant) / pairs over the pairs used, divided by its standard deviation
  // under "no trend" (including the sampling error when pairs were sub-sampled): >= 3 means a
  // monotone trend noise would rarely produce.
  double trend_z = 0;
  size_t points = 0;
  size_t pairs = 0;
};

// Theil-Sen line fits. Series with more than max_pairs point pairs use a fixed pseudo-random
// sample of max_pairs pairs, the same sample for every series of the same length, so a job's
// groups are fitted alike and results are reproducible. Holds scratch buffers: use one per
// thread.
class TheilSen {
 public:
  explicit TheilSen(size_t max_pairs = 2048);

  // Fits y against x. x must be strictly increasing and as long as y; fewer than 2 points give
  // a zero fit.
  TrendFit Fit(absl::Span<const double> x, absl::Span<const double> y);

 private:
  const std::vector<std::pair<uint32_t, uint32_t>>& PairsFor(size_t n);

  size_t max_pairs_;
  // Pair lists by series length: a leak classification alternates between two lengths.
  absl::flat_hash_map<size_t, std::vector<std::pair<uint32_t, uint32_t>>> pairs_;
  std::vector<double> scratch_;
};

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_ROBUST_STATS_H_
