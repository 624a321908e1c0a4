#include "collector/store/rollup_series.h"

#include "absl/strings/str_cat.h"
#include "collector/store/records.pb.h"

namespace memtrace::collector {

namespace {

// The per-row scalar fields of StepRollup, which RollupSeries has as columns of the same names:
// one list for every direction, so that a field added to one cannot be missed by another.
#define MEMTRACE_SERIES_SCALARS(X)                                                          \
  X(start_ns) X(end_ns) X(start_bytes) X(floor_bytes) X(peak_bytes) X(end_bytes) X(allocs) \
  X(frees) X(alloc_bytes) X(free_bytes) X(device_used_max) X(device_total) X(host_rss_max) \
  X(ooms) X(oom_requested_bytes) X(events_lost) X(pool_reserved_bytes)
// Scalars added after segments were first written: an older segment has no entries for them
// (read as zeros); a newer one has one per row like the columns above.
#define MEMTRACE_SERIES_LATER_SCALARS(X) X(live_at_device_used_max) X(peak_ns) X(peak_seq)

// Differences between consecutive column entries (RollupSeries.deltas), wrapping: a column's
// values may fall as well as rise. sint64 columns are ZigZag-coded by protobuf, uint64 ones here.
int64_t Delta(int64_t value, int64_t prev) {
  return static_cast<int64_t>(static_cast<uint64_t>(value) - static_cast<uint64_t>(prev));
}
uint64_t Delta(uint64_t value, uint64_t prev) {
  const int64_t d = static_cast<int64_t>(value - prev);
  return (static_cast<uint64_t>(d) << 1) ^ static_cast<uint64_t>(d >> 63);
}
int64_t Undelta(int64_t delta, int64_t prev) {
  return static_cast<int64_t>(static_cast<uint64_t>(prev) + static_cast<uint64_t>(delta));
}
uint64_t Undelta(uint64_t zigzag, uint64_t prev) {
  const uint64_t d = (zigzag >> 1) ^ (~(zigzag & 1) + 1);
  return prev + d;
}

absl::Status Inconsistent(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("rollup series segment is inconsistent: ", what));
}

// Every column has one entry per row, and the memory-kind columns as many as the rows say.
absl::Status Check(const RollupSeries& s) {
  const int n = s.key_size();
  bool lengths_ok = s.memory_kinds_size() == n;
#define MEMTRACE_CHECK_LENGTH(f) lengths_ok &= s.f##_size() == n;
  MEMTRACE_SERIES_SCALARS(MEMTRACE_CHECK_LENGTH)
#undef MEMTRACE_CHECK_LENGTH
#define MEMTRACE_CHECK_LENGTH(f) lengths_ok &= s.f##_size() == n || s.f##_size() == 0;
  MEMTRACE_SERIES_LATER_SCALARS(MEMTRACE_CHECK_LENGTH)
#undef MEMTRACE_CHECK_LENGTH
  if (!lengths_ok) return Inconsistent("columns differ in length");
  uint64_t kinds = 0;
  for (uint32_t k : s.memory_kinds()) kinds += k;
  if (kinds != static_cast<uint64_t>(s.kind_id_size()) || s.kind_live_size() != s.kind_id_size() ||
      s.kind_peak_size() != s.kind_id_size()) {
    return Inconsistent("memory-kind columns do not add up");
  }
  for (int i = 1; i < n; ++i) {
    if (s.deltas() ? s.key(i) <= 0 : s.key(i) <= s.key(i - 1)) {
      return Inconsistent("keys do not ascend");
    }
  }
  return absl::OkStatus();
}

}  // namespace

int64_t SeriesSegmentOf(int64_t row_key) {
  int64_t q = row_key / kRowsPerSeriesSegment;
  if (row_key % kRowsPerSeriesSegment != 0 && row_key < 0) --q;
  return q;
}

void CopyScalarPart(const v1::StepRollup& row, v1::StepRollup* out) {
  out->Clear();
  out->set_step(row.step());
#define MEMTRACE_COPY(f) out->set_##f(row.f());
  MEMTRACE_SERIES_SCALARS(MEMTRACE_COPY)
  MEMTRACE_SERIES_LATER_SCALARS(MEMTRACE_COPY)
#undef MEMTRACE_COPY
  *out->mutable_by_memory_kind() = row.by_memory_kind();
}

absl::StatusOr<SeriesSegment> SeriesSegment::Parse(absl::string_view bytes) {
  SeriesSegment out;
  v1::StepRollup scratch;
  absl::Status s = ForEachSeriesRow(bytes, &scratch, [&](const v1::StepRollup& row) {
    out.rows_[row.step()] = row;
  });
  if (!s.ok()) return s;
  return out;
}

void SeriesSegment::Put(const v1::StepRollup& row) { CopyScalarPart(row, &rows_[row.step()]); }

std::string SeriesSegment::Serialize() const {
  std::string out;
  SerializeTo(&out);
  return out;
}

void SeriesSegment::SerializeTo(std::string* out) const {
  thread_local RollupSeries s;  // reused: Clear keeps its columns' capacity
  s.Clear();
  s.set_deltas(true);
  const v1::StepRollup zero;
  const v1::StepRollup* prev = &zero;
  int64_t prev_key = 0;
  uint64_t prev_live = 0, prev_peak = 0;
  for (const auto& [key, row] : rows_) {
    s.add_key(Delta(key, prev_key));
    prev_key = key;
#define MEMTRACE_ADD(f) s.add_##f(Delta(row.f(), prev->f()));
    MEMTRACE_SERIES_SCALARS(MEMTRACE_ADD)
    MEMTRACE_SERIES_LATER_SCALARS(MEMTRACE_ADD)
#undef MEMTRACE_ADD
    prev = &row;
    s.add_memory_kinds(static_cast<uint32_t>(row.by_memory_kind_size()));
    for (const v1::GroupBytes& k : row.by_memory_kind()) {
      s.add_kind_id(k.id());
      s.add_kind_live(Delta(k.live_bytes(), prev_live));
      s.add_kind_peak(Delta(k.peak_bytes(), prev_peak));
      prev_live = k.live_bytes();
      prev_peak = k.peak_bytes();
    }
  }
  s.SerializeToString(out);
}

absl::Status ForEachSeriesRow(absl::string_view bytes, v1::StepRollup* scratch,
                              const std::function<void(const v1::StepRollup&)>& fn) {
  thread_local RollupSeries s;  // reused: its columns keep their capacity
  if (!s.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Inconsistent(absl::StrCat(bytes.size(), " bytes do not parse"));
  }
  if (absl::Status c = Check(s); !c.ok()) return c;
  int kind = 0;
  if (!s.deltas()) {
    for (int i = 0; i < s.key_size(); ++i) {
      scratch->set_step(s.key(i));
#define MEMTRACE_SET(f) scratch->set_##f(s.f(i));
      MEMTRACE_SERIES_SCALARS(MEMTRACE_SET)
#undef MEMTRACE_SET
#define MEMTRACE_SET(f) scratch->set_##f(s.f##_size() == 0 ? 0 : s.f(i));
      MEMTRACE_SERIES_LATER_SCALARS(MEMTRACE_SET)
#undef MEMTRACE_SET
      // Clear() keeps the cleared elements for reuse: no allocation per row.
      scratch->mutable_by_memory_kind()->Clear();
      for (uint32_t k = 0; k < s.memory_kinds(i); ++k, ++kind) {
        v1::GroupBytes* g = scratch->add_by_memory_kind();
        g->set_id(s.kind_id(kind));
        g->set_live_bytes(s.kind_live(kind));
        g->set_peak_bytes(s.kind_peak(kind));
      }
      fn(*scratch);
    }
    return absl::OkStatus();
  }
  // Each row's values are the previous row's plus its entries: start from zero.
  scratch->Clear();
  uint64_t live = 0, peak = 0;
  for (int i = 0; i < s.key_size(); ++i) {
    scratch->set_step(Undelta(s.key(i), scratch->step()));
#define MEMTRACE_SET(f) scratch->set_##f(Undelta(s.f(i), scratch->f()));
    MEMTRACE_SERIES_SCALARS(MEMTRACE_SET)
#undef MEMTRACE_SET
#define MEMTRACE_SET(f) scratch->set_##f(s.f##_size() == 0 ? 0 : Undelta(s.f(i), scratch->f()));
    MEMTRACE_SERIES_LATER_SCALARS(MEMTRACE_SET)
#undef MEMTRACE_SET
    scratch->mutable_by_memory_kind()->Clear();
    for (uint32_t k = 0; k < s.memory_kinds(i); ++k, ++kind) {
      v1::GroupBytes* g = scratch->add_by_memory_kind();
      live = Undelta(s.kind_live(kind), live);
      peak = Undelta(s.kind_peak(kind), peak);
      g->set_id(s.kind_id(kind));
      g->set_live_bytes(live);
      g->set_peak_bytes(peak);
    }
    fn(*scratch);
  }
  return absl::OkStatus();
}

}  // namespace memtrace::collector
