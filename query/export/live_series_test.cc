#include "query/export/live_series.h"

#include "gtest/gtest.h"

namespace memtrace::exporter {
namespace {

Event Mem(EventKind kind, int64_t ts, uint64_t address, uint64_t bytes,
          uint32_t memory_kind = kMemoryDevice) {
  Event e;
  e.kind = kind;
  e.ts_ns = ts;
  e.address = address;
  e.bytes = bytes;
  e.memory_kind = memory_kind;
  return e;
}

TEST(LiveSeriesTest, FollowsDeviceLiveBytesLikeTheCollector) {
  LiveSeriesBuilder b(Bucketing{});
  b.Add(Mem(EventKind::kAlloc, 1, 0x10, 100));
  b.Add(Mem(EventKind::kAlloc, 2, 0x20, 50, kMemoryPageable));  // host: not live bytes
  b.Add(Mem(EventKind::kVmmMap, 3, 0x30, 1000));
  b.Add(Mem(EventKind::kFree, 4, 0x99, 7));   // unknown address: no change
  b.Add(Mem(EventKind::kAlloc, 5, 0x10, 40));  // over a live address: replaces it
  b.Add(Mem(EventKind::kFree, 6, 0x20, 50));   // the host block
  b.Add(Mem(EventKind::kVmmUnmap, 7, 0x30, 1000));
  EXPECT_EQ(b.live_bytes(), 40u);
  EXPECT_EQ(b.TakeLive(), (std::vector<SeriesPoint>{{1, 100}, {3, 1100}, {5, 1040}, {7, 40}}));
}

// The collector keeps allocations and VMM mappings apart, and an allocation of any kind over a
// live address replaces what was there: the export's series counted a host block over a device
// one as both, and let a FREE remove a mapping.
TEST(LiveSeriesTest, ReplacesAndRemovesAsTheCollectorDoes) {
  LiveSeriesBuilder b(Bucketing{});
  b.Add(Mem(EventKind::kAlloc, 1, 0x10, 100));
  b.Add(Mem(EventKind::kAlloc, 2, 0x10, 50, kMemoryPageable));  // its free lost; now host
  EXPECT_EQ(b.live_bytes(), 0u);
  b.Add(Mem(EventKind::kFree, 3, 0x10, 50));  // the host block: nothing of live bytes
  b.Add(Mem(EventKind::kVmmMap, 4, 0x40, 1000));
  b.Add(Mem(EventKind::kFree, 5, 0x40, 1000));  // a FREE does not unmap
  EXPECT_EQ(b.live_bytes(), 1000u);
  b.Add(Mem(EventKind::kAlloc, 6, 0x40, 10));       // an allocation beside the mapping's address
  b.Add(Mem(EventKind::kVmmUnmap, 7, 0x40, 1000));  // unmaps the mapping, not the allocation
  EXPECT_EQ(b.live_bytes(), 10u);
  EXPECT_EQ(b.TakeLive(),
            (std::vector<SeriesPoint>{{1, 100}, {2, 0}, {4, 1000}, {6, 1010}, {7, 10}}));
}

Event Marker(EventKind kind, int64_t ts, uint32_t id, uint64_t bytes = 0, uint32_t source = 0) {
  Event e;
  e.kind = kind;
  e.ts_ns = ts;
  e.tag_id = id;
  e.bytes = bytes;
  e.source_id = source;
  return e;
}

// Found by a user: neither the OOM nor the RL phases (rollout, weight_sync, actor_update) were
// in the export, though they are what an OOM is read against.
TEST(LiveSeriesTest, KeepsPhaseRunsAndOoms) {
  LiveSeriesBuilder b(Bucketing{});
  b.Add(Marker(EventKind::kPhaseBegin, 10, 7));  // rollout
  b.Add(Marker(EventKind::kPhaseBegin, 12, 8));  // nested: generate
  b.Add(Marker(EventKind::kPhaseEnd, 15, 8));
  b.Add(Marker(EventKind::kPhaseEnd, 20, 7));
  b.Add(Marker(EventKind::kPhaseEnd, 21, 9));    // never begun: nothing
  b.Add(Marker(EventKind::kPhaseBegin, 30, 7));  // a second rollout, still open at the end
  b.Add(Marker(EventKind::kOom, 35, 3, 5 << 20, 4));
  b.Add(Mem(EventKind::kAlloc, 40, 0x10, 100));
  EXPECT_EQ(b.TakePhases(),
            (std::vector<PhaseSlice>{{8, 12, 15, false}, {7, 10, 20, false}, {7, 30, 40, true}}));
  std::vector<OomMark> ooms = b.TakeOoms();
  ASSERT_EQ(ooms.size(), 1u);
  EXPECT_EQ(ooms[0].ts_ns, 35);
  EXPECT_EQ(ooms[0].requested_bytes, 5u << 20);
  EXPECT_EQ(ooms[0].tag_id, 3u);
  EXPECT_EQ(ooms[0].source_id, 4u);
  EXPECT_EQ(b.phases_dropped(), 0u);
}

// As the collector's RankState: BEGINs past the depth bound are ignored, and so is the END of
// each (matched by name alone, it closed an outer run of the same name).
TEST(LiveSeriesTest, PhaseBeginsPastTheDepthBoundAndTheirEndsAreIgnored) {
  LiveSeriesBuilder b(Bucketing{});
  for (int i = 0; i < 66; ++i) b.Add(Marker(EventKind::kPhaseBegin, i, 7));
  b.Add(Marker(EventKind::kPhaseEnd, 100, 7));  // the 66th BEGIN's
  b.Add(Marker(EventKind::kPhaseEnd, 101, 7));  // the 65th BEGIN's
  b.Add(Marker(EventKind::kPhaseEnd, 102, 7));  // the 64th: the innermost open run
  std::vector<PhaseSlice> phases = b.TakePhases();
  ASSERT_EQ(phases.size(), LiveSeriesBuilder::kMaxOpenPhases);
  EXPECT_EQ(phases[0], (PhaseSlice{7, 63, 102, false}));
  EXPECT_TRUE(phases[1].open);
}

// After a LOSS while a run was open, another BEGIN of its phase ends it there: its END was most
// likely lost, and every later run would have nested in it, open to the end of the job.
TEST(LiveSeriesTest, AfterALossAnotherBeginOfAnOpenPhaseEndsIt) {
  LiveSeriesBuilder b(Bucketing{});
  b.Add(Marker(EventKind::kPhaseBegin, 10, 7));
  Event loss;
  loss.kind = EventKind::kLoss;
  loss.ts_ns = 15;
  loss.aux = 3;
  b.Add(loss);
  b.Add(Marker(EventKind::kPhaseBegin, 20, 7));
  b.Add(Marker(EventKind::kPhaseEnd, 25, 7));
  b.Add(Marker(EventKind::kPhaseBegin, 30, 7));  // no loss since none was open: a plain run
  b.Add(Marker(EventKind::kPhaseEnd, 35, 7));
  EXPECT_EQ(b.TakePhases(),
            (std::vector<PhaseSlice>{{7, 10, 20, false}, {7, 20, 25, false}, {7, 30, 35, false}}));
}

// After a LOSS, a BEGIN of an open phase whose BEGIN was ignored for depth ends that ignored
// one (as RankState's OnPhaseEnd would), not the open run.
TEST(LiveSeriesTest, AfterALossABeginTakesAnIgnoredBeginsEndFirst) {
  LiveSeriesBuilder b(Bucketing{});
  for (int i = 0; i < 65; ++i) b.Add(Marker(EventKind::kPhaseBegin, i, 7));  // the 65th ignored
  Event loss;
  loss.kind = EventKind::kLoss;
  loss.ts_ns = 70;
  b.Add(loss);
  b.Add(Marker(EventKind::kPhaseBegin, 80, 7));  // ends the ignored one; past the bound again
  b.Add(Marker(EventKind::kPhaseEnd, 90, 7));    // that BEGIN's own (ignored) END
  b.Add(Marker(EventKind::kPhaseEnd, 95, 7));    // the innermost open run
  std::vector<PhaseSlice> phases = b.TakePhases();
  ASSERT_EQ(phases.size(), LiveSeriesBuilder::kMaxOpenPhases);
  EXPECT_EQ(phases[0], (PhaseSlice{7, 63, 95, false}));
}

TEST(LiveSeriesTest, KeepsDeviceSamples) {
  LiveSeriesBuilder b(Bucketing{});
  Event s;
  s.kind = EventKind::kDeviceSample;
  s.ts_ns = 9;
  s.bytes = 123;
  b.Add(s);
  EXPECT_EQ(b.TakeDeviceUsed(), (std::vector<SeriesPoint>{{9, 123}}));
}

TEST(BucketedSeriesTest, KeepsMinMaxAndLastOfEachBucketInTimeOrder) {
  BucketedSeries s(Bucketing{100, 0, 2});
  for (auto [ts, v] : std::vector<std::pair<int64_t, uint64_t>>{
           {0, 50}, {10, 90}, {20, 10}, {30, 60}, {150, 5}, {160, 7}}) {
    s.Add(ts, v);
  }
  EXPECT_EQ(s.Finish(),
            (std::vector<SeriesPoint>{{10, 90}, {20, 10}, {30, 60}, {150, 5}, {160, 7}}));
}

TEST(BucketedSeriesTest, WithoutBucketsDropsOnlyRepeats) {
  BucketedSeries s(Bucketing{});
  s.Add(1, 5);
  s.Add(2, 5);
  s.Add(3, 6);
  EXPECT_EQ(s.Finish(), (std::vector<SeriesPoint>{{1, 5}, {3, 6}}));
}

// At most 3 points a bucket and `count` buckets, whatever the times: before the origin, past the
// last bucket, or going back.
TEST(BucketedSeriesTest, NeverKeepsMoreThanThreePointsPerBucketOfTheGrid) {
  BucketedSeries s(Bucketing{100, 1000, 3});
  uint64_t v = 0;
  for (int64_t ts : {-5000, 0, 999, 1000, 1050, 1100, 1150, 1020, 1010, 1210, 1299, 1300, 5000,
                     90000, 1250, 1001}) {
    s.Add(ts, ++v * 7 % 11);
  }
  std::vector<SeriesPoint> points = s.Finish();
  EXPECT_LE(points.size(), 9u);
  EXPECT_GE(points.size(), 7u);  // every bucket keeps its lowest, highest and last
}

}  // namespace
}  // namespace memtrace::exporter
