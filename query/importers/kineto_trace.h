// What the Kineto importer keeps of a PyTorch profiler (Kineto) Chrome-trace file: only the
// records it turns into memtrace events (memory events, ProfilerStep ranges, user annotations
// and module scopes)
// and the file-level facts (distributedInfo, baseTimeNanoseconds, device memory sizes). The
// thousands of kernel, operator and flow events are counted and dropped while parsing, so a
// multi-GB trace costs memory only for its memory events (~56 bytes each).
#ifndef MEMTRACE_QUERY_IMPORTERS_KINETO_TRACE_H_
#define MEMTRACE_QUERY_IMPORTERS_KINETO_TRACE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memtrace::importers {

// Kineto's DeviceType values that matter here.
inline constexpr int32_t kKinetoDeviceCpu = 0;
inline constexpr int32_t kKinetoDeviceCuda = 1;

// One `[memory]` instant event. Times are nanoseconds on the trace's own clock (ts in
// microseconds x 1000, exact for fractional ts); add KinetoTrace::base_time_ns for the epoch.
struct KinetoMemoryRecord {
  int64_t ts_ns = 0;
  int64_t bytes = 0;  // > 0 allocation, < 0 free
  uint64_t address = 0;
  int64_t total_allocated = 0;
  int64_t total_reserved = 0;  // -1 when unreadable: no device sample from it
  int64_t ev_idx = -1;  // the profiler's own event index ("Ev Idx"), -1 when absent
  uint64_t thread = 0;  // ThreadKey(pid, tid)
  int32_t device_type = 0;
  int32_t device_id = -1;
};

// A complete ("X") range on one thread.
struct KinetoRange {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t thread = 0;
  uint32_t name = 0;  // index into KinetoTrace::names (annotations) or the step number (steps)
};

struct KinetoStepRange {
  KinetoRange range;
  int64_t step = 0;
  // cat "gpu_user_annotation": the same step drawn again on the GPU timeline.
  bool gpu = false;
};

struct KinetoDistributedInfo {
  std::optional<int32_t> rank;
  std::optional<int32_t> world_size;
  std::string backend;
};

// Counts of what the parser saw.
struct KinetoParseCounts {
  uint64_t trace_events = 0;       // objects in traceEvents
  uint64_t memory_events = 0;      // `[memory]` events kept (== memory.size())
  // `[memory]` events without Addr, Bytes or ts, or with one of those or another argument the
  // record stands on (Total Allocated, Device Type, Device Id) malformed: not a number, not a
  // whole one, or out of range (a byte count past +-2^53, a time at or past +-2^62 ns). Not
  // kept.
  uint64_t memory_skipped = 0;
  // Kept `[memory]` events whose Total Reserved or Ev Idx was malformed, kept without it.
  uint64_t memory_args_unread = 0;
  uint64_t step_ranges = 0;        // ProfilerStep#N ranges, CPU and GPU timeline both
  uint64_t annotation_ranges = 0;  // user_annotation ranges other than ProfilerStep#N
  uint64_t module_ranges = 0;      // "nn.Module: ..." python_function ranges (with_modules)
};

struct KinetoTrace {
  std::vector<KinetoMemoryRecord> memory;  // in file order
  std::vector<KinetoStepRange> steps;      // in file order
  // record_function and module scopes, in file order; `name` indexes `names`.
  std::vector<KinetoRange> annotations;
  std::vector<std::string> names;  // annotation names, each once
  KinetoDistributedInfo distributed;
  int64_t base_time_ns = 0;  // baseTimeNanoseconds (newer Kineto writes ts relative to it)
  // deviceProperties: total memory by device id (0 when unknown).
  std::vector<uint64_t> device_total_bytes;
  std::optional<int64_t> first_pid;  // pid of the first memory event, when numeric
  KinetoParseCounts counts;
};

// The thread identity used to match memory events with annotation ranges on the same thread.
// Numeric pid/tid are combined; Kineto sometimes writes string pids ("Spans"), which hash.
inline uint64_t ThreadKey(uint64_t pid, uint64_t tid) { return pid * 0x9E3779B97F4A7C15ull ^ tid; }

}  // namespace memtrace::importers

#endif  // MEMTRACE_QUERY_IMPORTERS_KINETO_TRACE_H_
