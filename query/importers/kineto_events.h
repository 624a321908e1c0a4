// Turns one parsed Kineto trace (one rank) into memtrace events on an EventSink, in timestamp
// order:
//   [memory] events      -> ALLOC (Bytes > 0) / FREE (Bytes < 0), bytes = |Bytes|, address = Addr,
//                           device = Device Id; memory_kind DEVICE for CUDA (Device Type 1),
//                           PAGEABLE for CPU (Device Type 0: host memory, which the collector
//                           keeps but leaves out of live bytes), UNKNOWN for other device types.
//                           Ordered by (ts, Ev Idx): Kineto writes threads interleaved, and
//                           "Total Allocated" is consistent in that order.
//   Total Reserved       -> a DEVICE_SAMPLE (bytes = reserved, aux = the device's memory from
//                           deviceProperties) whenever it changes on a CUDA device, and one per
//                           device at every step start.
//   ProfilerStep#N       -> STEP, aux = N, at the range's start. Ranges on the GPU timeline
//                           (cat gpu_user_annotation) repeat the CPU ones and are not re-emitted.
//   user_annotation and  -> the tag of every allocation made inside the range, innermost open
//   "nn.Module: X" scopes   range on the allocating thread (record_function and module scopes
//                           are thread-local, so a range on another thread says nothing).
// Baseline: a trace that starts mid-run frees memory it never saw allocated and reports a
// "Total Allocated" that already includes it. Before the first event the live set is seeded,
// per device, with (a) one allocation at its real address for every block the trace frees
// without having allocated it, sized from that free, and (b) one allocation of the remainder
// (Total Allocated before the first event minus those blocks) at BaselineAddress(), all tagged
// kBaselineTag. A free of an address the trace has already seen freed, with no allocation
// there since, is not a pre-trace block: it is dropped and counted (unmatched_frees). Then every
// FREE matches a live ALLOC, and for a complete trace live bytes equal Total Allocated after
// every event (summed over CUDA devices), which the stats verify (total_allocated_mismatches).
#ifndef MEMTRACE_QUERY_IMPORTERS_KINETO_EVENTS_H_
#define MEMTRACE_QUERY_IMPORTERS_KINETO_EVENTS_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/stream/event_sink.h"
#include "query/analysis/live_set.h"
#include "query/importers/kineto_trace.h"

namespace memtrace::importers {

inline constexpr const char* kBaselineTag = analysis::kBeforeTraceTag;

// Where the remainder of a device's pre-trace memory is seeded: an upper-half (kernel space)
// address that no user-space or device pointer can take.
inline uint64_t BaselineAddress(int32_t device_type, int32_t device_id) {
  return 0xFFFFFF0000000000ull | (static_cast<uint64_t>(device_type & 0xFF) << 16) |
         static_cast<uint64_t>(device_id & 0xFFFF);
}

struct KinetoEventOptions {
  // CPU [memory] events become PAGEABLE allocations (true) or are dropped (false).
  bool include_cpu_memory = true;
  // Called after every `checkpoint_events` recorded events (and never when empty), so a caller
  // can wait for its sink to drain; an error stops the import and is returned.
  uint64_t checkpoint_events = 1 << 18;
  std::function<absl::Status()> checkpoint;
};

struct KinetoEventStats {
  uint64_t memory_events = 0;  // ALLOC + FREE recorded from [memory] events
  uint64_t allocs = 0;
  uint64_t frees = 0;
  uint64_t cuda_memory_events = 0;
  uint64_t cpu_memory_events = 0;
  uint64_t other_memory_events = 0;
  uint64_t cpu_memory_skipped = 0;  // include_cpu_memory = false
  uint64_t zero_byte_skipped = 0;   // Bytes == 0: neither an allocation nor a free
  uint64_t steps = 0;               // STEP events
  uint64_t tags = 0;                // distinct annotation tags used by allocations
  uint64_t tagged_allocs = 0;
  uint64_t seeded_allocations = 0;
  uint64_t seeded_bytes = 0;  // CUDA devices only: what live bytes start from
  uint64_t device_samples = 0;
  // Frees of an address already freed, with no allocation there since (a double free, or an
  // allocation missing from the trace): not recorded, since nothing is live there to free.
  uint64_t unmatched_frees = 0;
  // Events whose Total Allocated differs from the previous one's plus Bytes (on the same
  // device): 0 for a complete trace.
  uint64_t total_allocated_mismatches = 0;
  uint64_t events_recorded = 0;  // everything sent to the sink
  int64_t first_ts_ns = 0;
  int64_t last_ts_ns = 0;
  std::vector<int32_t> cuda_devices;  // ascending
  int64_t final_total_allocated = 0;  // CUDA, summed over devices, after the last event
};

// Records `trace`'s events on `sink` (sorting trace->memory in place). Errors come only from
// options.checkpoint.
absl::StatusOr<KinetoEventStats> RecordKinetoTrace(KinetoTrace* trace,
                                                   const KinetoEventOptions& options,
                                                   EventSink& sink);

}  // namespace memtrace::importers

#endif  // MEMTRACE_QUERY_IMPORTERS_KINETO_EVENTS_H_
