#include "query/export/live_series.h"

#include <algorithm>
#include <cstddef>

namespace memtrace::exporter {
namespace {

// The bucket of `ts`, clamped to the grid.
int64_t BucketOf(int64_t ts, const Bucketing& b) {
  if (ts <= b.origin_ns) return 0;
  // ts - origin > 0 may not fit in int64_t when origin is negative: compare in uint64_t.
  const uint64_t since = static_cast<uint64_t>(ts) - static_cast<uint64_t>(b.origin_ns);
  const uint64_t bucket = since / static_cast<uint64_t>(b.width_ns);
  const uint64_t last = static_cast<uint64_t>(std::max<int64_t>(1, b.count) - 1);
  return static_cast<int64_t>(std::min(bucket, last));
}

}  // namespace

void BucketedSeries::Add(int64_t ts_ns, uint64_t bytes) {
  SeriesPoint p{ts_ns, bytes};
  if (bucketing_.width_ns <= 0) {
    if (points_.empty() || points_.back().bytes != bytes) points_.push_back(p);
    return;
  }
  const int64_t bucket = BucketOf(ts_ns, bucketing_);
  if (open_ && bucket > bucket_) Flush();
  if (!open_) {
    open_ = true;
    bucket_ = bucket;
    min_ = max_ = last_ = p;
    return;
  }
  if (bytes < min_.bytes) min_ = p;
  if (bytes > max_.bytes) max_ = p;
  last_ = p;
}

void BucketedSeries::Flush() {
  if (!open_) return;
  SeriesPoint keep[3] = {min_, max_, last_};
  std::sort(std::begin(keep), std::end(keep),
            [](const SeriesPoint& a, const SeriesPoint& b) { return a.ts_ns < b.ts_ns; });
  for (const SeriesPoint& p : keep) {
    if (!points_.empty() && points_.back() == p) continue;
    if (!points_.empty() && points_.back().ts_ns == p.ts_ns) {
      points_.back() = p;  // one value per instant: the later event's
      continue;
    }
    points_.push_back(p);
  }
  open_ = false;
}

std::vector<SeriesPoint> BucketedSeries::Finish() {
  Flush();
  std::vector<SeriesPoint> out;
  out.swap(points_);
  return out;
}

void LiveSeriesBuilder::EndPhase(size_t open_index, int64_t end_ns) {
  const auto [id, begin] = open_phases_[open_index];
  if (phases_.size() < kMaxPhaseSlices) {
    phases_.push_back({id, begin, std::max(begin, end_ns), /*open=*/false});
  } else {
    ++phases_dropped_;
  }
  open_phases_.erase(open_phases_.begin() + static_cast<std::ptrdiff_t>(open_index));
  if (open_phases_.empty()) phases_after_loss_ = false;
}

std::vector<PhaseSlice> LiveSeriesBuilder::TakePhases() {
  for (const auto& [id, begin] : open_phases_) {
    if (phases_.size() >= kMaxPhaseSlices) {
      ++phases_dropped_;
      continue;
    }
    phases_.push_back({id, begin, std::max(begin, last_ts_ns_), /*open=*/true});
  }
  open_phases_.clear();
  return std::move(phases_);
}

void LiveSeriesBuilder::Add(const Event& e) {
  last_ts_ns_ = std::max(last_ts_ns_, e.ts_ns);
  switch (e.kind) {
    case EventKind::kAlloc:
    case EventKind::kVmmMap: {
      auto& set = e.kind == EventKind::kAlloc ? allocations_ : mappings_;
      // As the collector: an allocation over a live address replaces it, whatever its kind; one
      // of a kind left out of live bytes (host memory) counts 0 of them.
      const uint64_t bytes = LeftOutOfLiveBytes(e.memory_kind) ? 0 : e.bytes;
      auto [it, inserted] = set.try_emplace(e.address, bytes);
      if (inserted && bytes == 0) return;
      if (!inserted) {
        live_bytes_ -= it->second;
        it->second = bytes;
      }
      live_bytes_ += bytes;
      live_series_.Add(e.ts_ns, live_bytes_);
      return;
    }
    case EventKind::kFree:
    case EventKind::kVmmUnmap: {
      auto& set = e.kind == EventKind::kFree ? allocations_ : mappings_;
      auto it = set.find(e.address);
      if (it == set.end()) return;  // never seen
      const uint64_t bytes = it->second;
      set.erase(it);
      if (bytes == 0) return;  // left out of live bytes
      live_bytes_ -= bytes;
      live_series_.Add(e.ts_ns, live_bytes_);
      return;
    }
    case EventKind::kDeviceSample:
      used_series_.Add(e.ts_ns, e.bytes);
      return;
    case EventKind::kLoss:
      if (!open_phases_.empty()) phases_after_loss_ = true;
      return;
    case EventKind::kPhaseBegin: {
      if (phases_after_loss_) {
        // As RankState: an END of the open run, which a BEGIN ignored for depth takes first.
        for (size_t i = open_phases_.size(); i-- > 0;) {
          if (open_phases_[i].first != e.tag_id) continue;
          if (auto ignored = ignored_phases_.find(e.tag_id); ignored != ignored_phases_.end()) {
            if (--ignored->second == 0) ignored_phases_.erase(ignored);
          } else {
            EndPhase(i, e.ts_ns);
          }
          break;
        }
      }
      if (open_phases_.size() >= kMaxOpenPhases) {
        ++ignored_phases_[e.tag_id];
        return;
      }
      open_phases_.emplace_back(e.tag_id, e.ts_ns);
      return;
    }
    case EventKind::kPhaseEnd: {
      if (auto ignored = ignored_phases_.find(e.tag_id); ignored != ignored_phases_.end()) {
        if (--ignored->second == 0) ignored_phases_.erase(ignored);
        return;
      }
      // The innermost open run of that phase; an END with none open changes nothing.
      for (size_t i = open_phases_.size(); i-- > 0;) {
        if (open_phases_[i].first != e.tag_id) continue;
        EndPhase(i, e.ts_ns);
        break;
      }
      return;
    }
    case EventKind::kOom:
      ooms_.push_back({e.ts_ns, e.bytes, e.tag_id, e.source_id});
      return;
    default:
      return;
  }
}

}  // namespace memtrace::exporter
