// Hands CUPTI's partly filled activity buffers over promptly. CUPTI's own periodic flush
// (cuptiActivityFlushPeriod) returns only full buffers, so a process that allocates slowly, as
// PyTorch's caching allocator does once warm, would see its records only when 4 MiB of them
// have gathered, or at exit. This thread calls cuptiActivityFlushAll(0) — every buffer whose
// records are complete, full or not; the header says it "can be done at a regular interval in
// a separate thread" — every period and at once after Poke(), and after each flush lets the
// RecordOrder release the callback events it held before the flush began.
#ifndef MEMTRACE_AGENT_CUPTI_BUFFER_FLUSHER_H_
#define MEMTRACE_AGENT_CUPTI_BUFFER_FLUSHER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/time/time.h"

namespace memtrace {
namespace cupti {

struct BufferFlusherOptions {
  absl::Duration period = absl::Milliseconds(250);  // zero: only when poked
  // Between two flushes at least this long, so that a burst of pokes (many NVTX ranges in a
  // row) costs one flush per gap, not one each.
  absl::Duration min_gap = absl::Milliseconds(1);
};

class BufferFlusher {
 public:
  // `flush` delivers the buffers (cuptiActivityFlushAll(0)); `flushed(m)` runs after each, with
  // m = `mark()` taken just before it began (RecordOrder::FlushMark), and returns true when it
  // wants another flush at once (events still held). All three run on the flusher's thread.
  BufferFlusher(BufferFlusherOptions options, std::function<void()> flush,
                std::function<bool(uint64_t mark)> flushed, std::function<uint64_t()> mark);
  ~BufferFlusher();  // Stop()

  BufferFlusher(const BufferFlusher&) = delete;
  BufferFlusher& operator=(const BufferFlusher&) = delete;

  void Start();
  // Asks for a flush now (or after min_gap). Never waits for the flush. Thread-safe.
  void Poke();
  // Ends the thread after any flush in progress. Idempotent.
  void Stop();

  uint64_t flushes() const;

 private:
  void Run();

  const BufferFlusherOptions options_;
  const std::function<void()> flush_;
  const std::function<bool(uint64_t)> flushed_;
  const std::function<uint64_t()> mark_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool poked_ = false;
  bool stopping_ = false;
  uint64_t flushes_ = 0;
  std::thread thread_;
};

}  // namespace cupti
}  // namespace memtrace

#endif  // MEMTRACE_AGENT_CUPTI_BUFFER_FLUSHER_H_
