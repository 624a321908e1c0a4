#include "query/analysis/rollup_convert.h"

#include <algorithm>
#include <set>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/codec/event.h"

namespace memtrace::analysis {
namespace {

// Bits of TimelineBuilder::allocator_paths_, in the order RankTimeline::allocator lists them.
constexpr uint32_t kPathPool = 1, kPathSegments = 2, kPathVmm = 4;

}  // namespace

void TimelineBuilder::BeginRank(const v1::RankRollups& header) {
  // Ranks of a job have about as many rows as each other: start with room for the last one's.
  const size_t expect = job_.ranks.empty() ? 0 : job_.ranks.back().steps.size();
  rank_ = RankTimeline();
  rank_.steps.reserve(expect);
  rank_.rank = header.rank();
  rank_.attempt = header.attempt();
  rank_.host = header.identity().host();
  rank_.device_index = header.has_identity() ? header.identity().device_index() : -1;
  imported_ = header.identity().launcher() == "kineto-import";
  ids_.clear();
  for (const v1::StringEntry& e : header.strings()) ids_[e.id()] = job_.names.Intern(e.value());
  allocator_paths_ = 0;
}

void TimelineBuilder::AddRow(const v1::StepRollup& s) {
  const auto resolve = [&](uint32_t id, absl::string_view kind) -> NameId {
    if (id == 0) return 0;
    auto it = ids_.find(id);
    if (it != ids_.end()) return it->second;
    const NameId name = job_.names.Intern(absl::StrCat(kind, "#", id));
    ids_[id] = name;
    return name;
  };
  const auto groups = [&](const google::protobuf::RepeatedPtrField<v1::GroupBytes>& wire,
                          absl::string_view kind, std::vector<GroupBytes>* out) {
    out->clear();
    for (const v1::GroupBytes& g : wire) {
      GroupBytes& b = out->emplace_back();
      b.name = resolve(g.id(), kind);
      b.open = g.open();
      // Rows from before `closed`: a phase not open at the row's end closed in it.
      b.closed = g.closed() || (kind == "phase" && !g.open());
      b.live_bytes = g.live_bytes();
      b.peak_bytes = g.peak_bytes();
    }
  };
  StepPoint& p = rank_.steps.emplace_back();
  p.step = s.step();
  p.start_ns = s.start_ns();
  p.end_ns = s.end_ns();
  p.start_bytes = s.start_bytes();
  p.floor_bytes = s.floor_bytes();
  p.peak_bytes = s.peak_bytes();
  p.end_bytes = s.end_bytes();
  p.peak_ns = s.peak_ns();
  p.peak_seq = s.peak_seq();
  p.allocs = s.allocs();
  p.frees = s.frees();
  p.alloc_bytes = s.alloc_bytes();
  p.free_bytes = s.free_bytes();
  groups(s.by_tag(), "tag", &tags_);
  groups(s.by_source(), "source", &sources_);
  groups(s.by_phase(), "phase", &phases_);
  p.groups = StepGroups(tags_, sources_, phases_);
  p.device_used_max = s.device_used_max();
  p.live_at_device_used_max = s.live_at_device_used_max();
  p.device_total = s.device_total();
  p.ooms = s.ooms();
  p.oom_requested_bytes = s.oom_requested_bytes();
  p.events_lost = s.events_lost();
  // Every device kind that ever held memory (host kinds say nothing about the device allocator).
  for (const v1::GroupBytes& k : s.by_memory_kind()) {
    if (k.peak_bytes() == 0 && k.live_bytes() == 0) continue;
    if (k.id() == kMemoryPool) {
      allocator_paths_ |= kPathPool;
    } else if (k.id() == kMemoryVmm) {
      allocator_paths_ |= kPathVmm;
    } else if (!LeftOutOfLiveBytes(k.id())) {
      allocator_paths_ |= kPathSegments;
    }
  }
}

absl::Status TimelineBuilder::FinishRank() {
  std::vector<std::string> paths;
  if (allocator_paths_ & kPathPool) paths.push_back("pool");
  // A profiler's [memory] events are the caching allocator's blocks (tensors), not the
  // segments under them that the agent sees.
  if (allocator_paths_ & kPathSegments) paths.push_back(imported_ ? "blocks" : "segments");
  if (allocator_paths_ & kPathVmm) paths.push_back("vmm");
  rank_.allocator = absl::StrJoin(paths, "+");
  // Rows come in key order, which is step order: the sort is for hand-built input.
  if (!std::is_sorted(rank_.steps.begin(), rank_.steps.end(),
                      [](const StepPoint& a, const StepPoint& b) { return a.step < b.step; })) {
    std::stable_sort(rank_.steps.begin(), rank_.steps.end(),
                     [](const StepPoint& a, const StepPoint& b) { return a.step < b.step; });
  }
  for (size_t i = 1; i < rank_.steps.size(); ++i) {
    if (rank_.steps[i].step == rank_.steps[i - 1].step) {
      return StepTwice(job_.job_id, rank_.rank, rank_.attempt, rank_.steps[i].step);
    }
  }
  if (last_in_progress_ && !rank_.steps.empty()) {
    rank_.MoveLastToInProgress();
  } else if (!job_.time_axis && !rank_.steps.empty()) {
    std::vector<int64_t> starts;
    starts.reserve(rank_.steps.size());
    for (const StepPoint& p : rank_.steps) starts.push_back(p.start_ns);
    if (EndedWithinItsLastStep(starts, rank_.steps.back().end_ns)) {
      rank_.MoveLastToInProgress();
      rank_.cut_short = true;
    }
  }
  job_.ranks.push_back(std::move(rank_));
  return absl::OkStatus();
}

void StepMetricsBuilder::BeginRank(const v1::RankRollups& header) {
  last_step_ = last_end_ns_ = INT64_MIN;
  const size_t expect = job_.ranks.empty() ? 0 : job_.ranks.back().size();
  RankStepMetrics& r = job_.ranks.emplace_back();
  r.rank = header.rank();
  r.attempt = header.attempt();
  r.host = header.identity().host();
  for (std::vector<int64_t>* column : {&r.step, &r.start_ns}) column->reserve(expect);
  for (std::vector<uint64_t>* column : {&r.floor_bytes, &r.end_bytes, &r.peak_bytes}) {
    column->reserve(expect);
  }
}

void StepMetricsBuilder::AddRow(const v1::StepRollup& s) {
  RankStepMetrics& r = job_.ranks.back();
  r.step.push_back(s.step());
  r.start_ns.push_back(s.start_ns());
  r.floor_bytes.push_back(s.floor_bytes());
  r.end_bytes.push_back(s.end_bytes());
  r.peak_bytes.push_back(s.peak_bytes());
  // The end of the row with the greatest step, which the sort below puts last (the largest end
  // of all was another row's when the rank's clock went back across a step marker).
  if (r.step.size() == 1 || s.step() > last_step_) {
    last_step_ = s.step();
    last_end_ns_ = s.end_ns();
  }
}

absl::Status StepMetricsBuilder::FinishRank() {
  RankStepMetrics& r = job_.ranks.back();
  // Rows come in key order, which is step order: the sort is for hand-built input.
  if (!std::is_sorted(r.step.begin(), r.step.end())) {
    std::vector<size_t> order(r.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return r.step[a] < r.step[b]; });
    const auto permute = [&](auto& column) {
      std::remove_reference_t<decltype(column)> sorted;
      sorted.reserve(column.size());
      for (size_t i : order) sorted.push_back(column[i]);
      column.swap(sorted);
    };
    permute(r.step);
    permute(r.start_ns);
    permute(r.floor_bytes);
    permute(r.end_bytes);
    permute(r.peak_bytes);
  }
  for (size_t i = 1; i < r.size(); ++i) {
    if (r.step[i] == r.step[i - 1]) return StepTwice(job_.job_id, r.rank, r.attempt, r.step[i]);
  }
  if (last_in_progress_ && r.size() > 0) {
    r.MoveLastToInProgress();
  } else if (!job_.time_axis && r.size() > 0 && EndedWithinItsLastStep(r.start_ns, last_end_ns_)) {
    r.MoveLastToInProgress();  // as TimelineBuilder::FinishRank
    r.cut_short = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<JobTimeline> TimelineFromRollups(absl::string_view job_id,
                                                const v1::GetRollupsResponse& rollups,
                                                v1::TimelineAxis axis) {
  TimelineBuilder builder(job_id, axis, rollups.bucket_ns());
  for (const v1::RankRollups& rank : rollups.ranks()) {
    if (absl::Status s = builder.StartRank(rank); !s.ok()) return s;
    for (const v1::StepRollup& row : rank.steps()) builder.AddRow(row);
  }
  return std::move(builder).Finish();
}

RankLiveSet LiveSetFromProto(const v1::LiveAtResponse& live, bool include_host) {
  RankLiveSet set;
  set.rank = live.rank();
  set.attempt = live.attempt();
  set.at_step = live.step();
  set.at_ns = live.ts_ns();
  absl::flat_hash_map<uint32_t, const std::string*> strings;
  for (const v1::StringEntry& e : live.strings()) strings[e.id()] = &e.value();
  auto name = [&](uint32_t id, absl::string_view kind) -> std::string {
    if (id == 0) return "";
    auto it = strings.find(id);
    return it != strings.end() ? *it->second : absl::StrCat(kind, "#", id);
  };
  set.allocations.reserve(live.allocations_size());
  for (const v1::LiveAllocation& a : live.allocations()) {
    if (!include_host && LeftOutOfLiveBytes(a.memory_kind())) continue;
    LiveAllocation out;
    out.tag = name(a.tag_id(), "tag");
    out.source = name(a.source_id(), "source");
    out.step_allocated = a.step();
    out.ts_ns = a.ts_ns();
    out.address = a.address();
    out.bytes = a.bytes();
    set.allocations.push_back(std::move(out));
  }
  return set;
}

}  // namespace memtrace::analysis
