// The activity buffers handed to CUPTI: a bounded pool the agent owns. CUPTI asks for a buffer
// whenever it needs one (BufferRequested) and gives it back full (BufferCompleted); when all
// buffers are out, the request is declined and CUPTI drops records, which it counts and the
// agent reports as a loss. Buffers the pool did not hand out (another CUPTI client in the
// process may have registered its own callbacks) are recognized and never freed by us.
#ifndef MEMTRACE_AGENT_CUPTI_BUFFER_POOL_H_
#define MEMTRACE_AGENT_CUPTI_BUFFER_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

namespace memtrace {
namespace cupti {

struct BufferPoolStats {
  uint64_t acquired = 0;
  uint64_t declined = 0;   // requests refused because max_buffers were out
  uint64_t foreign = 0;    // releases of buffers this pool did not hand out
  size_t allocated = 0;    // buffers that exist (out + free)
  size_t outstanding = 0;  // buffers currently held by CUPTI
};

class BufferPool {
 public:
  // Buffers of `buffer_bytes` (rounded up to a multiple of 8, CUPTI's record alignment),
  // allocated lazily, at most `max_buffers` of them.
  BufferPool(size_t buffer_bytes, size_t max_buffers);

  // An 8-byte aligned buffer of buffer_bytes(), or nullptr when max_buffers are out.
  // Thread-safe.
  uint8_t* Acquire();

  // Returns a buffer from Acquire() to the pool; false (and nothing freed) for any other
  // pointer. Thread-safe.
  bool Release(uint8_t* buffer);

  // Whether `buffer` is one of ours that CUPTI currently holds. Thread-safe.
  bool Owns(const uint8_t* buffer) const;

  size_t buffer_bytes() const { return buffer_bytes_; }
  BufferPoolStats stats() const;

 private:
  const size_t buffer_bytes_;
  const size_t max_buffers_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<uint64_t[]>> storage_ ABSL_GUARDED_BY(mu_);
  std::vector<uint8_t*> free_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<const uint8_t*> out_ ABSL_GUARDED_BY(mu_);
  BufferPoolStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cupti
}  // namespace memtrace

#endif  // MEMTRACE_AGENT_CUPTI_BUFFER_POOL_H_
