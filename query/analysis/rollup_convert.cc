#include "query/analysis/rollup_convert.h"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace memtrace::analysis {
namespace {

// memtrace.v1.MemoryKind values.
constexpr uint32_t kPageable = 1;
constexpr uint32_t kPinned = 2;
constexpr uint32_t kPool = 100;
constexpr uint32_t kVmm = 101;

bool IsHost(uint32_t kind) { return kind == kPageable || kind == kPinned; }

// One rank's string table: wire id -> job-wide name id.
class Resolver {
 public:
  Resolver(const google::protobuf::RepeatedPtrField<v1::StringEntry>& strings, NameTable& names)
      : names_(names) {
    for (const v1::StringEntry& e : strings) ids_[e.id()] = names_.Intern(e.value());
  }
  NameId operator()(uint32_t id, absl::string_view kind) {
    if (id == 0) return 0;
    auto it = ids_.find(id);
    if (it != ids_.end()) return it->second;
    NameId name = names_.Intern(absl::StrCat(kind, "#", id));
    ids_[id] = name;
    return name;
  }

 private:
  NameTable& names_;
  absl::flat_hash_map<uint32_t, NameId> ids_;
};

std::vector<GroupBytes> Groups(const google::protobuf::RepeatedPtrField<v1::GroupBytes>& wire,
                               Resolver& resolve, absl::string_view kind) {
  std::vector<GroupBytes> out;
  out.reserve(wire.size());
  for (const v1::GroupBytes& g : wire) {
    out.push_back({resolve(g.id(), kind), g.live_bytes(), g.peak_bytes()});
  }
  return out;
}

std::string AllocatorPath(const v1::RankRollups& rank) {
  // Every device kind that ever held memory (host kinds say nothing about the device allocator).
  std::set<std::string> paths;
  for (const v1::StepRollup& s : rank.steps()) {
    for (const v1::GroupBytes& k : s.by_memory_kind()) {
      if (k.peak_bytes() == 0 && k.live_bytes() == 0) continue;
      if (k.id() == kPool) {
        paths.insert("pool");
      } else if (k.id() == kVmm) {
        paths.insert("vmm");
      } else if (!IsHost(k.id())) {
        paths.insert("segments");
      }
    }
  }
  return absl::StrJoin(paths, "+");
}

}  // namespace

absl::StatusOr<JobTimeline> TimelineFromRollups(absl::string_view job_id,
                                                const v1::GetRollupsResponse& rollups,
                                                v1::TimelineAxis axis) {
  JobTimeline job;
  job.job_id = std::string(job_id);
  job.time_axis = axis == v1::TIMELINE_AXIS_TIME;
  job.bucket_ns = rollups.bucket_ns();
  std::set<std::pair<uint32_t, uint32_t>> seen;
  for (const v1::RankRollups& wire : rollups.ranks()) {
    if (!seen.emplace(wire.rank(), wire.attempt()).second) {
      return absl::InvalidArgumentError(absl::StrCat("job '", job_id, "': rank ", wire.rank(),
                                                     " attempt ", wire.attempt(),
                                                     " appears twice in the rollups"));
    }
    RankTimeline rank;
    rank.rank = wire.rank();
    rank.attempt = wire.attempt();
    rank.host = wire.identity().host();
    rank.device_index = wire.has_identity() ? wire.identity().device_index() : -1;
    rank.allocator = AllocatorPath(wire);
    Resolver resolve(wire.strings(), job.names);
    rank.steps.reserve(wire.steps_size());
    for (const v1::StepRollup& s : wire.steps()) {
      StepPoint p;
      p.step = s.step();
      p.start_ns = s.start_ns();
      p.end_ns = s.end_ns();
      p.start_bytes = s.start_bytes();
      p.floor_bytes = s.floor_bytes();
      p.peak_bytes = s.peak_bytes();
      p.end_bytes = s.end_bytes();
      p.allocs = s.allocs();
      p.frees = s.frees();
      p.alloc_bytes = s.alloc_bytes();
      p.free_bytes = s.free_bytes();
      p.by_tag = Groups(s.by_tag(), resolve, "tag");
      p.by_source = Groups(s.by_source(), resolve, "source");
      p.by_phase = Groups(s.by_phase(), resolve, "phase");
      p.device_used_max = s.device_used_max();
      p.device_total = s.device_total();
      p.ooms = s.ooms();
      p.oom_requested_bytes = s.oom_requested_bytes();
      p.events_lost = s.events_lost();
      rank.steps.push_back(std::move(p));
    }
    std::stable_sort(rank.steps.begin(), rank.steps.end(),
                     [](const StepPoint& a, const StepPoint& b) { return a.step < b.step; });
    for (size_t i = 1; i < rank.steps.size(); ++i) {
      if (rank.steps[i].step == rank.steps[i - 1].step) {
        return absl::InvalidArgumentError(absl::StrCat("job '", job_id, "': rank ", rank.rank,
                                                       " attempt ", rank.attempt, " has step ",
                                                       rank.steps[i].step, " twice"));
      }
    }
    job.ranks.push_back(std::move(rank));
  }
  return job;
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
    if (!include_host && IsHost(a.memory_kind())) continue;
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
