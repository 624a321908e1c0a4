#include "tools/sim/recording_sink.h"

namespace memtrace::sim {

void RecordingSink::Record(const Event& event) {
  absl::MutexLock lock(&mu_);
  Event copy = event;
  copy.seq = events_.size() + 1;
  events_.push_back(copy);
}

uint32_t RecordingSink::Intern(StringKind kind, std::string_view value) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = ids_.try_emplace(std::make_pair(kind, std::string(value)),
                                         static_cast<uint32_t>(strings_.size() + 1));
  if (inserted) strings_.push_back(StringDef{it->second, kind, std::string(value)});
  return it->second;
}

std::vector<Event> RecordingSink::events() const {
  absl::MutexLock lock(&mu_);
  return events_;
}

std::vector<StringDef> RecordingSink::strings() const {
  absl::MutexLock lock(&mu_);
  return strings_;
}

std::string RecordingSink::Lookup(uint32_t id) const {
  absl::MutexLock lock(&mu_);
  if (id == 0 || id > strings_.size()) return "";
  return strings_[id - 1].value;
}

}  // namespace memtrace::sim
