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

  // The stream-local id of a string (tag, source or phase name), defining it on first use.
  // The same (kind, value) always gets the same id. Thread-safe.
  virtual uint32_t Intern(StringKind kind, std::string_view value) = 0;
};

}  // namespace memtrace

#endif  // MEMTRACE_AGENT_STREAM_EVENT_SINK_H_
