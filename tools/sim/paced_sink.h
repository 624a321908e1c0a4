// SIMULATOR: the sink a simulated rank plays into. It forwards to the rank's real agent
// Transport, holding the player back instead of letting the transport's bounded queue overflow
// (a simulator produces events far faster than any application), and paces events to wall time
// when speed > 0.
#ifndef MEMTRACE_TOOLS_SIM_PACED_SINK_H_
#define MEMTRACE_TOOLS_SIM_PACED_SINK_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/time/time.h"
#include "agent/stream/transport.h"

namespace memtrace::sim {

// How many events each simulated rank's Transport queues (TransportOptions::queue_capacity) in a
// run of `ranks`: the agent's default of 1 Mi events (about 72 MiB, allocated up front) while the
// ranks together stay within about 1 GiB, less each beyond that, down to 16 Ki events. A real
// agent has one queue per process; the simulator has one per rank in one process, and 512 ranks
// at the default would need 36 GiB.
size_t SimulatedQueueCapacity(int ranks);

// The batch size (TransportOptions::max_batch_events) that goes with a queue of `queue_capacity`:
// the agent's default, or a quarter of the queue when that is smaller, so that the backlog the
// sink allows (half the queue) still spans two batches in flight.
size_t SimulatedBatchEvents(size_t queue_capacity);

class PacedSink : public EventSink {
 public:
  // `queue_capacity`: the transport's; the player is held back while more than half of it is
  // unacknowledged. `max_wait`: how long the player is held back for a backlog that does not
  // shrink (a collector gone away), once per run: after that the sink stops holding back and the
  // transport drops what does not fit, counted as lost.
  PacedSink(Transport& transport, size_t queue_capacity, double speed, absl::Duration max_wait);

  void Record(const Event& event) override;
  uint32_t Intern(StringKind kind, std::string_view value) override;

  // The step (its latest STEP marker; 0 without markers) in which the rank recorded its first
  // OOM event, if any, and that event's time.
  std::optional<int64_t> oom_step() const { return oom_step_; }
  std::optional<int64_t> oom_ts_ns() const { return oom_ts_ns_; }
  // Whether a backlog outlasted max_wait, so that the sink stopped holding the player back.
  bool gave_up_waiting() const { return gave_up_waiting_; }

 private:
  void Pace(int64_t ts_ns);
  void HoldBackWhileBacklogged();

  Transport& transport_;
  const size_t backlog_limit_;
  const double speed_;
  const absl::Duration max_wait_;
  size_t since_check_ = 0;
  bool gave_up_waiting_ = false;
  int64_t step_ = 0;
  std::optional<int64_t> oom_step_;
  std::optional<int64_t> oom_ts_ns_;
  int64_t first_ts_ns_ = 0;
  absl::Time wall_start_;
};

}  // namespace memtrace::sim

#endif  // MEMTRACE_TOOLS_SIM_PACED_SINK_H_
