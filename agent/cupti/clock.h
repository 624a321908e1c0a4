// The agent's time source. Events carry CLOCK_REALTIME nanoseconds because that is the clock
// CUPTI stamps activity records with on Linux (cupti_activity.h,
// cuptiActivityRegisterTimestampCallback), so callback events and activity records line up.
#ifndef MEMTRACE_AGENT_CUPTI_CLOCK_H_
#define MEMTRACE_AGENT_CUPTI_CLOCK_H_

#include <cstdint>
#include <functional>

#include "proto/codec/event.h"

namespace memtrace {
namespace cupti {

// Returns nanoseconds; must be thread-safe. Tests pass a fixed or stepping clock.
using Clock = std::function<int64_t()>;

using ::memtrace::RealtimeNanos;

}  // namespace cupti
}  // namespace memtrace

#endif  // MEMTRACE_AGENT_CUPTI_CLOCK_H_
