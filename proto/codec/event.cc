#include "proto/codec/event.h"

#include <time.h>

namespace memtrace {

int64_t RealtimeNanos() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

const char* EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kUnspecified: return "unspecified";
    case EventKind::kAlloc: return "alloc";
    case EventKind::kFree: return "free";
    case EventKind::kPoolCreate: return "pool_create";
    case EventKind::kPoolDestroy: return "pool_destroy";
    case EventKind::kPoolTrim: return "pool_trim";
    case EventKind::kVmmMap: return "vmm_map";
    case EventKind::kVmmUnmap: return "vmm_unmap";
    case EventKind::kOom: return "oom";
    case EventKind::kStep: return "step";
    case EventKind::kPhaseBegin: return "phase_begin";
    case EventKind::kPhaseEnd: return "phase_end";
    case EventKind::kDeviceSample: return "device_sample";
    case EventKind::kHostSample: return "host_sample";
    case EventKind::kLoss: return "loss";
  }
  return "invalid";
}

}  // namespace memtrace
