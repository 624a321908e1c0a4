// Puts the events the CUPTI callbacks make (steps, phases, OOMs, VMM maps: on application
// threads, at once) in time order with the activity records (allocations and frees: later, in
// CUPTI's buffers). The collector applies a stream in order — an allocation belongs to the step
// open when it arrives, the live set at an OOM is what arrived before it — so a callback event
// that overtook the records made before it would put them in the wrong step, or miss them at
// the OOM.
//
// A callback event is held until no earlier record can still come: until a record with a later
// timestamp passes (when both clocks are one, see set_records_share_clock), or until a flush of
// CUPTI's buffers that began after the event was held has finished (FlushMark before the flush,
// ReleaseHeldBefore after it, driven by the BufferFlusher: by the order events were held, so a
// clock that steps back cannot keep them). Records are never held. Nothing waits: a full hold
// releases its oldest event early (counted), and after Close() everything passes through.
#ifndef MEMTRACE_AGENT_CUPTI_RECORD_ORDER_H_
#define MEMTRACE_AGENT_CUPTI_RECORD_ORDER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string_view>

#include "absl/types/span.h"
#include "agent/stream/event_sink.h"
#include "proto/codec/event.h"

namespace memtrace {
namespace cupti {

struct RecordOrderStats {
  uint64_t held = 0;                // callback events held at least until a record or a flush
  uint64_t released_by_record = 0;  // ... released ahead of a later record
  uint64_t released_by_flush = 0;   // ... released after a flush
  uint64_t released_when_full = 0;  // ... released early: the hold was full
  uint64_t records_behind = 0;      // records older than a callback event already released
  size_t most_held = 0;
};

class RecordOrder {
 public:
  // `downstream` (the Transport) must outlive this. `on_hold` (may be empty) is called, with
  // no lock held, when an event starts waiting in an empty hold: the BufferFlusher's Poke, so
  // that the flush that releases it comes at once rather than at the next period.
  RecordOrder(EventSink* downstream, size_t max_held, std::function<void()> on_hold);

  RecordOrder(const RecordOrder&) = delete;
  RecordOrder& operator=(const RecordOrder&) = delete;

  // The sink for the callbacks (NvtxTracker, DriverCallbacks) and the one for the record
  // translator. Both forward Intern and RecordLoss unchanged. Thread-safe.
  EventSink* callbacks() { return &callbacks_; }
  EventSink* records() { return &records_; }

  // How many events have been held so far: taken just before a flush begins.
  uint64_t FlushMark() const;
  // Releases the events held before `mark` was taken: the flush that began after it has
  // delivered every record made before them. Returns whether events are still held (held after
  // the mark: the next flush releases them). Thread-safe.
  bool ReleaseHeldBefore(uint64_t mark);

  // Whether records' timestamps can be compared with the callback events' (CUPTI's clock reads
  // as the agent's). Until set, and when false, only flushes release held events. Thread-safe.
  void set_records_share_clock(bool same);

  // Releases everything held; from then on events pass straight through (at exit, after the
  // last forced flush). Thread-safe.
  void Close();

  RecordOrderStats stats() const;

 private:
  class CallbackSide : public EventSink {
   public:
    explicit CallbackSide(RecordOrder* order) : order_(order) {}
    void Record(const Event& event) override { order_->HoldOrPass(event); }
    void RecordLoss(uint32_t reason, uint64_t n, int64_t ts_ns) override;
    uint32_t Intern(StringKind kind, std::string_view value) override;

   private:
    RecordOrder* order_;
  };
  class RecordSide : public EventSink {
   public:
    explicit RecordSide(RecordOrder* order) : order_(order) {}
    void Record(const Event& event) override { order_->PassRecords({&event, 1}); }
    void RecordMany(absl::Span<const Event> events) override { order_->PassRecords(events); }
    void RecordLoss(uint32_t reason, uint64_t n, int64_t ts_ns) override;
    uint32_t Intern(StringKind kind, std::string_view value) override;

   private:
    RecordOrder* order_;
  };

  void HoldOrPass(const Event& event);
  void PassRecords(absl::Span<const Event> records);
  // Forwards held events while `releasable(front)` (a Held); counts them in `*counter`.
  template <typename Pred>
  void ReleaseWhileLocked(Pred releasable, uint64_t* counter);

  EventSink* const downstream_;
  const size_t max_held_;
  const std::function<void()> on_hold_;
  CallbackSide callbacks_{this};
  RecordSide records_{this};

  // Held under mu_, and forwarded under it too, so that the downstream order is the order
  // decided here (the Transport's queue takes its own lock; it never waits).
  mutable std::mutex mu_;
  struct Held {
    Event event;
    uint64_t index;  // stats_.held when it was held: its place in the hold order
  };
  std::deque<Held> held_;
  bool same_clock_ = false;
  bool closed_ = false;
  int64_t last_released_ts_ = INT64_MIN;
  RecordOrderStats stats_;
};

}  // namespace cupti
}  // namespace memtrace

#endif  // MEMTRACE_AGENT_CUPTI_RECORD_ORDER_H_
