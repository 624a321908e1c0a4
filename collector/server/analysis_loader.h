// What the Analysis service reads from the EventStore, in the analyses' plain form
// (query/analysis/timeline.h, live_set.h): a job's per-step rollups as a JobTimeline, and one
// rank's live set at a moment as a RankLiveSet. Conversion itself is query/analysis's
// rollup_convert; this module adds what only the store can answer: the fall-back to time buckets
// for jobs without step markers, the moment of a rank's OOM, and which phase each live allocation
// was made in (the store's live set does not keep it, so it is recovered from the stream's
// events).
#ifndef MEMTRACE_COLLECTOR_SERVER_ANALYSIS_LOADER_H_
#define MEMTRACE_COLLECTOR_SERVER_ANALYSIS_LOADER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collector/store/event_store.h"
#include "proto/memtrace/v1/query.pb.h"
#include "query/analysis/live_set.h"
#include "query/analysis/step_metrics.h"
#include "query/analysis/timeline.h"

namespace memtrace::collector {

// Reads `job_id`'s rollups on `axis` and converts them. On the step axis, a job none of whose
// ranks recorded a step marker (every rank has at most one step row) is read on the time axis
// instead: the returned timeline's time_axis says which one was used. On the time axis, asked
// for or fallen back to, buckets shorter than the job's steps come in windows of whole steps
// (bucket_windows.h: bucket_ns is the window's width). With
// RollupDetail::kScalars the steps' by_tag / by_source / by_phase stay empty (read from the
// series: much less to read). NOT_FOUND naming the job when the store does not know it or it
// has no ranks. Thread-safe (reads a store snapshot).
// kNone: the buckets as stored, for a caller that picks one window for two jobs.
enum class StepWindows { kChosen, kNone };
// Which of a job's streams a load reads: its ranks (the default), or its ranks' subprocesses
// (RankIdentity.subprocess_of_rank: an engine beside each trainer), each stream a "rank" of its
// own numbered as in `memtrace ranks`, those with events of `attempt` (their rank's), else of
// each rank's latest attempt that has any (with `at_ns`, that had begun by then: collector's
// clock): compared with each other, not with the ranks. A process that started its rank's
// (RankIdentity.started_the_rank: a trainer whose engine connected first) is left out: it is
// no engine, and its step markers would put every engine on the step axis, in one row each.
struct StreamSet {
  bool subprocesses = false;
  std::optional<uint32_t> attempt;
  std::optional<int64_t> at_ns;
};
absl::StatusOr<analysis::JobTimeline> LoadJobTimeline(const EventStore& store,
                                                      absl::string_view job_id,
                                                      v1::TimelineAxis axis,
                                                      RollupDetail detail = RollupDetail::kFull,
                                                      StepWindows windows = StepWindows::kChosen,
                                                      const StreamSet& streams = {});

// As LoadJobTimeline with kScalars, kept as the columns `diverged` compares (step_metrics.h):
// 40 bytes a rank-step instead of a StepPoint. Same fall-back and errors.
absl::StatusOr<analysis::JobStepMetrics> LoadJobStepMetrics(const EventStore& store,
                                                            absl::string_view job_id,
                                                            v1::TimelineAxis axis,
                                                            const StreamSet& streams = {});

// A stream's first and last event in the collector's clock: as stamped, shifted by the offset
// its agent measured (RankSummary.clock; 0 without one).
int64_t FirstEventNs(const v1::RankSummary& stream);
int64_t LastEventNs(const v1::RankSummary& stream);

// Whether a StreamSet of subprocesses may read `stream` at all, of whichever attempt: a rank's
// subprocess with events, not the process that started its rank's, begun by `at_ns` when given.
bool ReadableSubprocess(const v1::RankSummary& stream, std::optional<int64_t> at_ns);

// The stream numbers a StreamSet of subprocesses reads; NOT_FOUND when there are none.
absl::StatusOr<std::vector<uint32_t>> SubprocessStreams(const EventStore& store,
                                                        absl::string_view job_id,
                                                        const StreamSet& streams);

struct LoadedLiveSet {
  analysis::RankLiveSet set;
  // Device live bytes at the moment (host kinds excluded), as the store counts them.
  uint64_t live_bytes = 0;
  // For LivePoint::Kind::kFirstOom: the size the failed allocation asked for.
  uint64_t oom_requested_bytes = 0;
  // And its tag and call site ("" when it had none).
  std::string oom_tag;
  std::string oom_source;
  // The sequence number of the last event the set includes; 0 = none (a moment before the
  // rank's first event).
  uint64_t seq = 0;
};

// The live set of (job, rank, attempt) at `point` (attempt unset = the rank's latest), host
// allocations left out, its times (the moment's and the allocations') in the collector's clock. With `with_phases`, each allocation's phase (the innermost phase open
// when it was made) and the phases open at the moment are set too: from the live set, which
// keeps them; for a stream restored from a checkpoint older than that and whose string table
// names a phase, by ReplayPhases, which costs O(events of the rank). NOT_FOUND naming the job /
// rank when unknown, or (kFirstOom) when the rank recorded no OOM. Thread-safe.
absl::StatusOr<LoadedLiveSet> LoadLiveSet(const EventStore& store, absl::string_view job_id,
                                          uint32_t rank, std::optional<uint32_t> attempt,
                                          const LivePoint& point, bool with_phases);

// Sets the phase of each allocation of `set` (the live set of `live`, converted) and the phases
// open at `live`'s moment by replaying the stream's phase markers from its start up to it. What
// LoadLiveSet falls back to when the snapshot's allocations do not carry their phases; tests
// check the live set's own phases against it.
absl::Status ReplayPhases(const EventStore& store, absl::string_view job_id,
                          const LiveSnapshot& live, analysis::RankLiveSet* set);

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_SERVER_ANALYSIS_LOADER_H_
