#include "query/analysis/robust_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace memtrace::analysis {
namespace {

// splitmix64: a tiny, well-mixed generator; std::mt19937's output differs by nothing that
// matters here and its state is 2.5 KiB.
uint64_t NextRandom(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

double MedianInPlace(absl::Span<double> values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  double lower = *std::max_element(values.begin(), values.begin() + mid);
  return lower + (upper - lower) / 2;
}

double Median(absl::Span<const double> values) {
  std::vector<double> copy(values.begin(), values.end());
  return MedianInPlace(absl::MakeSpan(copy));
}

Spread RobustSpread(absl::Span<const double> values) {
  Spread s;
  if (values.empty()) return s;
  std::vector<double> work(values.begin(), values.end());
  s.median = MedianInPlace(absl::MakeSpan(work));
  for (size_t i = 0; i < values.size(); ++i) work[i] = std::fabs(values[i] - s.median);
  s.mad = MedianInPlace(absl::MakeSpan(work));
  s.scale = 1.4826 * s.mad;
  return s;
}

TheilSen::TheilSen(size_t max_pairs) : max_pairs_(std::max<size_t>(max_pairs, 16)) {}

const std::vector<std::pair<uint32_t, uint32_t>>& TheilSen::PairsFor(size_t n) {
  auto [it, inserted] = pairs_.try_emplace(n);
  std::vector<std::pair<uint32_t, uint32_t>>& pairs = it->second;
  if (!inserted) return pairs;
  size_t all = n * (n - 1) / 2;
  if (all <= max_pairs_) {
    pairs.reserve(all);
    for (uint32_t i = 0; i + 1 < n; ++i) {
      for (uint32_t j = i + 1; j < n; ++j) pairs.emplace_back(i, j);
    }
    return pairs;
  }
  pairs.reserve(max_pairs_);
  uint64_t state = 0x6d656d7472616365ull ^ n;
  while (pairs.size() < max_pairs_) {
    uint32_t i = static_cast<uint32_t>(NextRandom(state) % n);
    uint32_t j = static_cast<uint32_t>(NextRandom(state) % n);
    if (i == j) continue;
    if (i > j) std::swap(i, j);
    pairs.emplace_back(i, j);
  }
  return pairs;
}

TrendFit TheilSen::Fit(absl::Span<const double> x, absl::Span<const double> y) {
  TrendFit fit;
  size_t n = std::min(x.size(), y.size());
  fit.points = n;
  if (n < 2) {
    if (n == 1) fit.intercept = y[0];
    return fit;
  }
  const auto& pairs = PairsFor(n);
  scratch_.resize(pairs.size());
  int64_t concordance = 0;
  for (size_t k = 0; k < pairs.size(); ++k) {
    auto [i, j] = pairs[k];
    double dy = y[j] - y[i];
    scratch_[k] = dy / (x[j] - x[i]);
    concordance += (dy > 0) - (dy < 0);
  }
  fit.pairs = pairs.size();
  fit.slope = MedianInPlace(absl::MakeSpan(scratch_));

  scratch_.resize(n);
  for (size_t i = 0; i < n; ++i) scratch_[i] = y[i] - fit.slope * x[i];
  fit.intercept = MedianInPlace(absl::MakeSpan(scratch_));

  double dn = static_cast<double>(n);
  double tau = static_cast<double>(concordance) / static_cast<double>(pairs.size());
  // Kendall's tau under independence: var = 2(2n+5) / (9n(n-1)). A sample of m out of N pairs
  // adds (1 - m/N) / m (finite-population correction; zero when every pair was used).
  double var_null = 2.0 * (2.0 * dn + 5.0) / (9.0 * dn * (dn - 1.0));
  double all = dn * (dn - 1.0) / 2.0;
  double m = static_cast<double>(pairs.size());
  double var_sample = (1.0 - m / all) / m;
  fit.trend_z = tau / std::sqrt(var_null + std::max(0.0, var_sample));
  return fit;
}

}  // namespace memtrace::analysis
