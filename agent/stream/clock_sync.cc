#include "agent/stream/clock_sync.h"

#include <algorithm>

namespace memtrace {

ClockSync::ClockSync(size_t window) : window_(std::max<size_t>(window, 1)) {}

void ClockSync::AddSample(int64_t sent_ns, int64_t collector_received_ns,
                          int64_t collector_sent_ns, int64_t received_ns) {
  if (collector_received_ns == 0) collector_received_ns = collector_sent_ns;
  // In unsigned space: the clocks may be any distance apart, the differences are small.
  const auto diff = [](int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  };
  const int64_t round_trip =
      diff(received_ns, sent_ns) - diff(collector_sent_ns, collector_received_ns);
  if (round_trip < 0 || collector_sent_ns < collector_received_ns) return;
  // ((t1 - t0) + (t2 - t3)) / 2 without overflow: each half separately.
  const int64_t forward = diff(collector_received_ns, sent_ns);
  const int64_t backward = diff(collector_sent_ns, received_ns);
  const int64_t offset = forward / 2 + backward / 2 + (forward % 2 + backward % 2) / 2;
  samples_.push_back(ClockEstimate{offset, round_trip});
  const bool best_left = samples_.size() > window_ && best_.has_value() &&
                         samples_.front() == *best_;
  if (samples_.size() > window_) samples_.pop_front();
  if (best_left) {
    // The shortest round trip; among equals, the newest (the clock may have drifted since).
    best_ = samples_.front();
    for (const ClockEstimate& s : samples_) {
      if (s.round_trip_ns <= best_->round_trip_ns) best_ = s;
    }
  } else if (!best_.has_value() || round_trip <= best_->round_trip_ns) {
    best_ = samples_.back();
  }
}

std::optional<ClockEstimate> ClockSync::Current() const { return best_; }

}  // namespace memtrace
