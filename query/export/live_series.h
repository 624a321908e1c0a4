// Device live bytes and device-used samples over time, rebuilt from a rank's raw events for
// the Perfetto export's fine-grained counters. Live bytes follow the collector's rules
// (collector/rollup/rank_state.h): ALLOC/FREE of host kinds (pageable, pinned) are not device
// memory, VMM mappings are, an ALLOC over a live address replaces it, a FREE of an unknown
// address changes nothing.
//
// A rank with millions of events would make a trace too large to load, so points can be
// bucketed: within each bucket only the lowest and highest values (in time order) and the last
// one are kept, which preserves every peak and floor a viewer would look for.
#ifndef MEMTRACE_QUERY_EXPORT_LIVE_SERIES_H_
#define MEMTRACE_QUERY_EXPORT_LIVE_SERIES_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "collector/rollup/phase_nesting.h"
#include "proto/codec/event.h"

namespace memtrace::exporter {

struct SeriesPoint {
  int64_t ts_ns = 0;
  uint64_t bytes = 0;

  bool operator==(const SeriesPoint& o) const { return ts_ns == o.ts_ns && bytes == o.bytes; }
};

// One run of an NVTX phase (rollout, weight_sync, ...): PHASE_BEGIN to the matching PHASE_END,
// or to the rank's last event when it never ended (`open`).
struct PhaseSlice {
  uint32_t phase_id = 0;  // string id of the phase name
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  bool open = false;

  bool operator==(const PhaseSlice& o) const {
    return phase_id == o.phase_id && begin_ns == o.begin_ns && end_ns == o.end_ns && open == o.open;
  }
};

// An allocation that failed (an OOM event).
struct OomMark {
  int64_t ts_ns = 0;
  uint64_t requested_bytes = 0;
  uint32_t tag_id = 0;
  uint32_t source_id = 0;
};

// How points are bucketed: `count` buckets of `width_ns` from `origin_ns`. A point before the
// origin falls in the first bucket, one past the last bucket in the last, and one older than the
// open bucket (time going back) in the open one, so a series has at most `count` buckets, i.e.
// 3 * count points. width_ns <= 0: no buckets, every point whose value differs from the
// previous one is kept.
struct Bucketing {
  int64_t width_ns = 0;
  int64_t origin_ns = 0;
  int64_t count = 1;
};

// Reduces a stream of (time, value) points to min/max/last per time bucket.
class BucketedSeries {
 public:
  explicit BucketedSeries(Bucketing bucketing) : bucketing_(bucketing) {}
  void Add(int64_t ts_ns, uint64_t bytes);
  // Flushes the open bucket and returns the points in time order.
  std::vector<SeriesPoint> Finish();

 private:
  void Flush();

  const Bucketing bucketing_;
  std::vector<SeriesPoint> points_;
  bool open_ = false;
  int64_t bucket_ = 0;
  SeriesPoint min_, max_, last_;
};

// Feeds one rank's events (in sequence order) and yields its series. Not thread-safe.
class LiveSeriesBuilder {
 public:
  explicit LiveSeriesBuilder(Bucketing bucketing)
      : live_series_(bucketing), used_series_(bucketing) {}

  void Add(const Event& event);

  uint64_t live_bytes() const { return live_bytes_; }
  // Device live bytes after every memory event (bucketed).
  std::vector<SeriesPoint> TakeLive() { return live_series_.Finish(); }
  // DEVICE_SAMPLE "used" values (bucketed).
  std::vector<SeriesPoint> TakeDeviceUsed() { return used_series_.Finish(); }
  // Phase runs in the order they ended, those still open last (ended at the last event). At
  // most kMaxPhaseSlices; the rest are counted in phases_dropped(). Matched by the collector's
  // own rules (collector::PhaseNesting, which RankState keeps its phases by).
  std::vector<PhaseSlice> TakePhases();
  std::vector<OomMark> TakeOoms() { return std::move(ooms_); }
  uint64_t phases_dropped() const { return phases_dropped_; }

  static constexpr size_t kMaxPhaseSlices = 200'000;
  static constexpr size_t kMaxOpenPhases = collector::PhaseNesting::kMaxOpen;

 private:
  // Live bytes by address, allocations and VMM mappings apart as the collector keeps them (a
  // FREE never removes a mapping, nor an UNMAP an allocation). 0 bytes: an allocation of a kind
  // left out of live bytes (host memory), held so that a FREE of it changes nothing else.
  absl::flat_hash_map<uint64_t, uint64_t> allocations_;
  absl::flat_hash_map<uint64_t, uint64_t> mappings_;
  uint64_t live_bytes_ = 0;
  int64_t last_ts_ns_ = INT64_MIN;
  // A run PhaseNesting ended (or nothing, for the END of an ignored BEGIN or of nothing open).
  void Ended(uint32_t phase_id, const collector::PhaseNesting::Ended& ended, int64_t end_ns);

  collector::PhaseNesting nesting_;
  std::vector<int64_t> begins_ns_;  // when each of nesting_.open() began, in its order
  std::vector<PhaseSlice> phases_;
  uint64_t phases_dropped_ = 0;
  std::vector<OomMark> ooms_;
  BucketedSeries live_series_;
  BucketedSeries used_series_;
};

}  // namespace memtrace::exporter

#endif  // MEMTRACE_QUERY_EXPORT_LIVE_SERIES_H_
