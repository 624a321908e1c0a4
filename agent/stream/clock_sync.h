// The agent's estimate of how far the collector's clock is from its own, from its stream's round
// trips (NTP's on-wire estimate): for each message the agent's send time t0, the collector's
// receive and ack times t1 and t2 (IngestAck), and the agent's receive time t3 give
//   offset = ((t1 - t0) + (t2 - t3)) / 2,  round trip = (t3 - t0) - (t2 - t1).
// The offset is exact to within half the round trip whatever the path's asymmetry, so of the
// recent samples the one with the shortest round trip wins; keeping only recent ones lets the
// estimate follow a drifting clock. Ranks on hosts whose clocks differ by seconds (no NTP, a
// container's clock) then share the collector's time buckets (collector/README.md, "Clocks").
// Pure; not thread-safe.
#ifndef MEMTRACE_AGENT_STREAM_CLOCK_SYNC_H_
#define MEMTRACE_AGENT_STREAM_CLOCK_SYNC_H_

#include <cstdint>
#include <deque>
#include <optional>

#include "proto/codec/event.h"

namespace memtrace {

class ClockSync {
 public:
  // Keeps the last `window` samples (at least 1).
  explicit ClockSync(size_t window = 64);

  // One message's four timestamps (t0, t3 on the agent's clock, t1, t2 on the collector's).
  // t1 = 0 means the collector did not say when it received (an older collector): t2 stands
  // for both. Samples whose round trip comes out negative (a clock stepped in between) are
  // ignored.
  void AddSample(int64_t sent_ns, int64_t collector_received_ns, int64_t collector_sent_ns,
                 int64_t received_ns);

  // The best recent estimate; nullopt before the first usable sample.
  std::optional<ClockEstimate> Current() const;

  size_t samples() const { return samples_.size(); }

 private:
  const size_t window_;
  std::deque<ClockEstimate> samples_;
  // The best of samples_, kept up to date by AddSample (Current() runs for every batch sent).
  std::optional<ClockEstimate> best_;
};

}  // namespace memtrace

#endif  // MEMTRACE_AGENT_STREAM_CLOCK_SYNC_H_
