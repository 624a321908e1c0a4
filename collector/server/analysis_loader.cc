#include "collector/server/analysis_loader.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "collector/rollup/saturating.h"
#include "query/analysis/bucket_windows.h"
#include "query/analysis/rollup_convert.h"
#include "query/analysis/units.h"

namespace memtrace::collector {
namespace {

RollupAxis AxisOf(v1::TimelineAxis axis) {
  return axis == v1::TIMELINE_AXIS_TIME ? RollupAxis::kTime : RollupAxis::kStep;
}

// The job's rows on `axis`, converted by a Builder (rollup_convert.h) as they are read.
template <typename Builder>
using Built = decltype(std::declval<Builder&&>().Finish());  // StatusOr<what it builds>

// `only_streams`: these stream numbers alone (subprocesses included when named); empty: the
// job's ranks.
template <typename Builder>
Built<Builder> Read(const EventStore& store, absl::string_view job_id, v1::TimelineAxis axis,
                    RollupDetail detail, const std::vector<uint32_t>& only_streams) {
  std::optional<Builder> builder;
  int64_t bucket_ns = 0;
  absl::Status s = store.VisitRollups(
      job_id, AxisOf(axis), detail, &bucket_ns,
      [&](const v1::RankRollups& rank) {
        if (!builder.has_value()) builder.emplace(job_id, axis, bucket_ns);
        return builder->StartRank(rank);
      },
      [&](const v1::StepRollup& row) { builder->AddRow(row); }, only_streams);
  if (!s.ok()) return s;
  if (!builder.has_value()) builder.emplace(job_id, axis, bucket_ns);
  return std::move(*builder).Finish();
}

// Read, falling back to the time axis for a job without step markers (see LoadJobTimeline).
template <typename Builder>
Built<Builder> ReadWithFallback(const EventStore& store, absl::string_view job_id,
                                v1::TimelineAxis axis, RollupDetail detail,
                                StepWindows windows = StepWindows::kChosen,
                                const StreamSet& streams = {}) {
  std::vector<uint32_t> only_streams;
  if (streams.subprocesses) {
    absl::StatusOr<std::vector<uint32_t>> numbers = SubprocessStreams(store, job_id, streams);
    if (!numbers.ok()) return numbers.status();
    only_streams = *std::move(numbers);
  }
  Built<Builder> job = Read<Builder>(store, job_id, axis, detail, only_streams);
  if (!job.ok()) return job;
  if (job->ranks.empty()) {
    return absl::NotFoundError(absl::StrCat("job \"", job_id, "\" has no ranks stored"));
  }
  if (axis == v1::TIMELINE_AXIS_STEP && !analysis::HasStepMarkers(*job)) {
    job = Read<Builder>(store, job_id, v1::TIMELINE_AXIS_TIME, detail, only_streams);
    if (!job.ok()) return job;
    axis = v1::TIMELINE_AXIS_TIME;
  }
  // Time buckets shorter than the job's steps are read in windows of whole steps
  // (bucket_windows.h): the same window for the timeline and the step metrics, chosen from the
  // floors both hold. So too when --axis time asked for buckets: read bucket by bucket, a 1 s
  // bucket's "floor" is a moment mid-step, and headroom called a rank 816 MiB from full flat
  // where the default (windows, on a job without step markers) forecast it 20 s from OOM.
  if (axis == v1::TIMELINE_AXIS_TIME && windows == StepWindows::kChosen) {
    if (const int64_t window = analysis::StepWindowOf(*job); window > 1) {
      *job = analysis::InStepWindows(*job, window);
    }
  }
  return job;
}

// The store's snapshot in the wire form rollup_convert reads (as Query/LiveAt answers it).
v1::LiveAtResponse ToLiveAt(const LiveSnapshot& live) {
  v1::LiveAtResponse out;
  out.set_rank(live.key.rank);
  out.set_attempt(live.key.attempt);
  out.set_seq(live.seq);
  out.set_ts_ns(live.ts_ns);
  out.set_step(live.step);
  out.set_live_bytes(live.live_bytes);
  out.set_allocation_count(live.allocations.size());
  out.set_oom_requested_bytes(live.oom_requested_bytes);
  out.mutable_allocations()->Reserve(static_cast<int>(live.allocations.size()));
  for (const auto& [address, a] : live.allocations) {
    v1::LiveAllocation* w = out.add_allocations();
    w->set_address(address);
    w->set_bytes(a.bytes);
    w->set_tag_id(a.tag_id);
    w->set_source_id(a.source_id);
    w->set_step(a.step);
    w->set_ts_ns(a.ts_ns);
    w->set_seq(a.seq);
    w->set_memory_kind(a.memory_kind);
  }
  for (const StringDef& d : live.strings) {
    v1::StringEntry* e = out.add_strings();
    e->set_id(d.id);
    e->set_kind(static_cast<v1::StringKind>(d.kind));
    e->set_value(d.value);
  }
  return out;
}

// Phase names by string id, from `live`'s string table.
absl::flat_hash_map<uint32_t, const std::string*> PhaseNames(const LiveSnapshot& live) {
  absl::flat_hash_map<uint32_t, const std::string*> names;
  for (const StringDef& d : live.strings) names[d.id] = &d.value;
  return names;
}

// The name of phase `id` ("phase#7" for an id the table lacks: its batch was lost).
std::string PhaseName(const absl::flat_hash_map<uint32_t, const std::string*>& names,
                      uint32_t id) {
  auto it = names.find(id);
  return it != names.end() ? *it->second : absl::StrCat("phase#", id);
}

// Whether the stream recorded a phase marker (its string table names a phase): without one,
// a replay of its markers would find none.
bool NamesAPhase(const LiveSnapshot& live) {
  for (const StringDef& d : live.strings) {
    if (d.kind == StringKind::kPhase) return true;
  }
  return false;
}

// The phases the snapshot's allocations carry (RankState keeps each one's), and its open ones.
void PhasesFromSnapshot(const LiveSnapshot& live, analysis::RankLiveSet* set) {
  const auto names = PhaseNames(live);
  const auto name = [&](uint32_t id) { return PhaseName(names, id); };
  // The set kept device allocations only (host ones were left out): match by address.
  absl::flat_hash_map<uint64_t, uint32_t> phase_of_address;
  for (const auto& [address, a] : live.allocations) {
    if (a.phase_id != 0) phase_of_address[address] = a.phase_id;
  }
  for (analysis::LiveAllocation& a : set->allocations) {
    auto it = phase_of_address.find(a.address);
    if (it != phase_of_address.end()) a.phase = name(it->second);
  }
  set->open_phases.clear();
  for (uint32_t id : live.open_phases) set->open_phases.push_back(name(id));
}

}  // namespace

int64_t FirstEventNs(const v1::RankSummary& stream) {
  return SaturatingAdd(stream.first_ts_ns(), stream.has_clock() ? stream.clock().offset_ns() : 0);
}

int64_t LastEventNs(const v1::RankSummary& stream) {
  return SaturatingAdd(stream.last_ts_ns(), stream.has_clock() ? stream.clock().offset_ns() : 0);
}

bool ReadableSubprocess(const v1::RankSummary& stream, std::optional<int64_t> at_ns) {
  const v1::RankIdentity& id = stream.identity();
  if (!id.has_subprocess_of_rank() || id.started_the_rank() || stream.events_stored() == 0) {
    return false;
  }
  // Begun by the moment asked (its first event, in the collector's clock).
  return !at_ns.has_value() || FirstEventNs(stream) <= *at_ns;
}

absl::StatusOr<std::vector<uint32_t>> SubprocessStreams(const EventStore& store,
                                                        absl::string_view job_id,
                                                        const StreamSet& set) {
  absl::StatusOr<std::vector<v1::RankSummary>> streams = store.ListRanks(job_id);
  if (!streams.ok()) return streams.status();
  const auto counts = [&](const v1::RankSummary& s) { return ReadableSubprocess(s, set.at_ns); };
  // Without an attempt asked, each rank's latest that has subprocesses: a rerun's engines are
  // not compared with the same rank's first run's.
  std::map<int64_t, uint32_t> latest;  // launcher rank -> attempt
  for (const v1::RankSummary& s : *streams) {
    if (!counts(s)) continue;
    uint32_t& a = latest[s.identity().subprocess_of_rank()];
    a = std::max(a, s.identity().attempt());
  }
  std::vector<uint32_t> numbers;
  for (const v1::RankSummary& s : *streams) {
    if (!counts(s)) continue;
    const v1::RankIdentity& id = s.identity();
    if (id.attempt() != set.attempt.value_or(latest[id.subprocess_of_rank()])) continue;
    numbers.push_back(s.rank());
  }
  if (!numbers.empty()) return numbers;
  // Why none: what was left out, which `memtrace ranks` lists all the same.
  uint32_t parents = 0;
  int64_t first_begun = INT64_MAX;  // of those left out for beginning after the moment
  for (const v1::RankSummary& s : *streams) {
    const v1::RankIdentity& id = s.identity();
    if (!id.has_subprocess_of_rank() || s.events_stored() == 0) continue;
    if (id.started_the_rank()) {
      ++parents;
    } else if (!set.attempt.has_value() || id.attempt() == *set.attempt) {
      first_begun = std::min(first_begun, FirstEventNs(s));
    }
  }
  const std::string left_out =
      parents > 0 ? absl::StrCat("; ", parents,
                                 " process(es) that started their rank's, which are no engines, "
                                 "are left out")
                  : "";
  if (set.at_ns.has_value() && first_begun != INT64_MAX) {
    // As a rank read before its first event: the moment is out of the subprocesses' range.
    return absl::OutOfRangeError(
        absl::StrCat("job \"", job_id, "\" has no subprocess event at or before ",
                     analysis::FormatUtcMs(*set.at_ns),
                     set.attempt.has_value() ? absl::StrCat(" in attempt ", *set.attempt) : "",
                     "; the first began at ", analysis::FormatUtcMs(first_begun), left_out));
  }
  return absl::NotFoundError(absl::StrCat(
      "job \"", job_id, "\" has no subprocess with events",
      set.attempt.has_value() ? absl::StrCat(" in attempt ", *set.attempt) : "",
      " (processes a rank started that inherited its RANK: memtrace ranks lists them)", left_out));
}

absl::StatusOr<analysis::JobTimeline> LoadJobTimeline(const EventStore& store,
                                                      absl::string_view job_id,
                                                      v1::TimelineAxis axis, RollupDetail detail,
                                                      StepWindows windows,
                                                      const StreamSet& streams) {
  return ReadWithFallback<analysis::TimelineBuilder>(store, job_id, axis, detail, windows, streams);
}

absl::StatusOr<analysis::JobStepMetrics> LoadJobStepMetrics(const EventStore& store,
                                                            absl::string_view job_id,
                                                            v1::TimelineAxis axis,
                                                            const StreamSet& streams) {
  return ReadWithFallback<analysis::StepMetricsBuilder>(store, job_id, axis, RollupDetail::kScalars,
                                                        StepWindows::kChosen, streams);
}

absl::Status ReplayPhases(const EventStore& store, absl::string_view job_id,
                          const LiveSnapshot& live, analysis::RankLiveSet* set) {
  const auto names = PhaseNames(live);
  const auto name = [&](uint32_t id) { return PhaseName(names, id); };
  // The event that made each allocation the set kept (host ones were left out).
  absl::flat_hash_map<uint64_t, uint64_t> seq_of_address;
  for (const auto& [address, a] : live.allocations) seq_of_address[address] = a.seq;
  absl::flat_hash_map<uint64_t, analysis::LiveAllocation*> by_seq;
  for (analysis::LiveAllocation& a : set->allocations) {
    auto it = seq_of_address.find(a.address);
    if (it != seq_of_address.end()) by_seq[it->second] = &a;
  }

  std::vector<uint32_t> open;
  uint64_t from = 1;
  while (from != 0 && from <= live.seq) {
    absl::StatusOr<StoredEvents> page =
        store.ReadEvents(job_id, live.key.rank, live.key.attempt, from, 1 << 16);
    if (!page.ok()) return page.status();
    for (const Event& e : page->events) {
      if (e.seq > live.seq) break;
      switch (e.kind) {
        case EventKind::kPhaseBegin:
          open.push_back(e.tag_id);
          break;
        case EventKind::kPhaseEnd:
          for (size_t i = open.size(); i > 0; --i) {
            if (open[i - 1] == e.tag_id) {
              open.erase(open.begin() + static_cast<ptrdiff_t>(i - 1));
              break;
            }
          }
          break;
        case EventKind::kAlloc:
        case EventKind::kVmmMap:
          if (!open.empty()) {
            auto it = by_seq.find(e.seq);
            if (it != by_seq.end()) it->second->phase = name(open.back());
          }
          break;
        default:
          break;
      }
    }
    if (page->events.empty()) break;
    from = page->next_seq;
  }
  set->open_phases.clear();
  for (uint32_t id : open) set->open_phases.push_back(name(id));
  return absl::OkStatus();
}

absl::StatusOr<LoadedLiveSet> LoadLiveSet(const EventStore& store, absl::string_view job_id,
                                          uint32_t rank, std::optional<uint32_t> attempt,
                                          const LivePoint& point, bool with_phases) {
  absl::StatusOr<LiveSnapshot> live = store.LiveAllocations(job_id, rank, attempt, point);
  if (!live.ok()) return live.status();
  LoadedLiveSet out;
  out.set = analysis::LiveSetFromProto(ToLiveAt(*live));
  // The analyses line ranks up in the collector's clock (live_set.h); the store keeps each
  // rank's own.
  out.set.at_ns = SaturatingAdd(out.set.at_ns, live->clock_offset_ns);
  for (analysis::LiveAllocation& a : out.set.allocations) {
    a.ts_ns = SaturatingAdd(a.ts_ns, live->clock_offset_ns);
  }
  out.live_bytes = live->live_bytes;
  out.oom_requested_bytes = live->oom_requested_bytes;
  for (const StringDef& d : live->strings) {
    if (d.id == 0) continue;
    if (d.id == live->oom_tag_id) out.oom_tag = d.value;
    if (d.id == live->oom_source_id) out.oom_source = d.value;
  }
  out.seq = live->seq;
  if (with_phases) {
    if (live->allocation_phases_known) {
      PhasesFromSnapshot(*live, &out.set);
    } else if (NamesAPhase(*live)) {
      if (absl::Status s = ReplayPhases(store, job_id, *live, &out.set); !s.ok()) return s;
    }
  }
  return out;
}

}  // namespace memtrace::collector
