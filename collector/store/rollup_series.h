// The "series" of a stream: the scalar part of its closed rollup rows (everything but the
// by_tag / by_source / by_phase lists), 64 rows to a RocksDB value in columns (RollupSeries in
// records.proto). Questions that compare ranks by one number per step (diverged, headroom,
// growth by rank) read these instead of the rows: at 1024 ranks x 200 steps that is 3,200
// small values instead of 204,800 rows of a few hundred bytes each, the bulk of a cold query's
// time (docs/PERFORMANCE.md). Pure: the store does the reading and writing.
#ifndef MEMTRACE_COLLECTOR_STORE_ROLLUP_SERIES_H_
#define MEMTRACE_COLLECTOR_STORE_ROLLUP_SERIES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/memtrace/v1/query.pb.h"

namespace memtrace::collector {

inline constexpr int64_t kRowsPerSeriesSegment = 64;

// The segment holding the row with step (or bucket) `row_key`: floor(row_key / 64).
int64_t SeriesSegmentOf(int64_t row_key);

// `row` without by_tag, by_source and by_phase.
void CopyScalarPart(const v1::StepRollup& row, v1::StepRollup* out);

// One segment's rows, for updating at ingest.
class SeriesSegment {
 public:
  SeriesSegment() = default;
  // A stored segment; DATA_LOSS when the bytes are not a consistent RollupSeries.
  static absl::StatusOr<SeriesSegment> Parse(absl::string_view bytes);

  // Keeps the scalar part of `row`, replacing a row with the same key (a step that went
  // backwards and closed again, as the rollups family overwrites it).
  void Put(const v1::StepRollup& row);
  std::string Serialize() const;
  // The same bytes into `out` (replacing its contents), which keeps its capacity: the store
  // rewrites a stream's current segment with every batch.
  void SerializeTo(std::string* out) const;
  size_t rows() const { return rows_.size(); }

 private:
  std::map<int64_t, v1::StepRollup> rows_;
};

// Calls fn for each row of a stored segment in key order, through `scratch` (reused: the
// message passed is valid only during the call). DATA_LOSS when the bytes are inconsistent.
absl::Status ForEachSeriesRow(absl::string_view bytes, v1::StepRollup* scratch,
                              const std::function<void(const v1::StepRollup&)>& fn);

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_STORE_ROLLUP_SERIES_H_
