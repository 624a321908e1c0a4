#include "agent/cupti/buffer_flusher.h"

#include <utility>

namespace memtrace {
namespace cupti {

BufferFlusher::BufferFlusher(BufferFlusherOptions options, std::function<void()> flush,
                             std::function<bool(uint64_t)> flushed, std::function<uint64_t()> mark)
    : options_(options),
      flush_(std::move(flush)),
      flushed_(std::move(flushed)),
      mark_(std::move(mark)) {}

BufferFlusher::~BufferFlusher() { Stop(); }

void BufferFlusher::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Run(); });
}

void BufferFlusher::Poke() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    poked_ = true;
  }
  cv_.notify_one();
}

void BufferFlusher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

uint64_t BufferFlusher::flushes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return flushes_;
}

void BufferFlusher::Run() {
  const bool periodic = options_.period > absl::ZeroDuration();
  auto last = std::chrono::steady_clock::now() - absl::ToChronoNanoseconds(options_.min_gap);
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      const auto due = last + absl::ToChronoNanoseconds(options_.period);
      auto ready = [this] { return poked_ || stopping_; };
      if (periodic) {
        cv_.wait_until(lock, due, ready);
      } else {
        cv_.wait(lock, ready);
      }
      if (stopping_) return;
      // A poke soon after a flush waits out the gap (a stop does not).
      const auto earliest = last + absl::ToChronoNanoseconds(options_.min_gap);
      cv_.wait_until(lock, earliest, [this] { return stopping_; });
      if (stopping_) return;
      poked_ = false;
    }
    const uint64_t mark = mark_();
    flush_();
    last = std::chrono::steady_clock::now();
    const bool again = flushed_(mark);
    std::lock_guard<std::mutex> lock(mu_);
    ++flushes_;
    if (again) poked_ = true;
  }
}

}  // namespace cupti
}  // namespace memtrace
