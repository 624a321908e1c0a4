// The in-memory event model shared by the agent, the collector and the importers.
//
// Plain structs with no protobuf dependency, so analyses and translators can be tested on
// values. The numeric values of EventKind equal memtrace.v1.EventKind on the wire.
#ifndef MEMTRACE_PROTO_CODEC_EVENT_H_
#define MEMTRACE_PROTO_CODEC_EVENT_H_

#include <cstdint>
#include <limits>
#include <string>

namespace memtrace {

enum class EventKind : uint8_t {
  kUnspecified = 0,
  kAlloc = 1,
  kFree = 2,
  kPoolCreate = 3,
  kPoolDestroy = 4,
  kPoolTrim = 5,
  kVmmMap = 6,
  kVmmUnmap = 7,
  kOom = 8,
  kStep = 9,
  kPhaseBegin = 10,
  kPhaseEnd = 11,
  kDeviceSample = 12,
  kHostSample = 13,
  kLoss = 14,
};
inline constexpr uint32_t kMaxEventKind = 14;

// Values of memtrace.v1.MemoryKind (CUpti_ActivityMemoryKind plus pool and VMM).
enum MemoryKindValue : uint32_t {
  kMemoryUnknown = 0,
  kMemoryPageable = 1,
  kMemoryPinned = 2,
  kMemoryDevice = 3,
  kMemoryArray = 4,
  kMemoryManaged = 5,
  kMemoryDeviceStatic = 6,
  kMemoryManagedStatic = 7,
  kMemoryPool = 100,
  kMemoryVmm = 101,
  kMemoryVmmImported = 102,
};

// Memory a rank holds that is not its device memory: host memory (pageable, pinned) and
// mappings of physical memory another process created (imported). Kept in live sets and per
// kind, left out of live bytes and of the tag and source groups.
inline bool LeftOutOfLiveBytes(uint32_t memory_kind) {
  return memory_kind == kMemoryPageable || memory_kind == kMemoryPinned ||
         memory_kind == kMemoryVmmImported;
}

// Values of memtrace.v1.LossReason (carried in memory_kind of a kLoss event).
enum LossReasonValue : uint32_t {
  kLossUnspecified = 0,
  kLossQueueFull = 1,
  kLossSpoolFull = 2,
  kLossCuptiDropped = 3,
  kLossCollectorLost = 4,
};

// Values of memtrace.v1.StringKind.
enum class StringKind : uint8_t {
  kUnspecified = 0,
  kTag = 1,
  kSource = 2,
  kPhase = 3,
};

// One recorded event. Field meaning depends on `kind` (see proto/memtrace/v1/events.proto):
// alloc/free: address, bytes; step: aux = step number; samples: bytes = used, aux = total;
// OOM: bytes = requested; loss: aux = events lost.
struct Event {
  uint64_t seq = 0;  // per (job, rank, attempt), >= 1, strictly increasing
  int64_t ts_ns = 0;
  EventKind kind = EventKind::kUnspecified;
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint64_t aux = 0;
  uint32_t tag_id = 0;     // string-table id of the innermost tag, 0 = none
  uint32_t source_id = 0;  // string-table id of the owning shared object, 0 = none
  uint32_t device = 0;
  uint32_t stream = 0;
  uint32_t memory_kind = 0;  // MemoryKindValue, or LossReasonValue for kLoss

  bool operator==(const Event& o) const {
    return seq == o.seq && ts_ns == o.ts_ns && kind == o.kind && address == o.address &&
           bytes == o.bytes && aux == o.aux && tag_id == o.tag_id && source_id == o.source_id &&
           device == o.device && stream == o.stream && memory_kind == o.memory_kind;
  }
};

// One string-table entry of a stream (tag, source or phase name).
struct StringDef {
  uint32_t id = 0;
  StringKind kind = StringKind::kUnspecified;
  std::string value;

  bool operator==(const StringDef& o) const {
    return id == o.id && kind == o.kind && value == o.value;
  }
};

// The agent's view of its own health, sent with every batch.
struct AgentCounterValues {
  uint64_t events_recorded = 0;
  uint64_t events_lost = 0;
  uint64_t spool_bytes = 0;
  uint64_t reconnects = 0;
  uint64_t cupti_records_dropped = 0;
};

// Collector clock minus agent clock and the round trip it was measured over, in ns (see
// memtrace.v1.ClockEstimate).
struct ClockEstimate {
  int64_t offset_ns = 0;
  int64_t round_trip_ns = 0;

  bool operator==(const ClockEstimate& o) const {
    return offset_ns == o.offset_ns && round_trip_ns == o.round_trip_ns;
  }
};

// A time horizon (RankState::SetTimeHorizon, EventBatch.collector_time_horizon_ns) that no
// timestamp is past.
inline constexpr int64_t kNoTimeHorizon = std::numeric_limits<int64_t>::max();

// The time the collector takes an event stamped `ts_ns` at, when its batch's time horizon is
// `horizon_ns` (collector/README.md, "Clocks"): its own when within the horizon, else the time
// taken for the event before it in the stream (`previous_ts_ns`), or the horizon itself for a
// stream's first event (`has_previous` false). One rule for the rollups and for every reader of
// raw events, so that they place an event at the same time.
inline int64_t TimeWithinHorizon(int64_t ts_ns, int64_t horizon_ns, bool has_previous,
                                 int64_t previous_ts_ns) {
  if (ts_ns <= horizon_ns) return ts_ns;
  return has_previous ? previous_ts_ns : horizon_ns;
}

const char* EventKindName(EventKind kind);

// Now on the clock events carry: CLOCK_REALTIME in ns, the clock CUPTI stamps activity records
// with on Linux. The collector stamps its acks with the same clock, so that an agent's clock
// estimate compares like with like (absl::GetCurrentTimeNanos interpolates with the cycle
// counter and can stray from it by more than a loopback round trip).
int64_t RealtimeNanos();

}  // namespace memtrace

#endif  // MEMTRACE_PROTO_CODEC_EVENT_H_
