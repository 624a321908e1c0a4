// int64 sums and differences clamped to int64's range: times shifted by a clock offset (the
// collector's clock against a rank's) stay at the end of the clock instead of wrapping around.
#ifndef MEMTRACE_COLLECTOR_ROLLUP_SATURATING_H_
#define MEMTRACE_COLLECTOR_ROLLUP_SATURATING_H_

#include <cstdint>
#include <limits>

namespace memtrace::collector {

inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t out;
  if (!__builtin_add_overflow(a, b, &out)) return out;
  return b < 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
}

inline int64_t SaturatingSub(int64_t a, int64_t b) {
  int64_t out;
  if (!__builtin_sub_overflow(a, b, &out)) return out;
  return b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_ROLLUP_SATURATING_H_
