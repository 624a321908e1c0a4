#include "agent/cupti/buffer_pool.h"

namespace memtrace {
namespace cupti {

BufferPool::BufferPool(size_t buffer_bytes, size_t max_buffers)
    : buffer_bytes_(((buffer_bytes < 8 ? 8 : buffer_bytes) + 7) & ~size_t{7}),
      max_buffers_(max_buffers) {}

uint8_t* BufferPool::Acquire() {
  absl::MutexLock lock(&mu_);
  uint8_t* buffer = nullptr;
  if (!free_.empty()) {
    buffer = free_.back();
    free_.pop_back();
  } else if (storage_.size() < max_buffers_) {
    // uint64_t storage gives the 8-byte alignment CUPTI requires without aligned new.
    storage_.push_back(std::make_unique<uint64_t[]>(buffer_bytes_ / 8));
    buffer = reinterpret_cast<uint8_t*>(storage_.back().get());
  } else {
    ++stats_.declined;
    return nullptr;
  }
  out_.insert(buffer);
  ++stats_.acquired;
  return buffer;
}

bool BufferPool::Release(uint8_t* buffer) {
  absl::MutexLock lock(&mu_);
  if (buffer == nullptr || out_.erase(buffer) == 0) {
    ++stats_.foreign;
    return false;
  }
  free_.push_back(buffer);
  return true;
}

bool BufferPool::Owns(const uint8_t* buffer) const {
  absl::MutexLock lock(&mu_);
  return out_.contains(buffer);
}

BufferPoolStats BufferPool::stats() const {
  absl::MutexLock lock(&mu_);
  BufferPoolStats s = stats_;
  s.allocated = storage_.size();
  s.outstanding = out_.size();
  return s;
}

}  // namespace cupti
}  // namespace memtrace
