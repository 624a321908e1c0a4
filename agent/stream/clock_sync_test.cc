#include "agent/stream/clock_sync.h"

#include "gtest/gtest.h"

namespace memtrace {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(ClockSyncTest, NoSampleNoEstimate) {
  ClockSync sync;
  EXPECT_FALSE(sync.Current().has_value());
}

TEST(ClockSyncTest, SymmetricPathGivesTheExactOffset) {
  // The collector is 2.5 s ahead; 1 ms each way, 3 ms spent in the collector.
  const int64_t offset = 2500 * kMs;
  const int64_t t0 = 1'000'000 * kMs;
  ClockSync sync;
  sync.AddSample(t0, t0 + 1 * kMs + offset, t0 + 4 * kMs + offset, t0 + 5 * kMs);
  ASSERT_TRUE(sync.Current().has_value());
  EXPECT_EQ(sync.Current()->offset_ns, offset);
  EXPECT_EQ(sync.Current()->round_trip_ns, 2 * kMs);
}

TEST(ClockSyncTest, TheShortestRoundTripWinsAndErrorStaysWithinHalfOfIt) {
  const int64_t offset = -7'200'000 * kMs;  // the collector is two hours behind
  ClockSync sync;
  int64_t t = 5'000'000 * kMs;
  // Queued behind other writes: 40 ms out, 1 ms back (an asymmetric, slow sample).
  sync.AddSample(t, t + 40 * kMs + offset, t + 41 * kMs + offset, t + 42 * kMs);
  const ClockEstimate slow = *sync.Current();
  EXPECT_EQ(slow.round_trip_ns, 41 * kMs);
  EXPECT_LE(std::abs(slow.offset_ns - offset), slow.round_trip_ns / 2);
  EXPECT_GT(std::abs(slow.offset_ns - offset), 10 * kMs);
  // A quick one later: 300 us out, 200 us back.
  t += 1000 * kMs;
  sync.AddSample(t, t + 300'000 + offset, t + 800'000 + offset, t + 1'000'000);
  const ClockEstimate quick = *sync.Current();
  EXPECT_EQ(quick.round_trip_ns, 500'000);
  EXPECT_LE(std::abs(quick.offset_ns - offset), 250'000);
  // A slow sample afterwards does not displace it.
  sync.AddSample(t, t + 90 * kMs + offset, t + 91 * kMs + offset, t + 92 * kMs);
  EXPECT_EQ(sync.Current()->round_trip_ns, 500'000);
}

TEST(ClockSyncTest, OldSamplesLeaveTheWindowSoADriftingClockIsFollowed) {
  ClockSync sync(4);
  int64_t t = 1'000'000 * kMs;
  sync.AddSample(t, t + 100, t + 100, t + 200);  // offset ~0, round trip 100 ns (best ever)
  // The agent's clock drifts: the collector is now 50 ms ahead, round trips of 1 ms.
  for (int i = 0; i < 4; ++i) {
    t += 1000 * kMs;
    sync.AddSample(t, t + kMs / 2 + 50 * kMs, t + kMs / 2 + 50 * kMs, t + kMs);
  }
  ASSERT_TRUE(sync.Current().has_value());
  EXPECT_EQ(sync.samples(), 4u);
  EXPECT_EQ(sync.Current()->offset_ns, 50 * kMs);
}

TEST(ClockSyncTest, OlderCollectorsWithoutAReceiveTimeStillGiveAnEstimate) {
  const int64_t t0 = 1'000'000 * kMs;
  ClockSync sync;
  sync.AddSample(t0, 0, t0 + 3 * kMs + 10 * kMs, t0 + 6 * kMs);
  ASSERT_TRUE(sync.Current().has_value());
  EXPECT_EQ(sync.Current()->offset_ns, 10 * kMs);
  EXPECT_EQ(sync.Current()->round_trip_ns, 6 * kMs);
}

TEST(ClockSyncTest, ImpossibleSamplesAreIgnored) {
  ClockSync sync;
  const int64_t t0 = 1'000'000 * kMs;
  sync.AddSample(t0, t0 + 1, t0 + 2, t0 - 5);     // received before it was sent
  sync.AddSample(t0, t0 + 10, t0 + 5, t0 + 100);  // the collector answered before receiving
  EXPECT_FALSE(sync.Current().has_value());
}

}  // namespace
}  // namespace memtrace
