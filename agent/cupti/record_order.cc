#include "agent/cupti/record_order.h"

#include <algorithm>
#include <utility>

namespace memtrace {
namespace cupti {

RecordOrder::RecordOrder(EventSink* downstream, size_t max_held, std::function<void()> on_hold)
    : downstream_(downstream),
      max_held_(std::max<size_t>(max_held, 1)),
      on_hold_(std::move(on_hold)) {}

void RecordOrder::CallbackSide::RecordLoss(uint32_t reason, uint64_t n, int64_t ts_ns) {
  order_->downstream_->RecordLoss(reason, n, ts_ns);
}

uint32_t RecordOrder::CallbackSide::Intern(StringKind kind, std::string_view value) {
  return order_->downstream_->Intern(kind, value);
}

void RecordOrder::RecordSide::RecordLoss(uint32_t reason, uint64_t n, int64_t ts_ns) {
  order_->downstream_->RecordLoss(reason, n, ts_ns);
}

uint32_t RecordOrder::RecordSide::Intern(StringKind kind, std::string_view value) {
  return order_->downstream_->Intern(kind, value);
}

template <typename Pred>
void RecordOrder::ReleaseWhileLocked(Pred releasable, uint64_t* counter) {
  while (!held_.empty() && releasable(held_.front())) {
    last_released_ts_ = std::max(last_released_ts_, held_.front().event.ts_ns);
    downstream_->Record(held_.front().event);
    held_.pop_front();
    ++*counter;
  }
}

void RecordOrder::HoldOrPass(const Event& event) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) {
      downstream_->Record(event);
      return;
    }
    if (held_.size() >= max_held_) {
      size_t over = held_.size() - max_held_ + 1;
      ReleaseWhileLocked([&over](const Held&) { return over-- > 0; }, &stats_.released_when_full);
    }
    first = held_.empty();
    held_.push_back(Held{event, stats_.held});
    ++stats_.held;
    stats_.most_held = std::max(stats_.most_held, held_.size());
  }
  if (first && on_hold_) on_hold_();
}

void RecordOrder::PassRecords(absl::Span<const Event> records) {
  std::lock_guard<std::mutex> lock(mu_);
  if (same_clock_) {
    for (const Event& r : records) stats_.records_behind += r.ts_ns < last_released_ts_ ? 1 : 0;
  }
  size_t i = 0;
  while (i < records.size()) {
    if (held_.empty() || !same_clock_) {
      downstream_->RecordMany(records.subspan(i));
      return;
    }
    // The records made before the oldest held event go ahead of it; then every held event made
    // before the next record goes ahead of that record.
    size_t j = i;
    while (j < records.size() && records[j].ts_ns < held_.front().event.ts_ns) ++j;
    if (j > i) downstream_->RecordMany(records.subspan(i, j - i));
    i = j;
    if (i < records.size()) {
      const int64_t next = records[i].ts_ns;
      ReleaseWhileLocked([next](const Held& h) { return h.event.ts_ns <= next; },
                         &stats_.released_by_record);
    }
  }
}

uint64_t RecordOrder::FlushMark() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_.held;
}

bool RecordOrder::ReleaseHeldBefore(uint64_t mark) {
  std::lock_guard<std::mutex> lock(mu_);
  ReleaseWhileLocked([mark](const Held& h) { return h.index < mark; }, &stats_.released_by_flush);
  return !held_.empty();
}

void RecordOrder::set_records_share_clock(bool same) {
  std::lock_guard<std::mutex> lock(mu_);
  same_clock_ = same;
}

void RecordOrder::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  ReleaseWhileLocked([](const Held&) { return true; }, &stats_.released_by_flush);
  closed_ = true;
}

RecordOrderStats RecordOrder::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace cupti
}  // namespace memtrace
