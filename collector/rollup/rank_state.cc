#include "collector/rollup/rank_state.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "collector/rollup/rank_state.pb.h"
#include "collector/rollup/saturating.h"

namespace memtrace::collector {

namespace {

constexpr uint32_t kCheckpointVersion = 1;
constexpr int64_t kDefaultBucketNs = 1'000'000'000;

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// bucket * width, clamped instead of overflowing for timestamps near the int64 ends.
int64_t BucketStart(int64_t bucket, int64_t width) {
  int64_t out;
  if (__builtin_mul_overflow(bucket, width, &out)) {
    return bucket < 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  }
  return out;
}

int64_t BucketEnd(int64_t bucket, int64_t width) {
  const int64_t start = BucketStart(bucket, width);
  int64_t out;
  if (__builtin_add_overflow(start, width, &out)) return std::numeric_limits<int64_t>::max();
  return out;
}

template <typename Map>
std::vector<typename Map::key_type> SortedKeys(const Map& map) {
  std::vector<typename Map::key_type> keys;
  keys.reserve(map.size());
  for (const auto& [k, v] : map) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  return keys;
}

void EncodeLive(const absl::flat_hash_map<uint64_t, LiveAllocation>& set, LiveColumns* out) {
  // Sorted with a pointer to each allocation: no second hash lookup per allocation.
  std::vector<std::pair<uint64_t, const LiveAllocation*>> sorted;
  sorted.reserve(set.size());
  for (const auto& [address, a] : set) sorted.emplace_back(address, &a);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  const int n = static_cast<int>(sorted.size());
  out->mutable_address_delta()->Reserve(n);
  out->mutable_bytes()->Reserve(n);
  out->mutable_seq()->Reserve(n);
  out->mutable_ts_ns()->Reserve(n);
  out->mutable_step()->Reserve(n);
  out->mutable_tag_id()->Reserve(n);
  out->mutable_source_id()->Reserve(n);
  out->mutable_memory_kind()->Reserve(n);
  out->mutable_phase_id()->Reserve(n);
  uint64_t prev = 0;
  for (const auto& [address, allocation] : sorted) {
    const LiveAllocation& a = *allocation;
    out->add_address_delta(static_cast<int64_t>(address - prev));
    prev = address;
    out->add_bytes(a.bytes);
    out->add_seq(a.seq);
    out->add_ts_ns(a.ts_ns);
    out->add_step(a.step);
    out->add_tag_id(a.tag_id);
    out->add_source_id(a.source_id);
    out->add_memory_kind(a.memory_kind);
    out->add_phase_id(a.phase_id);
  }
}

absl::Status DecodeLive(const LiveColumns& in, const char* name,
                        absl::flat_hash_map<uint64_t, LiveAllocation>* set) {
  const int n = in.address_delta_size();
  if (in.bytes_size() != n || in.seq_size() != n || in.ts_ns_size() != n || in.step_size() != n ||
      in.tag_id_size() != n || in.source_id_size() != n || in.memory_kind_size() != n ||
      (in.phase_id_size() != n && in.phase_id_size() != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint ", name, " columns differ in length (", n, " addresses)"));
  }
  set->reserve(n);
  uint64_t address = 0;
  for (int i = 0; i < n; ++i) {
    address += static_cast<uint64_t>(in.address_delta(i));
    LiveAllocation a;
    a.bytes = in.bytes(i);
    a.seq = in.seq(i);
    a.ts_ns = in.ts_ns(i);
    a.step = in.step(i);
    a.tag_id = in.tag_id(i);
    a.source_id = in.source_id(i);
    a.memory_kind = in.memory_kind(i);
    a.phase_id = in.phase_id_size() == n ? in.phase_id(i) : 0;
    if (!set->emplace(address, a).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint ", name, " repeats address ", address));
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RankAnomalies::ToProto(v1::AnomalyCounts* out) const {
  out->set_free_unknown(free_unknown);
  out->set_alloc_over_live(alloc_over_live);
  out->set_unmap_unknown(unmap_unknown);
  out->set_time_backwards(time_backwards);
  out->set_step_backwards(step_backwards);
  out->set_phase_unmatched(phase_unmatched);
  out->set_phase_too_deep(phase_too_deep);
  out->set_time_future(time_future);
}

RankAnomalies RankAnomalies::FromProto(const v1::AnomalyCounts& counts) {
  RankAnomalies a;
  a.free_unknown = counts.free_unknown();
  a.alloc_over_live = counts.alloc_over_live();
  a.unmap_unknown = counts.unmap_unknown();
  a.time_backwards = counts.time_backwards();
  a.step_backwards = counts.step_backwards();
  a.phase_unmatched = counts.phase_unmatched();
  a.phase_too_deep = counts.phase_too_deep();
  a.time_future = counts.time_future();
  return a;
}

RankState::RankState(int64_t bucket_ns) : bucket_ns_(bucket_ns > 0 ? bucket_ns : kDefaultBucketNs) {}

uint64_t RankState::pool_reserved_bytes() const {
  uint64_t total = 0;
  for (const auto& [address, bytes] : pools_) total += bytes;
  return total;
}

void RankState::Apply(absl::Span<const Event> events, ClosedRollups* closed) {
  for (const Event& e : events) Apply(e, closed);
}

void RankState::Apply(const Event& e, ClosedRollups* closed) {
  if (e.ts_ns <= time_horizon_ns_) {
    ApplyAtItsTime(e, closed);
    return;
  }
  // Taken as a time, one garbage timestamp years ahead moved the open time bucket there (every
  // later event then counted in it), and the checkpoints' time with it (a replay to a time
  // after the event stopped before it).
  ++anomalies_.time_future;
  Event held = e;
  held.ts_ns = TimeWithinHorizon(e.ts_ns, time_horizon_ns_, events_applied_ > 0, last_ts_ns_);
  ApplyAtItsTime(held, closed);
}

void RankState::ApplyAtItsTime(const Event& e, ClosedRollups* closed) {
  AdvanceClock(e, closed);
  switch (e.kind) {
    case EventKind::kAlloc:
      AddAllocation(&allocs_, e);
      break;
    case EventKind::kFree:
      if (!RemoveAllocation(&allocs_, e.address)) ++anomalies_.free_unknown;
      break;
    case EventKind::kVmmMap:
      AddAllocation(&maps_, e);
      break;
    case EventKind::kVmmUnmap:
      if (!RemoveAllocation(&maps_, e.address)) ++anomalies_.unmap_unknown;
      break;
    case EventKind::kPoolCreate:
      pools_[e.address] = e.bytes;
      break;
    case EventKind::kPoolDestroy:
      pools_.erase(e.address);
      break;
    case EventKind::kPoolTrim:
      OnPoolTrim(e);
      break;
    case EventKind::kOom:
      OnOom(e);
      break;
    case EventKind::kStep:
      OnStep(e, closed);
      break;
    case EventKind::kPhaseBegin:
      OnPhaseBegin(e.tag_id);
      break;
    case EventKind::kPhaseEnd:
      OnPhaseEnd(e.tag_id);
      break;
    case EventKind::kDeviceSample:
      OnDeviceSample(e);
      break;
    case EventKind::kHostSample:
      for (Accumulator* acc : {&step_, &bucket_}) {
        acc->host_rss_max = std::max(acc->host_rss_max, e.bytes);
      }
      break;
    case EventKind::kLoss:
      for (Accumulator* acc : {&step_, &bucket_}) acc->events_lost += e.aux;
      phases_.Loss();
      break;
    case EventKind::kUnspecified:
      break;
  }
}

void RankState::AdvanceClock(const Event& e, ClosedRollups* closed) {
  if (events_applied_ == 0) {
    first_ts_ns_ = e.ts_ns;
    OpenAccumulator(&step_, current_step_, e.ts_ns);
    OpenAccumulator(&bucket_, BucketOf(e.ts_ns), e.ts_ns);
    RememberBucketEnd();
  } else {
    if (e.ts_ns < last_ts_ns_) ++anomalies_.time_backwards;
    OnBucket(e, closed);
  }
  max_ts_ns_ = events_applied_ == 0 ? e.ts_ns : std::max(max_ts_ns_, e.ts_ns);
  ++events_applied_;
  last_seq_ = e.seq;
  last_ts_ns_ = e.ts_ns;
  step_.end_ns = std::max(step_.end_ns, e.ts_ns);
}

void RankState::OnPoolTrim(const Event& e) {
  // A trim releases reserved memory down to minBytesToKeep (aux); when the agent reports the
  // pool's size after the trim (bytes), that is exact.
  auto it = pools_.find(e.address);
  if (it != pools_.end()) it->second = e.bytes != 0 ? e.bytes : std::min(it->second, e.aux);
}

void RankState::OnOom(const Event& e) {
  ++ooms_;
  if (first_oom_seq_ == 0) {
    first_oom_seq_ = e.seq;
    first_oom_ts_ns_ = e.ts_ns;
    first_oom_bytes_ = e.bytes;
    first_oom_tag_id_ = e.tag_id;
    first_oom_source_id_ = e.source_id;
  }
  for (Accumulator* acc : {&step_, &bucket_}) {
    ++acc->ooms;
    acc->oom_requested_bytes = std::max(acc->oom_requested_bytes, e.bytes);
  }
}

void RankState::OnPhaseBegin(uint32_t phase_id) {
  // After a loss, another BEGIN of a phase still open ends that run first (phase_nesting.h):
  // one that stayed open would blame a recurring "rollout" for all later memory.
  std::optional<PhaseNesting::Ended> ended_first;
  const bool opened = phases_.Begin(phase_id, &ended_first);
  if (ended_first.has_value()) {
    ++anomalies_.phase_unmatched;
    OnPhaseEnded(phase_id, *ended_first);
  }
  // Every open phase is carried into each new step and bucket and written with every row they
  // close: without a bound, a stream of distinct PHASE_BEGINs costs cubic time.
  if (!opened) {
    ++anomalies_.phase_too_deep;
    return;
  }
  for (Accumulator* acc : {&step_, &bucket_}) {
    PhaseStat* p = FindPhase(acc, phase_id);
    p->peak = std::max(p->peak, live_bytes_);
    p->ended = false;
  }
}

void RankState::OnPhaseEnd(uint32_t phase_id) { OnPhaseEnded(phase_id, phases_.End(phase_id)); }

void RankState::OnPhaseEnded(uint32_t phase_id, const PhaseNesting::Ended& ended) {
  // The END of a BEGIN ignored for depth, or of nothing open.
  if (ended.what != PhaseNesting::Ended::What::kEndedARun) {
    ++anomalies_.phase_unmatched;
    return;
  }
  // Still open when an outer range of the same name is: only the last end closes it.
  if (phases_.IsOpen(phase_id)) return;
  for (Accumulator* acc : {&step_, &bucket_}) {
    PhaseStat* p = FindPhase(acc, phase_id);
    p->end = live_bytes_;
    p->ended = true;
    p->closed = true;
  }
}

void RankState::OnDeviceSample(const Event& e) {
  for (Accumulator* acc : {&step_, &bucket_}) {
    if (e.bytes >= acc->device_used_max) {
      acc->device_used_max = e.bytes;
      acc->live_at_device_used_max = live_bytes_;
    }
    if (e.aux != 0) acc->device_total = e.aux;
  }
}

void RankState::OnStep(const Event& e, ClosedRollups* closed) {
  const int64_t step = static_cast<int64_t>(e.aux);
  if (!has_step_marker_) {
    has_step_marker_ = true;
    // Events before the first marker belong to step 0; a first marker "step 0" continues it,
    // and a marker that is the stream's first event leaves no empty step 0 behind.
    if (events_applied_ > 1 && step_.start_ns == e.ts_ns && max_ts_ns_ == e.ts_ns) {
      // Every event before it happened at its very instant (an importer's seeds of the memory
      // there before the trace began): they are no step of their own, and the step starts
      // after them, with their bytes as its floor.
      if (closed != nullptr && step_.key != step) closed->abandoned_steps.push_back(step_.key);
      current_step_ = step;
      OpenAccumulator(&step_, step, e.ts_ns);
      // So does the time bucket they fell in: its floor was the 0 before them.
      OpenAccumulator(&bucket_, bucket_.key, e.ts_ns);
      // They were made in this step, too: a live set must not date them to a step 0 that no
      // rollup shows ("since step 0" for a trace whose first step is 2).
      for (auto* set : {&allocs_, &maps_}) {
        for (auto& [address, allocation] : *set) allocation.step = step;
      }
      return;
    }
    if (step == current_step_) return;
    if (events_applied_ == 1) {
      current_step_ = step;
      step_.key = step;
      return;
    }
  } else if (step == current_step_) {
    return;  // a repeated marker of the same step
  }
  if (step < current_step_) ++anomalies_.step_backwards;
  step_.end_ns = e.ts_ns;
  if (closed != nullptr) Snapshot(step_, Axis::kStep, closed->steps.Add());
  ++steps_closed_;
  current_step_ = step;
  OpenAccumulator(&step_, step, e.ts_ns);
}

int64_t RankState::BucketOf(int64_t ts_ns) const {
  return FloorDiv(SaturatingAdd(ts_ns, clock_offset_ns_), bucket_ns_);
}

void RankState::OnBucket(const Event& e, ClosedRollups* closed) {
  // Most events fall before the open bucket's end: a comparison instead of a division.
  if (e.ts_ns < bucket_ends_before_ && bucket_end_offset_ == clock_offset_ns_) return;
  const int64_t bucket = BucketOf(e.ts_ns);
  // An event older than the open bucket (clock going back) is counted in the open one.
  if (bucket <= bucket_.key) {
    RememberBucketEnd();
    return;
  }
  if (closed != nullptr) Snapshot(bucket_, Axis::kBucket, closed->buckets.Add());
  OpenAccumulator(&bucket_, bucket, e.ts_ns);
  RememberBucketEnd();
}

void RankState::RememberBucketEnd() {
  // The open bucket ends at collector time (key + 1) x width, i.e. that minus the offset in the
  // rank's clock; anything earlier stays in it. Saturating: a bucket at the end of the clock
  // never ends.
  bucket_ends_before_ = SaturatingSub(BucketEnd(bucket_.key, bucket_ns_), clock_offset_ns_);
  bucket_end_offset_ = clock_offset_ns_;
}

void RankState::OpenAccumulator(Accumulator* acc, int64_t key, int64_t start_ns) {
  Accumulator fresh;
  fresh.open = true;
  fresh.epoch = next_epoch_++;
  fresh.key = key;
  fresh.start_ns = start_ns;
  fresh.end_ns = start_ns;
  fresh.start_bytes = fresh.floor_bytes = fresh.peak_bytes = live_bytes_;
  // The level carried in: reached when the live bytes last changed, before the event that opened
  // the rollup (which may be a free: read at its own time, the live set no longer has the peak;
  // or at the very moment of the seeds an import begins with, which start-1 was before).
  fresh.peak_ns = level_ns_;
  fresh.peak_seq = level_seq_;
  // Phases still open carry over: their peak within the new rollup starts at the live bytes now.
  for (uint32_t id : phases_.open()) FindPhase(&fresh, id);
  *acc = std::move(fresh);
}

RankState::PhaseStat* RankState::FindPhase(Accumulator* acc, uint32_t id) {
  for (PhaseStat& p : acc->phases) {
    if (p.id == id) return &p;
  }
  acc->phases.push_back(PhaseStat{id, live_bytes_, live_bytes_, false, false});
  return &acc->phases.back();
}

void RankState::AddAllocation(absl::flat_hash_map<uint64_t, LiveAllocation>* set, const Event& e) {
  LiveAllocation a;
  a.bytes = e.bytes;
  a.seq = e.seq;
  a.ts_ns = e.ts_ns;
  a.step = current_step_;
  a.tag_id = e.tag_id;
  a.source_id = e.source_id;
  a.phase_id = phases_.open().empty() ? 0 : phases_.open().back();
  a.memory_kind = e.kind == EventKind::kVmmMap && e.memory_kind == kMemoryUnknown
                      ? static_cast<uint32_t>(kMemoryVmm)
                      : e.memory_kind;
  auto [it, inserted] = set->try_emplace(e.address, a);
  if (!inserted) {
    // Its free was never seen (lost, or reordered): the old allocation cannot still be live.
    ++anomalies_.alloc_over_live;
    // Not a moment of its own for the floor: live bytes go from old to new in one move.
    ChangeLive(it->second, /*add=*/false, /*extremes=*/false);
    it->second = a;
    ChangeLive(a, /*add=*/true);
    // A host allocation adds nothing to live bytes (ChangeLive stops before the floor): the
    // device bytes it replaced are gone all the same.
    NoteExtremes();
    return;
  }
  ChangeLive(a, /*add=*/true);
}

bool RankState::RemoveAllocation(absl::flat_hash_map<uint64_t, LiveAllocation>* set,
                                 uint64_t address) {
  auto it = set->find(address);
  if (it == set->end()) return false;
  ChangeLive(it->second, /*add=*/false);
  set->erase(it);
  return true;
}

// Inlined, as ChangeLive: it runs for every allocation and free.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline void RankState::NoteExtremes() {
  for (Accumulator* acc : {&step_, &bucket_}) {
    acc->floor_bytes = std::min(acc->floor_bytes, live_bytes_);
    if (live_bytes_ > acc->peak_bytes) {
      acc->peak_bytes = live_bytes_;
      acc->peak_ns = last_ts_ns_;  // the event being applied (AdvanceClock)
      acc->peak_seq = last_seq_;
    }
  }
}

// Inlined: it runs three times for every allocation and free.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline void RankState::TouchGroup(GroupMap* groups, uint32_t id,
                                                               uint64_t bytes, bool add) {
  GroupLive& g = (*groups)[id];
  if (g.step_epoch != step_.epoch) {
    g.step_epoch = step_.epoch;
    g.step_peak = g.live;
  }
  if (g.bucket_epoch != bucket_.epoch) {
    g.bucket_epoch = bucket_.epoch;
    g.bucket_peak = g.live;
  }
  g.live = add ? g.live + bytes : g.live - bytes;  // exact, as live_bytes_ (ChangeLive)
  g.step_peak = std::max(g.step_peak, g.live);
  g.bucket_peak = std::max(g.bucket_peak, g.live);
}

void RankState::ChangeLive(const LiveAllocation& a, bool add, bool extremes) {
  TouchGroup(&kinds_, a.memory_kind, a.bytes, add);
  if (LeftOutOfLiveBytes(a.memory_kind)) return;
  TouchGroup(&tags_, a.tag_id, a.bytes, add);
  TouchGroup(&sources_, a.source_id, a.bytes, add);
  // Exact (modulo 2^64) both ways, not clamped at 0: every byte taken off was added for the
  // same allocation, so the sums always equal the live set's, which is what a restore from a
  // checkpoint recomputes them from, even when absurd sizes (2^64-1) wrap around.
  if (add) {
    live_bytes_ += a.bytes;
  } else {
    live_bytes_ -= a.bytes;
  }
  level_ns_ = last_ts_ns_;  // the event being applied (AdvanceClock)
  level_seq_ = last_seq_;
  if (extremes) NoteExtremes();
  for (Accumulator* acc : {&step_, &bucket_}) {
    if (add) {
      ++acc->allocs;
      acc->alloc_bytes += a.bytes;
    } else {
      ++acc->frees;
      acc->free_bytes += a.bytes;
    }
    if (add) {
      for (PhaseStat& p : acc->phases) {
        if (!p.ended) p.peak = std::max(p.peak, live_bytes_);
      }
    }
  }
}

v1::StepRollup RankState::OpenStepRollup() const {
  v1::StepRollup r;
  Snapshot(step_, Axis::kStep, &r);
  return r;
}

v1::StepRollup RankState::OpenBucketRollup() const {
  v1::StepRollup r;
  Snapshot(bucket_, Axis::kBucket, &r);
  return r;
}

void RankState::Snapshot(const Accumulator& acc, Axis axis, v1::StepRollup* out) const {
  v1::StepRollup& r = *out;
  r.set_step(acc.key);
  if (axis == Axis::kBucket) {
    r.set_start_ns(BucketStart(acc.key, bucket_ns_));
    r.set_end_ns(BucketEnd(acc.key, bucket_ns_));
  } else {
    r.set_start_ns(acc.start_ns);
    r.set_end_ns(acc.end_ns);
  }
  r.set_start_bytes(acc.start_bytes);
  r.set_floor_bytes(acc.floor_bytes);
  r.set_peak_bytes(acc.peak_bytes);
  // In the rank's clock on either axis: queries shift it by the rank's latest offset, the one a
  // live set at a collector time is read back with (EventStore::VisitRollups).
  r.set_peak_ns(acc.peak_ns);
  r.set_peak_seq(acc.peak_seq);
  r.set_end_bytes(live_bytes_);
  r.set_allocs(acc.allocs);
  r.set_frees(acc.frees);
  r.set_alloc_bytes(acc.alloc_bytes);
  r.set_free_bytes(acc.free_bytes);
  r.set_device_used_max(acc.device_used_max);
  r.set_live_at_device_used_max(acc.live_at_device_used_max);
  r.set_device_total(acc.device_total);
  r.set_host_rss_max(acc.host_rss_max);
  r.set_ooms(acc.ooms);
  r.set_oom_requested_bytes(acc.oom_requested_bytes);
  r.set_events_lost(acc.events_lost);
  r.set_pool_reserved_bytes(pool_reserved_bytes());
  const auto groups = [&](const GroupMap& map, auto* out) {
    map.ForEachAscending([&](uint32_t id, const GroupLive& g) {
      const bool touched = axis == Axis::kStep ? g.step_epoch == acc.epoch
                                               : g.bucket_epoch == acc.epoch;
      const uint64_t peak = touched ? (axis == Axis::kStep ? g.step_peak : g.bucket_peak) : g.live;
      if (g.live == 0 && peak == 0) return;
      v1::GroupBytes* gb = out->Add();
      gb->set_id(id);
      gb->set_live_bytes(g.live);
      gb->set_peak_bytes(peak);
    });
  };
  groups(tags_, r.mutable_by_tag());
  groups(sources_, r.mutable_by_source());
  groups(kinds_, r.mutable_by_memory_kind());
  std::vector<PhaseStat> phases = acc.phases;
  std::sort(phases.begin(), phases.end(),
            [](const PhaseStat& a, const PhaseStat& b) { return a.id < b.id; });
  for (const PhaseStat& p : phases) {
    v1::GroupBytes* gb = r.add_by_phase();
    gb->set_id(p.id);
    // Its last close when it closed within the row, reopened or not: a phase that ran again by
    // the end of each time bucket (1 s steps in 1 s buckets) never showed what it left behind.
    gb->set_live_bytes(p.closed ? p.end : live_bytes_);
    gb->set_peak_bytes(p.peak);
    gb->set_open(!p.ended);
    gb->set_closed(p.closed);
  }
}

void RankState::SaveTouchedGroups(const GroupMap& map,
                                  google::protobuf::RepeatedPtrField<GroupRecord>* out) const {
  map.ForEachAscending([&](uint32_t id, const GroupLive& g) {
    const bool step_touched = step_.open && g.step_epoch == step_.epoch;
    const bool bucket_touched = bucket_.open && g.bucket_epoch == bucket_.epoch;
    if (!step_touched && !bucket_touched) return;
    GroupRecord* gr = out->Add();
    gr->set_id(id);
    gr->set_step_touched(step_touched);
    if (step_touched) gr->set_step_peak(g.step_peak);
    gr->set_bucket_touched(bucket_touched);
    if (bucket_touched) gr->set_bucket_peak(g.bucket_peak);
  });
}

void RankState::SaveAccumulator(const Accumulator& acc, AccumulatorRecord* out) {
  out->set_open(acc.open);
  v1::StepRollup* s = out->mutable_stats();
  s->set_step(acc.key);
  s->set_start_ns(acc.start_ns);
  s->set_end_ns(acc.end_ns);
  s->set_start_bytes(acc.start_bytes);
  s->set_floor_bytes(acc.floor_bytes);
  s->set_peak_bytes(acc.peak_bytes);
  s->set_peak_ns(acc.peak_ns);
  s->set_peak_seq(acc.peak_seq);
  s->set_allocs(acc.allocs);
  s->set_frees(acc.frees);
  s->set_alloc_bytes(acc.alloc_bytes);
  s->set_free_bytes(acc.free_bytes);
  s->set_device_used_max(acc.device_used_max);
  s->set_live_at_device_used_max(acc.live_at_device_used_max);
  s->set_device_total(acc.device_total);
  s->set_host_rss_max(acc.host_rss_max);
  s->set_ooms(acc.ooms);
  s->set_oom_requested_bytes(acc.oom_requested_bytes);
  s->set_events_lost(acc.events_lost);
  for (const PhaseStat& p : acc.phases) {
    PhaseStatRecord* pr = out->add_phases();
    pr->set_id(p.id);
    pr->set_peak(p.peak);
    pr->set_end(p.end);
    pr->set_ended(p.ended);
    pr->set_closed(p.closed);
  }
}

std::string RankState::Serialize() const {
  RankStateRecord rec;
  rec.set_version(kCheckpointVersion);
  rec.set_bucket_ns(bucket_ns_);
  rec.set_allocation_phases(allocation_phases_known_);
  EncodeLive(allocs_, rec.mutable_allocations());
  EncodeLive(maps_, rec.mutable_mappings());
  for (uint64_t address : SortedKeys(pools_)) {
    rec.add_pool_address(address);
    rec.add_pool_bytes(pools_.at(address));
  }
  SaveTouchedGroups(tags_, rec.mutable_tags());
  SaveTouchedGroups(sources_, rec.mutable_sources());
  SaveTouchedGroups(kinds_, rec.mutable_kinds());
  for (uint32_t id : phases_.open()) rec.add_open_phases(id);
  rec.set_phases_after_loss(phases_.after_loss());
  std::vector<std::pair<uint32_t, uint32_t>> ignored(phases_.ignored().begin(),
                                                     phases_.ignored().end());
  std::sort(ignored.begin(), ignored.end());  // a checkpoint's bytes do not depend on hashing
  for (const auto& [id, count] : ignored) {
    IgnoredPhase* p = rec.add_ignored_phases();
    p->set_phase_id(id);
    p->set_count(count);
  }
  SaveAccumulator(step_, rec.mutable_step());
  SaveAccumulator(bucket_, rec.mutable_bucket());
  rec.set_current_step(current_step_);
  rec.set_has_step_marker(has_step_marker_);
  rec.set_events_applied(events_applied_);
  rec.set_last_seq(last_seq_);
  rec.set_first_ts_ns(first_ts_ns_);
  rec.set_last_ts_ns(last_ts_ns_);
  rec.set_level_ns(level_ns_);
  rec.set_level_seq(level_seq_);
  rec.set_max_ts_ns(max_ts_ns_);
  anomalies_.ToProto(rec.mutable_anomalies());
  rec.set_ooms(ooms_);
  rec.set_first_oom_seq(first_oom_seq_);
  rec.set_first_oom_ts_ns(first_oom_ts_ns_);
  rec.set_first_oom_bytes(first_oom_bytes_);
  rec.set_first_oom_tag_id(first_oom_tag_id_);
  rec.set_first_oom_source_id(first_oom_source_id_);
  rec.set_steps_closed(steps_closed_);
  rec.set_clock_offset_ns(clock_offset_ns_);
  return rec.SerializeAsString();
}

void RankState::RestoreAccumulator(const AccumulatorRecord& in, uint64_t epoch, Accumulator* acc) {
  const v1::StepRollup& st = in.stats();
  acc->open = in.open();
  acc->epoch = epoch;
  acc->key = st.step();
  acc->start_ns = st.start_ns();
  acc->end_ns = st.end_ns();
  acc->start_bytes = st.start_bytes();
  acc->floor_bytes = st.floor_bytes();
  acc->peak_bytes = st.peak_bytes();
  // 0 from a checkpoint before the field: unknown, unless the live bytes rise past the peak.
  acc->peak_ns = st.peak_ns();
  acc->peak_seq = st.peak_seq();
  acc->allocs = st.allocs();
  acc->frees = st.frees();
  acc->alloc_bytes = st.alloc_bytes();
  acc->free_bytes = st.free_bytes();
  acc->device_used_max = st.device_used_max();
  acc->live_at_device_used_max = st.live_at_device_used_max();
  acc->device_total = st.device_total();
  acc->host_rss_max = st.host_rss_max();
  acc->ooms = st.ooms();
  acc->oom_requested_bytes = st.oom_requested_bytes();
  acc->events_lost = st.events_lost();
  for (const PhaseStatRecord& p : in.phases()) {
    // A checkpoint from before `closed`: an ended phase closed in the rollup.
    acc->phases.push_back(PhaseStat{p.id(), p.peak(), p.end(), p.ended(), p.closed() || p.ended()});
  }
}

void RankState::RestoreGroups(const RankStateRecord& rec) {
  // Live bytes per group come from the live set, so they always agree with it.
  for (const auto* set : {&allocs_, &maps_}) {
    for (const auto& [address, a] : *set) {
      kinds_[a.memory_kind].live += a.bytes;
      if (LeftOutOfLiveBytes(a.memory_kind)) continue;
      tags_[a.tag_id].live += a.bytes;
      sources_[a.source_id].live += a.bytes;
      live_bytes_ += a.bytes;
    }
  }
  const auto groups = [&](const auto& records, GroupMap* map) {
    for (const GroupRecord& gr : records) {
      GroupLive& g = (*map)[gr.id()];
      if (gr.step_touched()) {
        g.step_epoch = step_.epoch;
        g.step_peak = std::max(gr.step_peak(), g.live);
      }
      if (gr.bucket_touched()) {
        g.bucket_epoch = bucket_.epoch;
        g.bucket_peak = std::max(gr.bucket_peak(), g.live);
      }
    }
  };
  groups(rec.tags(), &tags_);
  groups(rec.sources(), &sources_);
  groups(rec.kinds(), &kinds_);
}

absl::StatusOr<RankState> RankState::Deserialize(absl::string_view bytes) {
  RankStateRecord rec;
  if (!rec.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint of ", bytes.size(), " bytes does not parse"));
  }
  if (rec.version() != kCheckpointVersion) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint version ", rec.version(),
                                                   ", this collector reads ", kCheckpointVersion));
  }
  if (rec.bucket_ns() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint bucket_ns ", rec.bucket_ns()));
  }
  if (rec.pool_address_size() != rec.pool_bytes_size()) {
    return absl::InvalidArgumentError("checkpoint pool columns differ in length");
  }
  RankState s(rec.bucket_ns());
  if (absl::Status st = DecodeLive(rec.allocations(), "allocations", &s.allocs_); !st.ok()) {
    return st;
  }
  if (absl::Status st = DecodeLive(rec.mappings(), "mappings", &s.maps_); !st.ok()) return st;
  s.allocation_phases_known_ = rec.allocation_phases();
  for (int i = 0; i < rec.pool_address_size(); ++i) s.pools_[rec.pool_address(i)] = rec.pool_bytes(i);

  // Fresh epochs: 1 for the step, 2 for the bucket; groups untouched there keep epoch 0.
  RestoreAccumulator(rec.step(), 1, &s.step_);
  RestoreAccumulator(rec.bucket(), 2, &s.bucket_);
  s.next_epoch_ = 3;

  s.RestoreGroups(rec);
  absl::flat_hash_map<uint32_t, uint32_t> ignored;
  for (const auto& p : rec.ignored_phases()) {
    if (p.count() > 0) ignored[p.phase_id()] += p.count();
  }
  s.phases_.Restore(std::vector<uint32_t>(rec.open_phases().begin(), rec.open_phases().end()),
                    rec.phases_after_loss(), std::move(ignored));
  s.current_step_ = rec.current_step();
  s.has_step_marker_ = rec.has_step_marker();
  s.events_applied_ = rec.events_applied();
  s.last_seq_ = rec.last_seq();
  s.first_ts_ns_ = rec.first_ts_ns();
  s.last_ts_ns_ = rec.last_ts_ns();
  s.level_ns_ = rec.level_ns();
  s.level_seq_ = rec.level_seq();
  s.max_ts_ns_ = rec.has_max_ts_ns() ? rec.max_ts_ns() : rec.last_ts_ns();
  s.anomalies_ = RankAnomalies::FromProto(rec.anomalies());
  s.ooms_ = rec.ooms();
  s.first_oom_seq_ = rec.first_oom_seq();
  s.first_oom_ts_ns_ = rec.first_oom_ts_ns();
  s.first_oom_bytes_ = rec.first_oom_bytes();
  s.first_oom_tag_id_ = rec.first_oom_tag_id();
  s.first_oom_source_id_ = rec.first_oom_source_id();
  s.steps_closed_ = rec.steps_closed();
  s.clock_offset_ns_ = rec.clock_offset_ns();
  return s;
}

}  // namespace memtrace::collector
