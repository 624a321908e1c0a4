#include "collector/server/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace memtrace::collector {

absl::Status ParallelFor(size_t n, int threads, absl::FunctionRef<absl::Status(size_t)> work) {
  if (threads <= 1 || n <= 1) {
    for (size_t i = 0; i < n; ++i) {
      if (absl::Status s = work(i); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  absl::Mutex mu;
  size_t first_failed = n;
  absl::Status first_error;
  auto run = [&] {
    while (!failed.load(std::memory_order_relaxed)) {
      const size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n) return;
      absl::Status s = work(i);
      if (s.ok()) continue;
      absl::MutexLock lock(&mu);
      if (i < first_failed) {
        first_failed = i;
        first_error = std::move(s);
      }
      failed.store(true, std::memory_order_relaxed);
    }
  };
  const size_t helpers = std::min(static_cast<size_t>(threads), n) - 1;
  std::vector<std::thread> pool;
  pool.reserve(helpers);
  for (size_t t = 0; t < helpers; ++t) pool.emplace_back(run);
  run();
  for (std::thread& t : pool) t.join();
  return first_error;
}

int DefaultQueryThreads() {
  const unsigned cores = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(cores, 1u, 8u));
}

}  // namespace memtrace::collector
