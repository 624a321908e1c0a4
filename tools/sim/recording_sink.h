// An EventSink that keeps everything in memory: for tests, and for tools that want a played
// workload as plain values (e.g. analyses' test data).
#ifndef MEMTRACE_TOOLS_SIM_RECORDING_SINK_H_
#define MEMTRACE_TOOLS_SIM_RECORDING_SINK_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "agent/stream/event_sink.h"
#include "proto/codec/event.h"

namespace memtrace::sim {

class RecordingSink : public EventSink {
 public:
  // Stores a copy with seq = 1, 2, 3, ... in arrival order. Thread-safe.
  void Record(const Event& event) override;
  // Ids from 1 in order of first use, per (kind, value). Thread-safe.
  uint32_t Intern(StringKind kind, std::string_view value) override;

  // Copies of what was recorded so far. Thread-safe.
  std::vector<Event> events() const;
  std::vector<StringDef> strings() const;
  // The value interned under `id`, or "" when none. Thread-safe.
  std::string Lookup(uint32_t id) const;

 private:
  mutable absl::Mutex mu_;
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
  std::vector<StringDef> strings_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<StringKind, std::string>, uint32_t> ids_ ABSL_GUARDED_BY(mu_);
};

}  // namespace memtrace::sim

#endif  // MEMTRACE_TOOLS_SIM_RECORDING_SINK_H_
