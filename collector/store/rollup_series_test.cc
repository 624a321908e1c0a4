#include "collector/store/rollup_series.h"

#include <limits>
#include <vector>

#include "collector/store/records.pb.h"
#include "gtest/gtest.h"

namespace memtrace::collector {
namespace {

v1::StepRollup Row(int64_t step) {
  v1::StepRollup r;
  r.set_step(step);
  r.set_start_ns(step * 1000);
  r.set_end_ns(step * 1000 + 999);
  r.set_start_bytes(1);
  r.set_floor_bytes(2 + step);
  r.set_peak_bytes(3);
  r.set_end_bytes(4);
  r.set_allocs(5);
  r.set_frees(6);
  r.set_alloc_bytes(7);
  r.set_free_bytes(8);
  r.set_device_used_max(9);
  r.set_device_total(10);
  r.set_host_rss_max(11);
  r.set_ooms(12);
  r.set_oom_requested_bytes(13);
  r.set_events_lost(14);
  r.set_pool_reserved_bytes(15);
  r.set_live_at_device_used_max(16 + step);
  r.set_peak_ns(step * 1000 + 500);
  for (uint32_t id : {3u, 101u}) {
    v1::GroupBytes* k = r.add_by_memory_kind();
    k->set_id(id);
    k->set_live_bytes(id * 2);
    k->set_peak_bytes(id * 3);
  }
  v1::GroupBytes* t = r.add_by_tag();
  t->set_id(1);
  t->set_live_bytes(100);
  r.add_by_source()->set_id(2);
  r.add_by_phase()->set_id(3);
  return r;
}

std::vector<v1::StepRollup> Read(const std::string& bytes) {
  std::vector<v1::StepRollup> out;
  v1::StepRollup scratch;
  EXPECT_TRUE(ForEachSeriesRow(bytes, &scratch, [&](const v1::StepRollup& r) {
                out.push_back(r);
              }).ok());
  return out;
}

TEST(RollupSeriesTest, SegmentsAre64KeysFloorDivided) {
  EXPECT_EQ(SeriesSegmentOf(0), 0);
  EXPECT_EQ(SeriesSegmentOf(63), 0);
  EXPECT_EQ(SeriesSegmentOf(64), 1);
  EXPECT_EQ(SeriesSegmentOf(-1), -1);
  EXPECT_EQ(SeriesSegmentOf(-64), -1);
  EXPECT_EQ(SeriesSegmentOf(-65), -2);
}

TEST(RollupSeriesTest, RowsComeBackAsTheirScalarPartInKeyOrder) {
  SeriesSegment seg;
  for (int64_t step : {5, 1, 3}) seg.Put(Row(step));
  EXPECT_EQ(seg.rows(), 3u);
  const std::vector<v1::StepRollup> rows = Read(seg.Serialize());
  ASSERT_EQ(rows.size(), 3u);
  for (size_t i = 0; i < rows.size(); ++i) {
    v1::StepRollup want;
    CopyScalarPart(Row(std::vector<int64_t>{1, 3, 5}[i]), &want);
    EXPECT_EQ(rows[i].SerializeAsString(), want.SerializeAsString()) << i;
    EXPECT_EQ(rows[i].by_memory_kind_size(), 2);
    EXPECT_TRUE(rows[i].by_tag().empty());
    EXPECT_TRUE(rows[i].by_source().empty());
    EXPECT_TRUE(rows[i].by_phase().empty());
  }
}

TEST(RollupSeriesTest, APutOfAnExistingKeyReplacesItAndParseKeepsEverything) {
  SeriesSegment seg;
  seg.Put(Row(7));
  v1::StepRollup again = Row(7);
  again.set_floor_bytes(777);
  again.clear_by_memory_kind();
  seg.Put(again);
  absl::StatusOr<SeriesSegment> parsed = SeriesSegment::Parse(seg.Serialize());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  parsed->Put(Row(8));
  const std::vector<v1::StepRollup> rows = Read(parsed->Serialize());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].floor_bytes(), 777u);
  EXPECT_TRUE(rows[0].by_memory_kind().empty());
  EXPECT_EQ(rows[1].floor_bytes(), 10u);
}

TEST(RollupSeriesTest, ValuesThatFallOrSitAtTheLimitsSurviveTheDifferences) {
  SeriesSegment seg;
  const uint64_t kMax = std::numeric_limits<uint64_t>::max();
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  std::vector<v1::StepRollup> want;
  for (int64_t step : {-70, -3, 0, 9}) {
    v1::StepRollup r = Row(step);
    r.set_start_ns(step == 0 ? kMin : std::numeric_limits<int64_t>::max() - step * step);
    r.set_floor_bytes(step == -3 ? kMax : static_cast<uint64_t>(step + 100));  // up, then down
    r.set_device_total(step == 0 ? 0 : kMax - 1);
    r.mutable_by_memory_kind(1)->set_live_bytes(step == 9 ? 0 : kMax);
    if (step == -3) r.clear_by_memory_kind();  // a row without kinds between rows with them
    seg.Put(r);
    want.emplace_back();
    CopyScalarPart(r, &want.back());
  }
  const std::vector<v1::StepRollup> rows = Read(seg.Serialize());
  ASSERT_EQ(rows.size(), want.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].SerializeAsString(), want[i].SerializeAsString()) << i;
  }
}

TEST(RollupSeriesTest, SegmentsWrittenBeforeDifferencesStillRead) {
  RollupSeries old;  // deltas unset: every entry is its value
  for (int64_t step : {4, 6}) {
    old.add_key(step);
    old.add_start_ns(step * 1'000'000'000);
    old.add_end_ns(step * 1'000'000'000 + 5);
    old.add_start_bytes(0);
    old.add_floor_bytes(1000 + step);
    old.add_peak_bytes(0);
    old.add_end_bytes(0);
    old.add_allocs(0);
    old.add_frees(0);
    old.add_alloc_bytes(0);
    old.add_free_bytes(0);
    old.add_device_used_max(0);
    old.add_device_total(80);
    old.add_host_rss_max(0);
    old.add_ooms(0);
    old.add_oom_requested_bytes(0);
    old.add_events_lost(0);
    old.add_pool_reserved_bytes(0);
    old.add_memory_kinds(1);
    old.add_kind_id(3);
    old.add_kind_live(step);
    old.add_kind_peak(step);
  }
  const std::vector<v1::StepRollup> rows = Read(old.SerializeAsString());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].step(), 6);
  EXPECT_EQ(rows[1].start_ns(), 6'000'000'000);
  EXPECT_EQ(rows[1].floor_bytes(), 1006u);
  EXPECT_EQ(rows[1].device_total(), 80u);
  EXPECT_EQ(rows[1].by_memory_kind(0).live_bytes(), 6u);
  EXPECT_EQ(rows[1].live_at_device_used_max(), 0u);  // a later column: absent, read as 0
  // Rewritten at the next Put, it is stored with differences.
  absl::StatusOr<SeriesSegment> parsed = SeriesSegment::Parse(old.SerializeAsString());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  RollupSeries rewritten;
  ASSERT_TRUE(rewritten.ParseFromString(parsed->Serialize()));
  EXPECT_TRUE(rewritten.deltas());
  EXPECT_EQ(Read(parsed->Serialize())[1].SerializeAsString(), rows[1].SerializeAsString());
}

// A segment written (with differences) before live_at_device_used_max and peak_ns existed has
// no entries for them: its rows read as before, with 0 there.
TEST(RollupSeriesTest, SegmentsWrittenBeforeALaterColumnStillRead) {
  SeriesSegment seg;
  for (int64_t step : {1, 2, 3}) seg.Put(Row(step));
  RollupSeries without;
  ASSERT_TRUE(without.ParseFromString(seg.Serialize()));
  ASSERT_EQ(without.live_at_device_used_max_size(), 3);
  without.clear_live_at_device_used_max();
  without.clear_peak_ns();
  const std::vector<v1::StepRollup> rows = Read(without.SerializeAsString());
  const std::vector<v1::StepRollup> full = Read(seg.Serialize());
  ASSERT_EQ(rows.size(), 3u);
  ASSERT_EQ(full.size(), 3u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(full[i].live_at_device_used_max(), 17u + i);
    EXPECT_EQ(rows[i].live_at_device_used_max(), 0u);
    EXPECT_EQ(full[i].peak_ns(), static_cast<int64_t>(1000 * (i + 1) + 500));
    EXPECT_EQ(rows[i].peak_ns(), 0);
    v1::StepRollup expected = full[i];
    expected.clear_live_at_device_used_max();
    expected.clear_peak_ns();
    EXPECT_EQ(rows[i].SerializeAsString(), expected.SerializeAsString()) << i;
  }
  // A column of another length than the rows' is still inconsistent.
  without.add_live_at_device_used_max(1);
  v1::StepRollup scratch;
  EXPECT_FALSE(
      ForEachSeriesRow(without.SerializeAsString(), &scratch, [](const v1::StepRollup&) {}).ok());
}

TEST(RollupSeriesTest, DifferencesMakeARealisticSegmentSmaller) {
  // 64 steps of a 60-80 GiB rank: byte counts move by a few MiB a step, times by a second.
  SeriesSegment seg;
  RollupSeries absolute;
  for (int64_t step = 0; step < 64; ++step) {
    v1::StepRollup r = Row(step);
    r.set_start_ns(1'800'000'000'000'000'000 + step * 1'000'000'000);
    r.set_end_ns(r.start_ns() + 999'000'000);
    const uint64_t gib = uint64_t{1} << 30;
    r.set_floor_bytes(60 * gib + static_cast<uint64_t>(step % 3) * (4 << 20));
    r.set_peak_bytes(80 * gib - static_cast<uint64_t>(step % 5) * (2 << 20));
    r.set_device_total(141 * gib);
    seg.Put(r);
    absolute.add_key(step);
    absolute.add_start_ns(r.start_ns());
    absolute.add_end_ns(r.end_ns());
    absolute.add_floor_bytes(r.floor_bytes());
    absolute.add_peak_bytes(r.peak_bytes());
    absolute.add_device_total(r.device_total());
  }
  RollupSeries deltas;
  ASSERT_TRUE(deltas.ParseFromString(seg.Serialize()));
  // The columns above, as stored with and without differences.
  RollupSeries same_columns;
  same_columns.set_deltas(true);
  *same_columns.mutable_key() = deltas.key();
  *same_columns.mutable_start_ns() = deltas.start_ns();
  *same_columns.mutable_end_ns() = deltas.end_ns();
  *same_columns.mutable_floor_bytes() = deltas.floor_bytes();
  *same_columns.mutable_peak_bytes() = deltas.peak_bytes();
  *same_columns.mutable_device_total() = deltas.device_total();
  EXPECT_LT(same_columns.ByteSizeLong(), absolute.ByteSizeLong() * 6 / 10)
      << same_columns.ByteSizeLong() << " vs " << absolute.ByteSizeLong();
}

TEST(RollupSeriesTest, InconsistentBytesAreDataLoss) {
  v1::StepRollup scratch;
  auto ignore = [](const v1::StepRollup&) {};
  EXPECT_EQ(ForEachSeriesRow("\xff\xff", &scratch, ignore).code(), absl::StatusCode::kDataLoss);
  RollupSeries short_column;
  short_column.add_key(1);
  EXPECT_EQ(ForEachSeriesRow(short_column.SerializeAsString(), &scratch, ignore).code(),
            absl::StatusCode::kDataLoss);
  SeriesSegment seg;
  seg.Put(Row(1));
  seg.Put(Row(2));
  RollupSeries s;
  ASSERT_TRUE(s.ParseFromString(seg.Serialize()));
  ASSERT_TRUE(s.deltas());
  s.set_key(1, 0);  // the second key is the first again
  EXPECT_EQ(ForEachSeriesRow(s.SerializeAsString(), &scratch, ignore).code(),
            absl::StatusCode::kDataLoss);
  s.set_key(1, -1);  // or before it
  EXPECT_EQ(ForEachSeriesRow(s.SerializeAsString(), &scratch, ignore).code(),
            absl::StatusCode::kDataLoss);
  s.set_deltas(false);
  s.set_key(0, 2);
  s.set_key(1, 1);  // keys no longer ascend (stored as values)
  EXPECT_EQ(ForEachSeriesRow(s.SerializeAsString(), &scratch, ignore).code(),
            absl::StatusCode::kDataLoss);
  ASSERT_TRUE(s.ParseFromString(seg.Serialize()));
  s.set_memory_kinds(0, 5);  // more kinds than there are
  EXPECT_EQ(ForEachSeriesRow(s.SerializeAsString(), &scratch, ignore).code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace memtrace::collector
