// The Analysis service's cache of converted job timelines. Reading a long job's rollups from
// RocksDB and converting them costs far more than any analysis over them (8 ranks x 2000 steps:
// ~60-80 ms against 1-3 ms, see analysis_bench), and the usual session asks several questions of
// the same job. An entry is valid while none of the job's streams stored anything new: its
// version is every stream's (rank, attempt, durable_seq, connected) from EventStore::ListRanks,
// one small read per call. A job still being ingested is therefore reloaded when it changed,
// never served stale beyond the write in flight; and when a stream's agent went away, whose last
// row is then no longer in progress (RankTimeline::in_progress).
#ifndef MEMTRACE_COLLECTOR_SERVER_TIMELINE_CACHE_H_
#define MEMTRACE_COLLECTOR_SERVER_TIMELINE_CACHE_H_

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "collector/store/event_store.h"
#include "proto/memtrace/v1/query.pb.h"
#include "query/analysis/step_metrics.h"
#include "query/analysis/timeline.h"

namespace memtrace::collector {

class TimelineCache {
 public:
  // Keeps at most `max_jobs` entries (a job's timeline on one axis at one detail, or its step
  // metrics), dropping the least recently used.
  explicit TimelineCache(size_t max_jobs = 4) : max_jobs_(max_jobs) {}

  // The timeline LoadJobTimeline(store, job_id, axis, detail) returns, from the cache when the
  // job did not change since it was loaded (a full timeline serves a kScalars call too). Errors
  // as LoadJobTimeline. Thread-safe; the returned timeline is immutable and stays valid after
  // eviction.
  absl::StatusOr<std::shared_ptr<const analysis::JobTimeline>> Get(
      const EventStore& store, absl::string_view job_id, v1::TimelineAxis axis,
      RollupDetail detail = RollupDetail::kFull);

  // LoadJobTimeline(store, job_id, axis, kFull, StepWindows::kNone): time buckets (of a job
  // without step markers, or asked for) as stored, for compare to put two jobs in one window.
  // An entry of its own: compare read both jobs from RocksDB again on every call.
  absl::StatusOr<std::shared_ptr<const analysis::JobTimeline>> GetUnwindowed(
      const EventStore& store, absl::string_view job_id,
      v1::TimelineAxis axis = v1::TIMELINE_AXIS_STEP);

  // The same for LoadJobStepMetrics, `diverged`'s columns: an entry of its own.
  absl::StatusOr<std::shared_ptr<const analysis::JobStepMetrics>> GetStepMetrics(
      const EventStore& store, absl::string_view job_id, v1::TimelineAxis axis);

  // Loads that found no valid entry, and calls answered from the cache (for tests and logs).
  uint64_t loads() const;
  uint64_t hits() const;

 private:
  // (rank, attempt, durable_seq, connected) of every stream, sorted.
  using Version = std::vector<std::tuple<uint32_t, uint32_t, uint64_t, bool>>;
  // What an entry holds. A full timeline also answers a scalars call.
  enum class Kind { kFullTimeline, kScalarsTimeline, kUnwindowedTimeline, kStepMetrics };
  struct Entry {
    std::string job_id;
    v1::TimelineAxis axis;
    Kind kind;
    Version version;
    std::shared_ptr<const void> value;  // a JobTimeline or a JobStepMetrics, as `kind` says
  };

  // The entry of (job_id, axis) that serves `kind`, or load() stored as a new one.
  template <typename T, typename Load>
  absl::StatusOr<std::shared_ptr<const T>> GetOrLoad(const EventStore& store,
                                                      absl::string_view job_id,
                                                      v1::TimelineAxis axis, Kind kind,
                                                      Load load);

  const size_t max_jobs_;
  mutable absl::Mutex mu_;
  std::list<Entry> entries_ ABSL_GUARDED_BY(mu_);  // most recently used first
  uint64_t loads_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_SERVER_TIMELINE_CACHE_H_
