#include "collector/server/timeline_cache.h"

#include <algorithm>
#include <utility>

#include "collector/server/analysis_loader.h"

namespace memtrace::collector {

template <typename T, typename Load>
absl::StatusOr<std::shared_ptr<const T>> TimelineCache::GetOrLoad(const EventStore& store,
                                                                   absl::string_view job_id,
                                                                   v1::TimelineAxis axis,
                                                                   Kind kind, Load load) {
  // The version is read before the rollups: a write landing in between makes the entry look
  // older than its data, so the next call reloads, never the reverse.
  absl::StatusOr<std::vector<v1::RankSummary>> ranks = store.ListRanks(job_id);
  if (!ranks.ok()) return ranks.status();
  Version version;
  version.reserve(ranks->size());
  for (const v1::RankSummary& r : *ranks) {
    // A rank's subprocess is in no cached timeline (VisitRollups leaves it out): a running
    // engine's every batch would otherwise reload the job.
    if (r.identity().has_subprocess_of_rank()) continue;
    version.emplace_back(r.rank(), r.identity().attempt(), r.durable_seq(), r.connected());
  }
  std::sort(version.begin(), version.end());
  // Which held kinds answer this call, and which a new entry of this kind supersedes.
  const auto serves = [kind](Kind held) {
    return held == kind || (kind == Kind::kScalarsTimeline && held == Kind::kFullTimeline);
  };
  const auto superseded = [kind](Kind held) {
    return held == kind || (kind == Kind::kFullTimeline && held == Kind::kScalarsTimeline);
  };
  {
    absl::MutexLock lock(&mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->job_id != job_id || it->axis != axis) {
        ++it;
        continue;
      }
      if (it->version != version) {
        it = entries_.erase(it);
        continue;
      }
      if (!serves(it->kind)) {
        ++it;
        continue;
      }
      entries_.splice(entries_.begin(), entries_, it);
      ++hits_;
      return std::static_pointer_cast<const T>(entries_.front().value);
    }
  }
  absl::StatusOr<T> loaded = load();
  if (!loaded.ok()) return loaded.status();
  auto value = std::make_shared<const T>(std::move(*loaded));
  absl::MutexLock lock(&mu_);
  ++loads_;
  // A concurrent load of the same job may have inserted first; keep one entry per kind, the
  // newest, and drop a scalars entry once the full one is there.
  entries_.remove_if([&](const Entry& e) {
    return e.job_id == job_id && e.axis == axis && superseded(e.kind);
  });
  if (max_jobs_ > 0) {
    entries_.push_front(Entry{std::string(job_id), axis, kind, std::move(version), value});
    while (entries_.size() > max_jobs_) entries_.pop_back();
  }
  return value;
}

absl::StatusOr<std::shared_ptr<const analysis::JobTimeline>> TimelineCache::Get(
    const EventStore& store, absl::string_view job_id, v1::TimelineAxis axis,
    RollupDetail detail) {
  return GetOrLoad<analysis::JobTimeline>(
      store, job_id, axis,
      detail == RollupDetail::kFull ? Kind::kFullTimeline : Kind::kScalarsTimeline,
      [&] { return LoadJobTimeline(store, job_id, axis, detail); });
}

absl::StatusOr<std::shared_ptr<const analysis::JobTimeline>> TimelineCache::GetUnwindowed(
    const EventStore& store, absl::string_view job_id, v1::TimelineAxis axis) {
  return GetOrLoad<analysis::JobTimeline>(store, job_id, axis, Kind::kUnwindowedTimeline, [&] {
    return LoadJobTimeline(store, job_id, axis, RollupDetail::kFull, StepWindows::kNone);
  });
}

absl::StatusOr<std::shared_ptr<const analysis::JobStepMetrics>> TimelineCache::GetStepMetrics(
    const EventStore& store, absl::string_view job_id, v1::TimelineAxis axis) {
  return GetOrLoad<analysis::JobStepMetrics>(
      store, job_id, axis, Kind::kStepMetrics,
      [&] { return LoadJobStepMetrics(store, job_id, axis); });
}

uint64_t TimelineCache::loads() const {
  absl::MutexLock lock(&mu_);
  return loads_;
}

uint64_t TimelineCache::hits() const {
  absl::MutexLock lock(&mu_);
  return hits_;
}

}  // namespace memtrace::collector
