#include "collector/store/rollup_series.h"

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
  s.set_key(1, 1);  // keys no longer ascend
  EXPECT_EQ(ForEachSeriesRow(s.SerializeAsString(), &scratch, ignore).code(),
            absl::StatusCode::kDataLoss);
  ASSERT_TRUE(s.ParseFromString(seg.Serialize()));
  s.set_memory_kinds(0, 5);  // more kinds than there are
  EXPECT_EQ(ForEachSeriesRow(s.SerializeAsString(), &scratch, ignore).code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace memtrace::collector
