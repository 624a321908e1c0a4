#include "collector/rollup/phase_nesting.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace memtrace::collector {

bool PhaseNesting::Begin(uint32_t phase_id, std::optional<Ended>* ended_first) {
  ended_first->reset();
  if (after_loss_ && IsOpen(phase_id)) *ended_first = End(phase_id);
  if (open_.size() >= kMaxOpen) {
    ++ignored_[phase_id];
    return false;
  }
  open_.push_back(phase_id);
  return true;
}

PhaseNesting::Ended PhaseNesting::End(uint32_t phase_id) {
  Ended ended;
  if (auto ignored = ignored_.find(phase_id); ignored != ignored_.end()) {
    if (--ignored->second == 0) ignored_.erase(ignored);
    ended.what = Ended::What::kEndedAnIgnoredBegin;
    return ended;
  }
  auto it = std::find(open_.rbegin(), open_.rend(), phase_id);
  if (it == open_.rend()) return ended;
  ended.what = Ended::What::kEndedARun;
  ended.index = static_cast<size_t>(std::distance(open_.begin(), std::next(it).base()));
  open_.erase(std::next(it).base());
  if (open_.empty()) after_loss_ = false;
  return ended;
}

bool PhaseNesting::IsOpen(uint32_t phase_id) const {
  return std::find(open_.begin(), open_.end(), phase_id) != open_.end();
}

void PhaseNesting::Restore(std::vector<uint32_t> open, bool after_loss,
                           absl::flat_hash_map<uint32_t, uint32_t> ignored) {
  open_ = std::move(open);
  after_loss_ = after_loss;
  ignored_ = std::move(ignored);
}

}  // namespace memtrace::collector
