#include "query/export/live_series.h"

#include <algorithm>
#include <cstddef>
#include <optional>

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

void LiveSeriesBuilder::Ended(uint32_t phase_id, const collector::PhaseNesting::Ended& ended,
                              int64_t end_ns) {
  if (ended.what != collector::PhaseNesting::Ended::What::kEndedARun) return;
  const int64_t begin = begins_ns_[ended.index];
  begins_ns_.erase(begins_ns_.begin() + static_cast<std::ptrdiff_t>(ended.index));
  if (phases_.size() < kMaxPhaseSlices) {
    phases_.push_back({phase_id, begin, std::max(begin, end_ns), /*open=*/false});
  } else {
    ++phases_dropped_;
  }
}

std::vector<PhaseSlice> LiveSeriesBuilder::TakePhases() {
  for (size_t i = 0; i < begins_ns_.size(); ++i) {
    if (phases_.size() >= kMaxPhaseSlices) {
      ++phases_dropped_;
      continue;
    }
    phases_.push_back(
        {nesting_.open()[i], begins_ns_[i], std::max(begins_ns_[i], last_ts_ns_), /*open=*/true});
  }
  nesting_ = collector::PhaseNesting();
  begins_ns_.clear();
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
      nesting_.Loss();
      return;
    case EventKind::kPhaseBegin: {
      std::optional<collector::PhaseNesting::Ended> ended_first;
      const bool opened = nesting_.Begin(e.tag_id, &ended_first);
      if (ended_first.has_value()) Ended(e.tag_id, *ended_first, e.ts_ns);
      if (opened) begins_ns_.push_back(e.ts_ns);
      return;
    }
    case EventKind::kPhaseEnd:
      Ended(e.tag_id, nesting_.End(e.tag_id), e.ts_ns);
      return;
    case EventKind::kOom:
      ooms_.push_back({e.ts_ns, e.bytes, e.tag_id, e.source_id});
      return;
    default:
      return;
  }
}

}  // namespace memtrace::exporter
