#include "query/analysis/timeline.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

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

StepGroups::StepGroups(absl::Span<const GroupBytes> tags, absl::Span<const GroupBytes> sources,
                       absl::Span<const GroupBytes> phases) {
  const size_t n = tags.size() + sources.size() + phases.size();
  if (n == 0) return;
  block_.reset(new char[sizeof(Header) + n * sizeof(GroupBytes)]);
  Header header;
  header.end[0] = static_cast<uint32_t>(tags.size());
  header.end[1] = header.end[0] + static_cast<uint32_t>(sources.size());
  header.end[2] = header.end[1] + static_cast<uint32_t>(phases.size());
  std::memcpy(block_.get(), &header, sizeof(Header));
  GroupBytes* out = Entries();
  out = std::uninitialized_copy(tags.begin(), tags.end(), out);
  out = std::uninitialized_copy(sources.begin(), sources.end(), out);
  std::uninitialized_copy(phases.begin(), phases.end(), out);
}

StepGroups::StepGroups(const StepGroups& other)
    : StepGroups(other.tags(), other.sources(), other.phases()) {}

StepGroups& StepGroups::operator=(const StepGroups& other) {
  if (this != &other) *this = StepGroups(other);
  return *this;
}

GroupBytes* StepGroups::Entries() const {
  // new char[] is aligned for any fundamental type, and Header is as aligned as GroupBytes.
  static_assert(sizeof(Header) % alignof(GroupBytes) == 0);
  return reinterpret_cast<GroupBytes*>(block_.get() + sizeof(Header));
}

absl::Span<const GroupBytes> StepGroups::List(int which) const {
  if (block_ == nullptr) return {};
  Header header;
  std::memcpy(&header, block_.get(), sizeof(Header));
  const uint32_t begin = which == 0 ? 0 : header.end[which - 1];
  return absl::Span<const GroupBytes>(Entries() + begin, header.end[which] - begin);
}

absl::Span<GroupBytes> StepGroups::MutableList(int which) {
  absl::Span<const GroupBytes> list = List(which);
  return absl::Span<GroupBytes>(const_cast<GroupBytes*>(list.data()), list.size());
}

const GroupBytes* FindGroup(absl::Span<const GroupBytes> groups, NameId name) {
  for (const GroupBytes& g : groups) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

bool HasStepMarkers(const JobTimeline& job) {
  return internal::HasStepMarkersOf(
      job.ranks, [](const RankTimeline& r) { return r.row_count(); },
      [](const RankTimeline& r) { return r.row(0).step; });
}

std::vector<const RankTimeline*> SelectRanks(const JobTimeline& job,
                                             std::optional<uint32_t> attempt) {
  return internal::SelectLatestAttempts(job.ranks, attempt);
}

StepGrid BuildStepGrid(const std::vector<const RankTimeline*>& ranks) {
  return internal::BuildStepGridOf(
      ranks, [](const RankTimeline& r) { return r.steps.size(); },
      [](const RankTimeline& r, size_t i) { return r.steps[i].step; });
}

bool EndedWithinItsLastStep(absl::Span<const int64_t> starts, int64_t last_end_ns) {
  constexpr size_t kMinSteps = 3, kMaxSteps = 64;
  if (starts.size() < kMinSteps + 1) return false;
  const size_t last = starts.size() - 1;
  // An end before its row's start is no end known (a row of hand-built input without one).
  if (last_end_ns < starts[last]) return false;
  const size_t first = last > kMaxSteps ? last - kMaxSteps : 0;
  // Differences in 128 bits: times near the int64 bounds (saturated sums) do not overflow.
  std::vector<__int128> lengths;
  lengths.reserve(last - first);
  for (size_t i = first; i < last; ++i) {
    lengths.push_back(static_cast<__int128>(starts[i + 1]) - starts[i]);
  }
  std::nth_element(lengths.begin(), lengths.begin() + lengths.size() / 2, lengths.end());
  const __int128 median = lengths[lengths.size() / 2];
  if (median <= 0) return false;
  const __int128 ran = static_cast<__int128>(last_end_ns) - starts[last];
  return 2 * ran < median;
}

}  // namespace memtrace::analysis
