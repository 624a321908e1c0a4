#include "tools/sim/paced_sink.h"

#include <algorithm>

#include "absl/time/clock.h"
#include "agent/stream/transport_options.h"

namespace memtrace::sim {

namespace {
// What the simulated ranks' queues may take together, and the least one rank gets.
constexpr uint64_t kQueuesBudgetEvents = (uint64_t{1} << 30) / sizeof(Event);
constexpr size_t kMinQueueEvents = size_t{1} << 14;
}  // namespace

size_t SimulatedQueueCapacity(int ranks) {
  const size_t agent_default = TransportOptions().queue_capacity;
  if (ranks <= 0) return agent_default;
  const uint64_t share = kQueuesBudgetEvents / static_cast<uint64_t>(ranks);
  return static_cast<size_t>(
      std::clamp<uint64_t>(share, kMinQueueEvents, static_cast<uint64_t>(agent_default)));
}

size_t SimulatedBatchEvents(size_t queue_capacity) {
  return std::min(kDefaultMaxBatchEvents, std::max<size_t>(queue_capacity / 4, 1));
}

PacedSink::PacedSink(Transport& transport, size_t queue_capacity, double speed,
                     absl::Duration max_wait)
    : transport_(transport),
      backlog_limit_(std::max<size_t>(queue_capacity / 2, 1)),
      speed_(speed),
      max_wait_(max_wait) {}

void PacedSink::Record(const Event& event) {
  if (event.kind == EventKind::kStep) {
    step_ = static_cast<int64_t>(event.aux);
  } else if (event.kind == EventKind::kOom && !oom_step_.has_value()) {
    oom_step_ = step_;
    oom_ts_ns_ = event.ts_ns;
  }
  if (speed_ > 0) Pace(event.ts_ns);
  if (++since_check_ >= 1024) {
    since_check_ = 0;
    HoldBackWhileBacklogged();
  }
  transport_.Record(event);
}

uint32_t PacedSink::Intern(StringKind kind, std::string_view value) {
  return transport_.Intern(kind, value);
}

void PacedSink::Pace(int64_t ts_ns) {
  if (first_ts_ns_ == 0) {
    first_ts_ns_ = ts_ns;
    wall_start_ = absl::Now();
  }
  const absl::Time due =
      wall_start_ + absl::Nanoseconds(static_cast<double>(ts_ns - first_ts_ns_) / speed_);
  if (absl::Now() < due) absl::SleepFor(due - absl::Now());
}

void PacedSink::HoldBackWhileBacklogged() {
  // Once per run, not per check: a collector that went away would otherwise hold the player
  // max_wait for every 1024 events, hours for a run of millions.
  if (gave_up_waiting_) return;
  const absl::Time give_up = absl::Now() + max_wait_;
  while (true) {
    const TransportStats s = transport_.stats();
    if (s.last_seq - std::min(s.last_seq, s.durable_seq) < backlog_limit_) return;
    if (absl::Now() >= give_up) break;
    absl::SleepFor(absl::Milliseconds(1));
  }
  gave_up_waiting_ = true;
}

}  // namespace memtrace::sim
