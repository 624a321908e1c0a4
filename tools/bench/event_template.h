// Realistic event streams for load generation: one simulated FSDP rank (tools/sim) played once
// into memory, then replayed endlessly, each lap shifted past the previous one in time, step
// number and address range, so that a stream of any length keeps the shape of a training job
// (alloc/free pairs per layer, STEP markers, device samples) without the simulator's cost.
#ifndef MEMTRACE_TOOLS_BENCH_EVENT_TEMPLATE_H_
#define MEMTRACE_TOOLS_BENCH_EVENT_TEMPLATE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/codec/event.h"
#include "tools/sim/workload.h"

namespace memtrace::bench {

struct EventTemplate {
  std::vector<Event> events;       // seq 1..n as played
  std::vector<StringDef> strings;  // ids 1.. in order of first use
  int64_t steps = 0;               // STEP markers in `events`
  int64_t span_ns = 0;             // last ts - first ts
};

// Plays `rank` of the workload into memory. Fails for invalid options.
absl::StatusOr<EventTemplate> PlayTemplate(const sim::WorkloadOptions& options, int rank);

// An endless stream over a template. Not thread-safe; one per producer.
class LapReplayer {
 public:
  // `t` must outlive the replayer and hold at least one event.
  explicit LapReplayer(const EventTemplate* t);

  // Writes the next out.size() events (seq left 0: the sink numbers them). Lap k adds
  // k * (span_ns + 1 s) to timestamps, k * steps to STEP numbers and k << 40 to non-zero
  // addresses, so frees still match their allocations and nothing of one lap collides with
  // another's.
  void Fill(absl::Span<Event> out);

  uint64_t laps_completed() const { return lap_; }

 private:
  const EventTemplate* t_;
  size_t next_ = 0;
  uint64_t lap_ = 0;
  int64_t ts_shift_ = 0;
  uint64_t step_shift_ = 0;
  uint64_t address_shift_ = 0;
};

}  // namespace memtrace::bench

#endif  // MEMTRACE_TOOLS_BENCH_EVENT_TEMPLATE_H_
