// Exponential reconnect backoff with jitter, so that many ranks that lost the same collector
// do not reconnect in lockstep.
#ifndef MEMTRACE_AGENT_STREAM_BACKOFF_H_
#define MEMTRACE_AGENT_STREAM_BACKOFF_H_

#include "absl/random/random.h"
#include "absl/time/time.h"

namespace memtrace {

class Backoff {
 public:
  // Waits double from `initial` up to `max`; each is drawn uniformly from 50..100% of it.
  Backoff(absl::Duration initial, absl::Duration max);

  // The next wait. Not thread-safe.
  absl::Duration Next();
  // Back to `initial` (after a stream worked).
  void Reset();

 private:
  const absl::Duration initial_;
  const absl::Duration max_;
  absl::Duration current_;
  absl::BitGen rng_;
};

}  // namespace memtrace

#endif  // MEMTRACE_AGENT_STREAM_BACKOFF_H_
