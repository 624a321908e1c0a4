// An EventSink that keeps everything in memory, for tests: events with sequence numbers
// assigned from 1, and the string table. Thread-safe like the real sink.
#ifndef MEMTRACE_QUERY_IMPORTERS_RECORDING_SINK_H_
#define MEMTRACE_QUERY_IMPORTERS_RECORDING_SINK_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "agent/stream/event_sink.h"

namespace memtrace::importers {

class RecordingSink : public EventSink {
 public:
  void Record(const Event& event) override {
    absl::MutexLock lock(&mu_);
    events_.push_back(event);
    events_.back().seq = events_.size();
  }

  uint32_t Intern(StringKind kind, std::string_view value) override {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] =
        ids_.try_emplace({kind, std::string(value)}, static_cast<uint32_t>(strings_.size() + 1));
    if (inserted) strings_.push_back({it->second, kind, std::string(value)});
    return it->second;
  }

  std::vector<Event> events() const {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  std::vector<StringDef> strings() const {
    absl::MutexLock lock(&mu_);
    return strings_;
  }
  // The value of string `id`, or "" when it was never interned.
  std::string Name(uint32_t id) const {
    absl::MutexLock lock(&mu_);
    return id >= 1 && id <= strings_.size() ? strings_[id - 1].value : std::string();
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<Event> events_;
  std::vector<StringDef> strings_;
  std::map<std::pair<StringKind, std::string>, uint32_t> ids_;
};

}  // namespace memtrace::importers

#endif  // MEMTRACE_QUERY_IMPORTERS_RECORDING_SINK_H_
