#include "collector/server/timeline_cache.h"

#include <algorithm>
#include <utility>

#include "collector/server/analysis_loader.h"

namespace memtrace::collector {

absl::StatusOr<std::shared_ptr<const analysis::JobTimeline>> TimelineCache::Get(
    const EventStore& store, absl::string_view job_id, v1::TimelineAxis axis,
    RollupDetail detail) {
  // The version is read before the rollups: a write landing in between makes the entry look
  // older than its data, so the next call reloads, never the reverse.
  absl::StatusOr<std::vector<v1::RankSummary>> ranks = store.ListRanks(job_id);
  if (!ranks.ok()) return ranks.status();
  Version version;
  version.reserve(ranks->size());
  for (const v1::RankSummary& r : *ranks) {
    version.emplace_back(r.rank(), r.identity().attempt(), r.durable_seq());
  }
  std::sort(version.begin(), version.end());
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
      // A full timeline answers a scalars question too.
      if (it->detail == RollupDetail::kScalars && detail == RollupDetail::kFull) {
        ++it;
        continue;
      }
      entries_.splice(entries_.begin(), entries_, it);
      ++hits_;
      return entries_.front().timeline;
    }
  }
  absl::StatusOr<analysis::JobTimeline> loaded = LoadJobTimeline(store, job_id, axis, detail);
  if (!loaded.ok()) return loaded.status();
  auto timeline = std::make_shared<const analysis::JobTimeline>(std::move(*loaded));
  absl::MutexLock lock(&mu_);
  ++loads_;
  // A concurrent load of the same job may have inserted first; keep one entry per detail, the
  // newest, and drop a scalars entry once the full one is there.
  entries_.remove_if([&](const Entry& e) {
    return e.job_id == job_id && e.axis == axis &&
           (e.detail == detail || detail == RollupDetail::kFull);
  });
  if (max_jobs_ > 0) {
    entries_.push_front(Entry{std::string(job_id), axis, detail, std::move(version), timeline});
    while (entries_.size() > max_jobs_) entries_.pop_back();
  }
  return timeline;
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
