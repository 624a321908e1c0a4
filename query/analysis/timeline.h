// The plain input every analysis reads: one job's per-rank, per-step memory rollups.
//
// No protobuf, no storage: the collector converts what it stored (see rollup_convert.h) and the
// tests build these by hand or with the simulator in sim/. Names of tags, sources and phases are
// interned once per job in a NameTable, so grouping a 1024-rank job by tag compares integers,
// not strings.
#ifndef MEMTRACE_QUERY_ANALYSIS_TIMELINE_H_
#define MEMTRACE_QUERY_ANALYSIS_TIMELINE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace memtrace::analysis {

inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;

// Index into a job's NameTable. 0 is the empty name ("no tag").
using NameId = uint32_t;

// Job-wide interned strings. A plain value; not thread-safe for writers.
class NameTable {
 public:
  NameTable();
  // Returns the id of `name`, adding it when new. Intern("") is 0.
  NameId Intern(absl::string_view name);
  // The id of `name` if it was interned.
  std::optional<NameId> Find(absl::string_view name) const;
  // The name of `id`; the empty string for 0 or an id this table never handed out.
  const std::string& Name(NameId id) const;
  size_t size() const { return names_.size(); }

 private:
  std::vector<std::string> names_;
  absl::flat_hash_map<std::string, NameId> ids_;
};

// Bytes attributed to one tag, source or phase within one step.
// by_tag / by_source: live_bytes at step end, peak_bytes = the most this group held in the step.
// by_phase: peak_bytes = peak live bytes (all groups) while the phase was open, live_bytes =
// live bytes when it closed.
struct GroupBytes {
  NameId name = 0;
  uint64_t live_bytes = 0;
  uint64_t peak_bytes = 0;
};

// One rank's memory over one step (or one time bucket when the job has no step markers).
struct StepPoint {
  int64_t step = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  // Live bytes when the step began, its minimum within the step, maximum, and when it ended.
  uint64_t start_bytes = 0;
  uint64_t floor_bytes = 0;
  uint64_t peak_bytes = 0;
  uint64_t end_bytes = 0;
  uint64_t allocs = 0;
  uint64_t frees = 0;
  uint64_t alloc_bytes = 0;
  uint64_t free_bytes = 0;
  std::vector<GroupBytes> by_tag;
  std::vector<GroupBytes> by_source;
  std::vector<GroupBytes> by_phase;
  // From the agent's periodic device samples; 0 when the rank sent none.
  uint64_t device_used_max = 0;
  uint64_t device_total = 0;
  uint64_t ooms = 0;
  uint64_t oom_requested_bytes = 0;
  uint64_t events_lost = 0;
};

// One rank (one attempt) of a job. `steps` ascend by step number, each step at most once.
struct RankTimeline {
  uint32_t rank = 0;
  uint32_t attempt = 0;
  std::string host;
  int32_t device_index = -1;
  // How the rank got its device memory, from the bytes by memory kind in its rollups:
  // "segments" (cudaMalloc: PyTorch's caching allocator), "pool" (cudaMallocAsync), "vmm"
  // (cuMemMap: expandable segments), a '+'-joined mix, or "" when unknown.
  std::string allocator;
  std::vector<StepPoint> steps;
};

struct JobTimeline {
  std::string job_id;
  // True when `step` is a time-bucket index (the job had no step markers).
  bool time_axis = false;
  int64_t bucket_ns = 0;
  NameTable names;
  std::vector<RankTimeline> ranks;
};

// Which per-step number stands for "the rank's memory" in cross-rank comparisons.
enum class Metric {
  // Minimum live bytes within the step: what the rank retains once transient activations are
  // gone. A leak raises it by the leaked bytes; a spike does not touch it. The default.
  kFloor,
  // Live bytes at the step boundary.
  kEnd,
  // Maximum live bytes within the step.
  kPeak,
};

uint64_t MetricValue(const StepPoint& point, Metric metric);
absl::string_view MetricName(Metric metric);

// The bytes of group `name` in `groups` (a by_tag / by_source / by_phase list); nullptr if absent.
const GroupBytes* FindGroup(const std::vector<GroupBytes>& groups, NameId name);

// The timelines an analysis compares: one per rank number, ordered by rank. With `attempt` set,
// only that attempt; otherwise each rank's highest attempt (the run that is, or was, current).
std::vector<const RankTimeline*> SelectRanks(const JobTimeline& job,
                                             std::optional<uint32_t> attempt = std::nullopt);

// The sorted union of step numbers over `ranks`, and where each rank's points sit in it, so
// cross-rank statistics run per step without searching.
struct StepGrid {
  std::vector<int64_t> steps;
  // index[r][i] = position of ranks[r]->steps[i] in `steps`.
  std::vector<std::vector<uint32_t>> index;
};
StepGrid BuildStepGrid(const std::vector<const RankTimeline*>& ranks);

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_TIMELINE_H_
