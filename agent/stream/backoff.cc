#include "agent/stream/backoff.h"

#include <algorithm>

namespace memtrace {

Backoff::Backoff(absl::Duration initial, absl::Duration max)
    : initial_(initial), max_(std::max(initial, max)), current_(initial) {}

absl::Duration Backoff::Next() {
  const absl::Duration wait = current_ * absl::Uniform(rng_, 0.5, 1.0);
  current_ = std::min(current_ * 2, max_);
  return wait;
}

void Backoff::Reset() { current_ = initial_; }

}  // namespace memtrace
