// Where recorded events go. The CUPTI translator, the simulator and the trace importers write
// to an EventSink; the gRPC Transport is the real one, tests may use a recording one.
#ifndef MEMTRACE_AGENT_STREAM_EVENT_SINK_H_
#define MEMTRACE_AGENT_STREAM_EVENT_SINK_H_

#include <cstdint>
#include <string_view>

#include "absl/types/span.h"
#include "proto/codec/event.h"

namespace memtrace {

class EventSink {
 public:
  virtual ~EventSink() = default;

  // Takes one event; the sink assigns `seq` (strictly increasing, from 1) and ignores the
  // caller's value. Never blocks on the network: a full sink drops and counts the loss.
  // Thread-safe.
  virtual void Record(const Event& event) = 0;

  // Record() for each event in order. Sinks that lock per event override it to lock once per
  // many (the CUPTI translator hands over a buffer's events together). Thread-safe.
  virtual void RecordMany(absl::Span<const Event> events) {
    for (const Event& e : events) Record(e);
  }

  // Reports `n` events lost before they reached the sink (`reason`: a LossReasonValue, e.g.
  // records CUPTI dropped): an EVENT_KIND_LOSS marker with aux = n. Unlike an event passed to
  // Record(), the report itself is never dropped: a sink that is full keeps the count and places
  // the marker when there is room. This default records the marker as an event. Thread-safe.
  virtual void RecordLoss(uint32_t reason, uint64_t n, int64_t ts_ns) {
    if (n == 0) return;
    Event e;
    e.kind = EventKind::kLoss;
    e.ts_ns = ts_ns;
    e.aux = n;
    e.memory_kind = reason;
    Record(e);
  }

  // The stream-local id of a string (tag, source or phase name), defining it on first use.
  // The same (kind, value) always gets the same id. Thread-safe.
  virtual uint32_t Intern(StringKind kind, std::string_view value) = 0;
};

}  // namespace memtrace

#endif  // MEMTRACE_AGENT_STREAM_EVENT_SINK_H_
