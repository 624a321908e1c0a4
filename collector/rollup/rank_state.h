// What the collector knows about one stream (job, rank, attempt) after applying its events in
// order: the live set, live bytes by tag / source / memory kind, and the two open rollups (the
// current step and the current time bucket). Pure: no storage, no RPC; the store persists what
// Apply() emits and checkpoints the whole state with Serialize().
//
// Live bytes count device memory only: ALLOC events of host kinds (PAGEABLE, PINNED) are kept in
// the live set and in by_memory_kind but not in live/floor/peak or by_tag/by_source. VMM_MAP
// mappings count as live device memory; memory-pool reservations (POOL_*) are tracked apart.
// Not thread-safe: one owner applies events.
#ifndef MEMTRACE_COLLECTOR_ROLLUP_RANK_STATE_H_
#define MEMTRACE_COLLECTOR_ROLLUP_RANK_STATE_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "collector/rollup/id_table.h"
#include "collector/rollup/phase_nesting.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "proto/codec/event.h"
#include "proto/memtrace/v1/query.pb.h"

namespace memtrace::collector {

// The checkpoint's records (rank_state.proto).
class AccumulatorRecord;
class GroupRecord;
class RankStateRecord;

// One live allocation or VMM mapping, keyed by address in the live set.
struct LiveAllocation {
  uint64_t bytes = 0;
  uint64_t seq = 0;  // the event that made it
  int64_t ts_ns = 0;
  int64_t step = 0;  // the step it was made in
  uint32_t tag_id = 0;
  uint32_t source_id = 0;
  uint32_t memory_kind = 0;
  // The innermost NVTX phase open when it was made (its string id; 0 = none), so that `live`
  // names an allocation's phase without replaying the stream's markers from its start.
  uint32_t phase_id = 0;
};

// Events that do not fit the model; counted, never an error (agents lose events, CUPTI
// reorders).
struct RankAnomalies {
  uint64_t free_unknown = 0;
  uint64_t alloc_over_live = 0;
  uint64_t unmap_unknown = 0;
  uint64_t time_backwards = 0;
  uint64_t step_backwards = 0;
  uint64_t phase_unmatched = 0;
  uint64_t phase_too_deep = 0;
  uint64_t time_future = 0;

  uint64_t total() const {
    return free_unknown + alloc_over_live + unmap_unknown + time_backwards + step_backwards +
           phase_unmatched + phase_too_deep + time_future;
  }
  void ToProto(v1::AnomalyCounts* out) const;
  static RankAnomalies FromProto(const v1::AnomalyCounts& counts);
};

// The rollups that events closed: a step ends at the next STEP marker, a time bucket when an
// event falls into a later bucket. Each is final; the store writes it once. Repeated fields
// rather than vectors: Clear() keeps the messages (and their groups) for the next batch, so a
// reused ClosedRollups allocates nothing once warm (the ingest profile's malloc and free of
// rows, docs/profiles/ingest-memtable.txt).
struct ClosedRollups {
  google::protobuf::RepeatedPtrField<v1::StepRollup> steps;
  google::protobuf::RepeatedPtrField<v1::StepRollup> buckets;
  // Open step rows that were given up without closing (the importer's seeds before the first
  // marker, at its very instant, are no step of their own): an earlier batch may have stored
  // them as the open row, which the store must delete.
  std::vector<int64_t> abandoned_steps;

  void Clear() {
    steps.Clear();
    buckets.Clear();
    abandoned_steps.clear();
  }
};

class RankState {
 public:
  // Phases open at once; a PHASE_BEGIN beyond it is ignored and counted
  // (RankAnomalies::phase_too_deep), and so is the PHASE_END that ends it (phase_unmatched).
  static constexpr size_t kMaxOpenPhases = PhaseNesting::kMaxOpen;

  // `bucket_ns` > 0 is the width of a time bucket: bucket index = floor(ts / bucket_ns).
  explicit RankState(int64_t bucket_ns);

  // Applies events in sequence order, appending any rollups they close to `closed` (which may
  // be null when the caller only wants the state, e.g. a replay).
  void Apply(absl::Span<const Event> events, ClosedRollups* closed);
  void Apply(const Event& event, ClosedRollups* closed);

  // Snapshots of the open step / time-bucket rollup, as they would be written if closed now.
  // Only meaningful when events_applied() > 0.
  v1::StepRollup OpenStepRollup() const;
  v1::StepRollup OpenBucketRollup() const;

  // Time buckets are keyed by collector time: an event at ts_ns counts in bucket
  // floor((ts_ns + offset_ns) / bucket_ns), so that ranks on hosts whose clocks differ share
  // buckets. Rows' start_ns / end_ns on the time axis are collector time too; events, steps and
  // everything else keep the rank's own clock. 0 until set; may change between events (a later
  // estimate): an event whose shifted time falls before the open bucket counts in the open one.
  void SetClockOffset(int64_t offset_ns) { clock_offset_ns_ = offset_ns; }
  int64_t clock_offset_ns() const { return clock_offset_ns_; }

  // The latest timestamp (rank clock) taken as a time; none (kNoTimeHorizon) until set. An
  // event stamped past it is a clock gone wrong, not a moment: it is counted
  // (RankAnomalies::time_future) and applied as if at the time of the event before it (the
  // horizon when it is the first), so that it moves no rollup, no bucket and no checkpoint
  // time there. The store sets the collector's receive time plus a margin for each batch and
  // keeps it in the batch's block, so a replay holds the same events. Not checkpointed.
  void SetTimeHorizon(int64_t horizon_ns) { time_horizon_ns_ = horizon_ns; }
  int64_t time_horizon_ns() const { return time_horizon_ns_; }

  int64_t bucket_ns() const { return bucket_ns_; }
  uint64_t live_bytes() const { return live_bytes_; }
  int64_t current_step() const { return current_step_; }
  // Whether any step marker has been seen; without one, current_step() is 0 and means nothing.
  bool has_step_marker() const { return has_step_marker_; }
  // The time-bucket index of the open bucket.
  int64_t current_bucket() const { return bucket_.key; }
  uint64_t events_applied() const { return events_applied_; }
  uint64_t last_seq() const { return last_seq_; }
  int64_t first_ts_ns() const { return first_ts_ns_; }
  int64_t last_ts_ns() const { return last_ts_ns_; }
  // The latest timestamp of any event applied: last_ts_ns() unless time went backwards.
  int64_t max_ts_ns() const { return max_ts_ns_; }
  const RankAnomalies& anomalies() const { return anomalies_; }
  uint64_t ooms() const { return ooms_; }
  // The first OOM event (0 when none) and the size it asked for.
  uint64_t first_oom_seq() const { return first_oom_seq_; }
  int64_t first_oom_ts_ns() const { return first_oom_ts_ns_; }
  uint64_t first_oom_bytes() const { return first_oom_bytes_; }
  // The first OOM's tag and call site (string ids; 0 = none).
  uint32_t first_oom_tag_id() const { return first_oom_tag_id_; }
  uint32_t first_oom_source_id() const { return first_oom_source_id_; }
  uint64_t pool_reserved_bytes() const;
  // Steps closed so far (the store checkpoints every N).
  uint64_t steps_closed() const { return steps_closed_; }

  // Live ALLOC allocations and live VMM mappings, by address.
  const absl::flat_hash_map<uint64_t, LiveAllocation>& allocations() const { return allocs_; }
  const absl::flat_hash_map<uint64_t, LiveAllocation>& mappings() const { return maps_; }
  // The phases open now, outermost first (string ids).
  const std::vector<uint32_t>& open_phases() const { return phases_.open(); }
  // Whether every live allocation's phase_id is known: false for a state restored from a
  // checkpoint written before allocations carried their phase (read the phases by replaying
  // the stream's markers instead).
  bool allocation_phases_known() const { return allocation_phases_known_; }

  // The whole state (live set, groups, open rollups, counters) as bytes, and back. Deserialize
  // rejects malformed input with INVALID_ARGUMENT.
  std::string Serialize() const;
  static absl::StatusOr<RankState> Deserialize(absl::string_view bytes);

 private:
  // Live bytes of one tag / source / memory kind, and the peak it reached within the open step
  // and bucket. A peak is only valid when its epoch equals that rollup's epoch; otherwise the
  // group was not touched there and its peak is its live value.
  struct GroupLive {
    uint64_t live = 0;
    uint64_t step_peak = 0;
    uint64_t bucket_peak = 0;
    uint64_t step_epoch = 0;
    uint64_t bucket_epoch = 0;
  };
  using GroupMap = IdTable<GroupLive>;

  // A phase seen within one rollup: peak live bytes while open, live bytes when it ended.
  struct PhaseStat {
    uint32_t id = 0;
    uint64_t peak = 0;
    uint64_t end = 0;     // live bytes at its last close within the rollup
    bool ended = false;   // closed, not reopened since
    bool closed = false;  // closed at least once within the rollup
  };

  // The scalar part of one open rollup.
  struct Accumulator {
    bool open = false;
    uint64_t epoch = 0;
    int64_t key = 0;
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    uint64_t start_bytes = 0;
    uint64_t floor_bytes = 0;
    uint64_t peak_bytes = 0;
    int64_t peak_ns = 0;  // when live bytes first reached peak_bytes, the rank's clock
    uint64_t peak_seq = 0;  // and the event after which they stood there
    uint64_t allocs = 0;
    uint64_t frees = 0;
    uint64_t alloc_bytes = 0;
    uint64_t free_bytes = 0;
    uint64_t device_used_max = 0;
    uint64_t live_at_device_used_max = 0;  // live bytes when that sample was taken
    uint64_t device_total = 0;
    uint64_t host_rss_max = 0;
    uint64_t ooms = 0;
    uint64_t oom_requested_bytes = 0;
    uint64_t events_lost = 0;
    std::vector<PhaseStat> phases;
  };
  enum class Axis { kStep, kBucket };

  void OpenAccumulator(Accumulator* acc, int64_t key, int64_t start_ns);
  // Fills `out`, which must be empty (new or cleared).
  void Snapshot(const Accumulator& acc, Axis axis, v1::StepRollup* out) const;
  PhaseStat* FindPhase(Accumulator* acc, uint32_t id);
  // Apply() of an event at a time (its own, or the one it is held at).
  void ApplyAtItsTime(const Event& e, ClosedRollups* closed);
  // Before any event's own effect: the first event opens the rollups, a later one may close the
  // time bucket; counters and the clock move to it.
  void AdvanceClock(const Event& e, ClosedRollups* closed);
  void OnPoolTrim(const Event& e);
  void OnOom(const Event& e);
  void OnPhaseBegin(uint32_t phase_id);
  void OnPhaseEnd(uint32_t phase_id);
  // The statistics of what PhaseNesting did with an END (or a BEGIN after a loss).
  void OnPhaseEnded(uint32_t phase_id, const PhaseNesting::Ended& ended);
  void OnDeviceSample(const Event& e);
  void OnStep(const Event& e, ClosedRollups* closed);
  void OnBucket(const Event& e, ClosedRollups* closed);
  void RememberBucketEnd();
  void AddAllocation(absl::flat_hash_map<uint64_t, LiveAllocation>* set, const Event& e);
  bool RemoveAllocation(absl::flat_hash_map<uint64_t, LiveAllocation>* set, uint64_t address);
  // Adds or removes `a` from the live totals and every group it counts in. `extremes` = false:
  // the floor and peak do not see the result (half of a replacement, see AddAllocation).
  void ChangeLive(const LiveAllocation& a, bool add, bool extremes = true);
  // The open step's and bucket's floor and peak take the live bytes as they are now.
  void NoteExtremes();
  void TouchGroup(GroupMap* groups, uint32_t id, uint64_t bytes, bool add);
  // Checkpoint parts: the groups touched in the open step or bucket (with their peaks there),
  // and one open rollup. Restoring groups takes their live bytes from the restored live set.
  void SaveTouchedGroups(const GroupMap& map,
                         google::protobuf::RepeatedPtrField<GroupRecord>* out) const;
  static void SaveAccumulator(const Accumulator& acc, AccumulatorRecord* out);
  static void RestoreAccumulator(const AccumulatorRecord& in, uint64_t epoch, Accumulator* acc);
  void RestoreGroups(const RankStateRecord& rec);

  // The bucket of an event at `ts_ns` (rank clock).
  int64_t BucketOf(int64_t ts_ns) const;

  int64_t bucket_ns_;
  int64_t clock_offset_ns_ = 0;
  int64_t time_horizon_ns_ = kNoTimeHorizon;
  // Events (rank clock) before this fall in the open bucket, as long as the offset is still
  // bucket_end_offset_. Derived; not checkpointed (the first event after a load recomputes it).
  int64_t bucket_ends_before_ = std::numeric_limits<int64_t>::min();
  int64_t bucket_end_offset_ = 0;
  absl::flat_hash_map<uint64_t, LiveAllocation> allocs_;
  absl::flat_hash_map<uint64_t, LiveAllocation> maps_;
  absl::flat_hash_map<uint64_t, uint64_t> pools_;
  GroupMap tags_;
  GroupMap sources_;
  GroupMap kinds_;
  // The open phase runs, and which run each marker opens or ends (phase_nesting.h).
  PhaseNesting phases_;
  bool allocation_phases_known_ = true;
  Accumulator step_;
  Accumulator bucket_;
  uint64_t next_epoch_ = 1;
  uint64_t live_bytes_ = 0;
  int64_t current_step_ = 0;
  bool has_step_marker_ = false;
  uint64_t events_applied_ = 0;
  uint64_t last_seq_ = 0;
  int64_t first_ts_ns_ = 0;
  int64_t last_ts_ns_ = 0;
  // When live bytes last changed: the moment a rollup that begins at that level reached it (its
  // peak's moment, until the bytes rise past it). The rank's clock.
  int64_t level_ns_ = 0;
  uint64_t level_seq_ = 0;  // the event that made that change
  int64_t max_ts_ns_ = 0;
  RankAnomalies anomalies_;
  uint64_t ooms_ = 0;
  uint64_t first_oom_seq_ = 0;
  int64_t first_oom_ts_ns_ = 0;
  uint64_t first_oom_bytes_ = 0;
  uint32_t first_oom_tag_id_ = 0;
  uint32_t first_oom_source_id_ = 0;
  uint64_t steps_closed_ = 0;
};

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_ROLLUP_RANK_STATE_H_
