// A thread-safe in-memory EventSink for tests: keeps every event and a real string table, so a
// test can assert on exactly what a translator produced.
#ifndef MEMTRACE_AGENT_CUPTI_TESTING_RECORDING_SINK_H_
#define MEMTRACE_AGENT_CUPTI_TESTING_RECORDING_SINK_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "agent/stream/event_sink.h"

namespace memtrace {
namespace cupti {

class RecordingSink : public EventSink {
 public:
  void Record(const Event& event) override {
    absl::MutexLock lock(&mu_);
    Event e = event;
    e.seq = events_.size() + 1;
    events_.push_back(e);
  }

  // Keeps the events as Record() does, and the size of each call (record_many_sizes()).
  void RecordMany(absl::Span<const Event> events) override {
    {
      absl::MutexLock lock(&mu_);
      record_many_sizes_.push_back(events.size());
    }
    for (const Event& e : events) Record(e);
  }

  std::vector<size_t> record_many_sizes() const {
    absl::MutexLock lock(&mu_);
    return record_many_sizes_;
  }

  uint32_t Intern(StringKind kind, std::string_view value) override {
    absl::MutexLock lock(&mu_);
    auto key = std::make_pair(kind, std::string(value));
    auto it = ids_.find(key);
    if (it != ids_.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(ids_.size() + 1);
    ids_.emplace(key, id);
    names_.emplace(id, std::string(value));
    return id;
  }

  std::vector<Event> events() const {
    absl::MutexLock lock(&mu_);
    return events_;
  }

  std::vector<Event> EventsOfKind(EventKind kind) const {
    absl::MutexLock lock(&mu_);
    std::vector<Event> out;
    for (const Event& e : events_) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }

  // The string an id was interned for, "" for 0 or an unknown id.
  std::string Name(uint32_t id) const {
    absl::MutexLock lock(&mu_);
    auto it = names_.find(id);
    return it == names_.end() ? std::string() : it->second;
  }

  // The id of (kind, value), 0 when never interned.
  uint32_t IdOf(StringKind kind, std::string_view value) const {
    absl::MutexLock lock(&mu_);
    auto it = ids_.find(std::make_pair(kind, std::string(value)));
    return it == ids_.end() ? 0 : it->second;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> record_many_sizes_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<StringKind, std::string>, uint32_t> ids_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, std::string> names_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cupti
}  // namespace memtrace

#endif  // MEMTRACE_AGENT_CUPTI_TESTING_RECORDING_SINK_H_
