#include "agent/stream/event_queue.h"

#include <algorithm>

namespace memtrace {

EventQueue::EventQueue(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {
  std::lock_guard<std::mutex> lock(mu_);
  ring_.resize(capacity_);
}

size_t EventQueue::Push(const Event& event) {
  std::lock_guard<std::mutex> lock(mu_);
  PushLocked(event);
  return size_;
}

EventQueue::Pushed EventQueue::PushMany(absl::Span<const Event> events) {
  std::lock_guard<std::mutex> lock(mu_);
  Pushed out;
  out.size_before = size_;
  for (const Event& e : events) PushLocked(e);
  out.size_after = size_;
  return out;
}

void EventQueue::PushLocked(const Event& event) {
  ++counters_.pushed;
  last_ts_ns_ = event.ts_ns;
  if (closed_) {
    ++counters_.lost_after_close;
    return;
  }
  // A pending loss is reported before the next kept event, so the marker sits where the
  // gap is; it needs room for itself plus the event.
  if (HasPendingLossLocked() && size_ + PendingMarkersLocked() < capacity_) PlaceMarkersLocked();
  if (size_ == capacity_ || HasPendingLossLocked()) {
    ++counters_.lost_queue_full;
    ++pending_loss_[kLossQueueFull];
    return;
  }
  AppendLocked(event);
}

size_t EventQueue::Pop(size_t max, std::vector<Event>* out) {
  size_t moved = 0;
  while (moved < max) {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t n = std::min({max - moved, size_, kPopChunk});
    for (size_t i = 0; i < n; ++i) {
      out->push_back(ring_[head_]);
      head_ = head_ + 1 == capacity_ ? 0 : head_ + 1;
    }
    size_ -= n;
    moved += n;
    if (n < kPopChunk || moved == max) {
      if (HasPendingLossLocked() && size_ + PendingMarkersLocked() <= capacity_) {
        PlaceMarkersLocked();
      }
      break;
    }
  }
  return moved;
}

void EventQueue::AddLoss(uint32_t reason, uint64_t n) {
  if (n == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  pending_loss_[reason < kReasons ? reason : kLossUnspecified] += n;
  if (size_ + PendingMarkersLocked() <= capacity_) PlaceMarkersLocked();
}

EventQueue::Sealed EventQueue::SealPendingLosses() {
  std::lock_guard<std::mutex> lock(mu_);
  if (HasPendingLossLocked() && size_ + PendingMarkersLocked() <= capacity_) PlaceMarkersLocked();
  return Sealed{last_seq_, HasPendingLossLocked()};
}

void EventQueue::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
}

EventQueue::Counters EventQueue::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  Counters c = counters_;
  c.last_seq = last_seq_;
  c.size = size_;
  return c;
}

bool EventQueue::HasPendingLossLocked() const {
  for (uint64_t n : pending_loss_) {
    if (n != 0) return true;
  }
  return false;
}

size_t EventQueue::PendingMarkersLocked() const {
  size_t markers = 0;
  for (uint64_t n : pending_loss_) markers += n != 0;
  return markers;
}

void EventQueue::PlaceMarkersLocked() {
  for (uint32_t reason = 0; reason < kReasons; ++reason) {
    if (pending_loss_[reason] == 0) continue;
    Event marker;
    marker.kind = EventKind::kLoss;
    marker.ts_ns = last_ts_ns_;
    marker.aux = pending_loss_[reason];
    marker.memory_kind = reason;
    AppendLocked(marker);
    pending_loss_[reason] = 0;
  }
}

void EventQueue::AppendLocked(const Event& event) {
  size_t tail = head_ + size_;
  if (tail >= capacity_) tail -= capacity_;
  Event& slot = ring_[tail];
  slot = event;
  slot.seq = ++last_seq_;
  ++size_;
}

}  // namespace memtrace
