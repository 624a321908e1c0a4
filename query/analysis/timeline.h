// The plain input every analysis reads: one job's per-rank, per-step memory rollups.
//
// No protobuf, no storage: the collector converts what it stored (see rollup_convert.h) and the
// tests build these by hand or with the simulator in sim/. Names of tags, sources and phases are
// interned once per job in a NameTable, so grouping a 1024-rank job by tag compares integers,
// not strings.
#ifndef MEMTRACE_QUERY_ANALYSIS_TIMELINE_H_
#define MEMTRACE_QUERY_ANALYSIS_TIMELINE_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

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
// live bytes at its last close within the step (`closed`; it may have opened again, `open`), or
// at the step's end when it did not close in it. Rows written before `closed` was kept: closed
// is !open.
struct GroupBytes {
  NameId name = 0;
  // by_phase only; in the name's padding (a point's lists stay 24 B each).
  bool open = false;
  bool closed = false;
  uint64_t live_bytes = 0;
  uint64_t peak_bytes = 0;
};

// The by_tag / by_source / by_phase lists of one step in one heap block (none when all three
// are empty), so that a step point carries one pointer for them instead of three vectors
// (144 bytes a point instead of 200). A 1024-rank job holds 200 k points, the scalar loads
// (headroom, growth by rank) have no lists at all, and the first touch of the points' memory
// is much of a cold query's time (docs/PERFORMANCE.md). A value type.
class StepGroups {
 public:
  StepGroups() = default;
  StepGroups(absl::Span<const GroupBytes> tags, absl::Span<const GroupBytes> sources,
             absl::Span<const GroupBytes> phases);
  StepGroups(const StepGroups& other);
  StepGroups& operator=(const StepGroups& other);
  StepGroups(StepGroups&&) noexcept = default;
  StepGroups& operator=(StepGroups&&) noexcept = default;

  absl::Span<const GroupBytes> tags() const { return List(0); }
  absl::Span<const GroupBytes> sources() const { return List(1); }
  absl::Span<const GroupBytes> phases() const { return List(2); }
  // The same lists, writable in place (their lengths are fixed).
  absl::Span<GroupBytes> mutable_tags() { return MutableList(0); }
  absl::Span<GroupBytes> mutable_sources() { return MutableList(1); }
  absl::Span<GroupBytes> mutable_phases() { return MutableList(2); }

 private:
  // The block: a Header, then tags, sources and phases back to back.
  struct alignas(GroupBytes) Header {
    uint32_t end[3];  // one past each list's last entry, counted from the first tag
  };
  absl::Span<const GroupBytes> List(int which) const;
  absl::Span<GroupBytes> MutableList(int which);
  GroupBytes* Entries() const;

  std::unique_ptr<char[]> block_;
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
  // When live bytes first reached peak_bytes; 0 in rows written before it was recorded.
  int64_t peak_ns = 0;
  uint64_t peak_seq = 0;  // the event after which they stood there (the live set to read)
  uint64_t allocs = 0;
  uint64_t frees = 0;
  uint64_t alloc_bytes = 0;
  uint64_t free_bytes = 0;
  StepGroups groups;
  absl::Span<const GroupBytes> by_tag() const { return groups.tags(); }
  absl::Span<const GroupBytes> by_source() const { return groups.sources(); }
  absl::Span<const GroupBytes> by_phase() const { return groups.phases(); }
  // From the agent's periodic device samples; 0 when the rank sent none. live_at_device_used_max:
  // the live bytes when the highest sample was taken (0 in rows from before it was recorded).
  uint64_t device_used_max = 0;
  uint64_t live_at_device_used_max = 0;
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
  // (cuMemMap: expandable segments), a '+'-joined mix, or "" when unknown; "blocks" for a
  // rank imported from a profiler trace (memtrace import), whose events are the caching
  // allocator's blocks, not its segments.
  std::string allocator;
  std::vector<StepPoint> steps;
  // The row the rank's stream is still filling (its agent is connected: RankRollups'
  // last_row_in_progress), after `steps` and not among them. Its floor is the lowest so far and
  // its peak the highest so far: read as a step, the last 1 s bucket of a live job without step
  // markers, a few ms old, put a leaking rank 1.25 GiB under its cohort where it stood about
  // 5 GiB over (query/analysis/README.md). The analyses compare ranks over `steps`; what this
  // row holds that is not partial still counts (a peak reached, an OOM, the step begun).
  std::optional<StepPoint> in_progress;
  // The row in_progress holds is not one still being filled but the last of a stream that ended
  // within it (EndedWithinItsLastStep): its end is where the stream stopped (the process killed
  // with the job, its own OOM, or a run that ended on a step marker), not a step's end, and its
  // floor and peak are partial. The analyses read it as a row in progress; reports say "cut
  // short".
  bool cut_short = false;

  // Its rows with the one in progress last, for what counts that row too (a step begun, a peak
  // reached, an OOM): how many, and the i-th.
  size_t row_count() const { return steps.size() + (in_progress.has_value() ? 1 : 0); }
  const StepPoint& row(size_t i) const { return i < steps.size() ? steps[i] : *in_progress; }
  // Its first row with an OOM event, the row in progress or cut short counted (an OOM is an
  // event, not a partial number, and often the event that cut its step short); nullptr if none.
  const StepPoint* FirstOomRow() const {
    for (size_t i = 0; i < row_count(); ++i) {
      if (row(i).ooms > 0) return &row(i);
    }
    return nullptr;
  }
  // Takes the last step out of `steps` into in_progress (the rank has one).
  void MoveLastToInProgress() {
    in_progress = std::move(steps.back());
    steps.pop_back();
  }
};

struct JobTimeline {
  std::string job_id;
  // True when `step` is a time-bucket index (the job had no step markers).
  bool time_axis = false;
  int64_t bucket_ns = 0;
  NameTable names;
  std::vector<RankTimeline> ranks;
};

// Whether an ended stream stopped well inside its last step: less than half the median length of
// its steps before (at least 3 of them; the latest 64) after that step began. `starts`: its
// rows' start times, the last row's last; `last_end_ns`: that row's end (its last event). A
// job that an OOM ended stops every rank mid-step: read as a step's end, each healthy rank's
// "end" jumped by its activations (14.5 -> 34.7 GiB 27 ms into step 60), and every line of a
// plot rose at once. A step that ran most of its usual length is taken as whole.
bool EndedWithinItsLastStep(absl::Span<const int64_t> starts, int64_t last_end_ns);

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
const GroupBytes* FindGroup(absl::Span<const GroupBytes> groups, NameId name);

// The timelines an analysis compares: one per rank number, ordered by rank. With `attempt` set,
// only that attempt; otherwise each rank's highest attempt (the run that is, or was, current).
std::vector<const RankTimeline*> SelectRanks(const JobTimeline& job,
                                             std::optional<uint32_t> attempt = std::nullopt);

// Whether a job read on the step axis has step markers: some rank has more than one row, or a
// row other than step 0 (a one-step trace), its row in progress counted. A job recorded without
// them has one step-0 row per rank spanning the whole run, and the analyses, timeline and plot
// compare its time buckets instead.
bool HasStepMarkers(const JobTimeline& job);

// The sorted union of step numbers over `ranks`, and where each rank's points sit in it, so
// cross-rank statistics run per step without searching.
struct StepGrid {
  std::vector<int64_t> steps;
  // index[r][i] = position of ranks[r]->steps[i] in `steps`.
  std::vector<std::vector<uint32_t>> index;
};
StepGrid BuildStepGrid(const std::vector<const RankTimeline*>& ranks);

namespace internal {

// The rule of HasStepMarkers for any form of a job's ranks (here, step_metrics.h, and the wire
// forms the CLI reads): some rank has more than one row, or one row other than the implicit
// step 0. `rows(rank)` counts a rank's rows, `first_key(rank)` is its first row's step.
template <typename Ranks, typename Rows, typename FirstKey>
bool HasStepMarkersOf(const Ranks& ranks, Rows rows, FirstKey first_key) {
  for (const auto& rank : ranks) {
    const size_t n = static_cast<size_t>(rows(rank));
    if (n > 1 || (n == 1 && first_key(rank) != 0)) return true;
  }
  return false;
}

// SelectRanks for any per-rank type with `rank` and `attempt` (here and in step_metrics.h).
template <typename Rank>
std::vector<const Rank*> SelectLatestAttempts(const std::vector<Rank>& ranks,
                                              std::optional<uint32_t> attempt) {
  std::map<uint32_t, const Rank*> chosen;
  for (const Rank& r : ranks) {
    if (attempt.has_value() && r.attempt != *attempt) continue;
    auto [it, inserted] = chosen.emplace(r.rank, &r);
    if (!inserted && r.attempt > it->second->attempt) it->second = &r;
  }
  std::vector<const Rank*> out;
  out.reserve(chosen.size());
  for (const auto& [rank, chosen_rank] : chosen) out.push_back(chosen_rank);
  return out;
}

// BuildStepGrid for any per-rank type: count(rank) steps, step_at(rank, i) the i-th (ascending).
template <typename Rank, typename Count, typename StepAt>
StepGrid BuildStepGridOf(const std::vector<const Rank*>& ranks, Count count, StepAt step_at) {
  StepGrid grid;
  // Ranks of one job nearly always share one contiguous range; a merge of sorted lists keeps
  // this linear in the common case.
  std::vector<int64_t> merged;
  for (const Rank* r : ranks) {
    const size_t n = count(*r);
    merged.clear();
    merged.reserve(std::max(grid.steps.size(), n));
    size_t a = 0, b = 0;
    while (a < grid.steps.size() || b < n) {
      if (b == n || (a < grid.steps.size() && grid.steps[a] < step_at(*r, b))) {
        merged.push_back(grid.steps[a++]);
      } else if (a == grid.steps.size() || step_at(*r, b) < grid.steps[a]) {
        merged.push_back(step_at(*r, b++));
      } else {
        merged.push_back(grid.steps[a++]);
        ++b;
      }
    }
    grid.steps.swap(merged);
  }
  grid.index.resize(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::vector<uint32_t>& idx = grid.index[r];
    const size_t n = count(*ranks[r]);
    idx.reserve(n);
    size_t pos = 0;
    for (size_t i = 0; i < n; ++i) {
      while (grid.steps[pos] < step_at(*ranks[r], i)) ++pos;
      idx.push_back(static_cast<uint32_t>(pos));
    }
  }
  return grid;
}

}  // namespace internal
}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_TIMELINE_H_
