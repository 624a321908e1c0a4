// The agent's time source. Events carry CLOCK_REALTIME nanoseconds because that is the clock
// CUPTI stamps activity records with on Linux (cupti_activity.h,
// cuptiActivityRegisterTimestampCallback), so callback events and activity records line up.
#ifndef MEMTRACE_AGENT_CUPTI_CLOCK_H_
#define MEMTRACE_AGENT_CUPTI_CLOCK_H_

#include <time.h>

#include <cstdint>
#include <functional>

namespace memtrace {
namespace cupti {

// Returns nanoseconds; must be thread-safe. Tests pass a fixed or stepping clock.
using Clock = std::function<int64_t()>;

inline int64_t RealtimeNanos() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace cupti
}  // namespace memtrace

#endif  // MEMTRACE_AGENT_CUPTI_CLOCK_H_
