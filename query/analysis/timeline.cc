#include "query/analysis/timeline.h"

#include <algorithm>
#include <map>

namespace memtrace::analysis {

NameTable::NameTable() {
  names_.emplace_back();
  ids_.emplace("", 0);
}

NameId NameTable::Intern(absl::string_view name) {
  auto it = ids_.find(name);
  if (it != ids_.end()) return it->second;
  NameId id = static_cast<NameId>(names_.size());
  names_.emplace_back(name);
  ids_.emplace(std::string(name), id);
  return id;
}

std::optional<NameId> NameTable::Find(absl::string_view name) const {
  auto it = ids_.find(name);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const std::string& NameTable::Name(NameId id) const {
  return id < names_.size() ? names_[id] : names_[0];
}

uint64_t MetricValue(const StepPoint& point, Metric metric) {
  switch (metric) {
    case Metric::kFloor:
      return point.floor_bytes;
    case Metric::kEnd:
      return point.end_bytes;
    case Metric::kPeak:
      return point.peak_bytes;
  }
  return point.floor_bytes;
}

absl::string_view MetricName(Metric metric) {
  switch (metric) {
    case Metric::kFloor:
      return "floor";
    case Metric::kEnd:
      return "end";
    case Metric::kPeak:
      return "peak";
  }
  return "floor";
}

const GroupBytes* FindGroup(const std::vector<GroupBytes>& groups, NameId name) {
  for (const GroupBytes& g : groups) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

std::vector<const RankTimeline*> SelectRanks(const JobTimeline& job,
                                             std::optional<uint32_t> attempt) {
  std::map<uint32_t, const RankTimeline*> chosen;
  for (const RankTimeline& r : job.ranks) {
    if (attempt.has_value() && r.attempt != *attempt) continue;
    auto [it, inserted] = chosen.emplace(r.rank, &r);
    if (!inserted && r.attempt > it->second->attempt) it->second = &r;
  }
  std::vector<const RankTimeline*> out;
  out.reserve(chosen.size());
  for (const auto& [rank, timeline] : chosen) out.push_back(timeline);
  return out;
}

StepGrid BuildStepGrid(const std::vector<const RankTimeline*>& ranks) {
  StepGrid grid;
  // Ranks of one job nearly always share one contiguous range; a merge of sorted lists keeps
  // this linear in the common case.
  for (const RankTimeline* r : ranks) {
    std::vector<int64_t> merged;
    merged.reserve(std::max(grid.steps.size(), r->steps.size()));
    auto a = grid.steps.begin();
    auto b = r->steps.begin();
    while (a != grid.steps.end() || b != r->steps.end()) {
      if (b == r->steps.end() || (a != grid.steps.end() && *a < b->step)) {
        merged.push_back(*a++);
      } else if (a == grid.steps.end() || b->step < *a) {
        merged.push_back((b++)->step);
      } else {
        merged.push_back(*a++);
        ++b;
      }
    }
    grid.steps = std::move(merged);
  }
  grid.index.resize(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::vector<uint32_t>& idx = grid.index[r];
    idx.reserve(ranks[r]->steps.size());
    size_t pos = 0;
    for (const StepPoint& p : ranks[r]->steps) {
      while (grid.steps[pos] < p.step) ++pos;
      idx.push_back(static_cast<uint32_t>(pos));
    }
  }
  return grid;
}

}  // namespace memtrace::analysis
