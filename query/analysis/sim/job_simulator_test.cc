#include "query/analysis/sim/job_simulator.h"

#include <cstdint>

#include "absl/types/span.h"
#include "gtest/gtest.h"

namespace memtrace::analysis::sim {
namespace {

uint64_t SumLive(absl::Span<const GroupBytes> groups) {
  uint64_t sum = 0;
  for (const GroupBytes& g : groups) sum += g.live_bytes;
  return sum;
}

TEST(JobSimulatorTest, RollupsAreSelfConsistent) {
  JobSpec spec;
  spec.steps = 40;
  spec.growths.push_back({5, "leak:cached_outputs", "libtorch_cuda.so", 10, 128 * kMiB});
  spec.spikes.push_back({0, "eval", 10, 3, 3 * kGiB, false});
  SimulatedJob job = Simulate(spec);
  ASSERT_EQ(job.timeline.ranks.size(), 8u);
  for (const RankTimeline& r : job.timeline.ranks) {
    ASSERT_EQ(r.steps.size(), 40u);
    for (const StepPoint& p : r.steps) {
      EXPECT_LE(p.floor_bytes, p.end_bytes);
      EXPECT_LE(p.end_bytes, p.peak_bytes);
      EXPECT_EQ(SumLive(p.by_tag()), p.end_bytes) << "rank " << r.rank << " step " << p.step;
      EXPECT_EQ(SumLive(p.by_source()), p.end_bytes);
      EXPECT_LT(p.start_ns, p.end_ns);
    }
  }
  // Steady state of a healthy rank: ~21 GiB floor, ~35 GiB peak.
  const StepPoint& p = job.timeline.ranks[1].steps[20];
  EXPECT_GT(p.floor_bytes, 21 * kGiB);
  EXPECT_LT(p.floor_bytes, 21 * kGiB + 128 * kMiB);
  EXPECT_GT(p.peak_bytes, 35 * kGiB);
  // The leak: rank 5's floor at step 30 holds 20 leaked steps more than rank 4's (noise aside).
  int64_t diff = int64_t(job.timeline.ranks[5].steps[30].floor_bytes) -
                 int64_t(job.timeline.ranks[4].steps[30].floor_bytes);
  EXPECT_NEAR(double(diff), 20.0 * 128 * kMiB, 128.0 * kMiB);
  EXPECT_FALSE(job.oom.has_value());
}

TEST(JobSimulatorTest, LiveSetAgreesWithRollup) {
  JobSpec spec;
  spec.steps = 20;
  spec.growths.push_back({2, "leak:x", "libfoo.so", 5, 64 * kMiB});
  SimulatedJob job = Simulate(spec);
  for (Moment m : {Moment::kFloor, Moment::kPeak, Moment::kEnd}) {
    RankLiveSet live = LiveAt(spec, 2, 12, m);
    uint64_t sum = 0;
    int leak_allocs = 0;
    for (const LiveAllocation& a : live.allocations) {
      sum += a.bytes;
      if (a.tag == "leak:x") ++leak_allocs;
    }
    const StepPoint& p = job.timeline.ranks[2].steps[12];
    uint64_t want = m == Moment::kFloor  ? p.floor_bytes
                    : m == Moment::kPeak ? p.peak_bytes
                                         : p.end_bytes;
    EXPECT_EQ(sum, want);
    // One leaked allocation per step since step 5: 7 before step 12 began, 8 once it ran.
    EXPECT_EQ(leak_allocs, m == Moment::kFloor ? 7 : 8);
  }
}

TEST(JobSimulatorTest, OomEndsTheJobAtThePlantedStep) {
  JobSpec spec;
  spec.steps = 200;
  spec.growths.push_back({3, "leak:big", "libtorch_cuda.so", 10, 512 * kGiB / 1024});
  SimulatedJob job = Simulate(spec);
  ASSERT_TRUE(job.oom.has_value());
  EXPECT_EQ(job.oom->rank, 3u);
  const RankTimeline& r3 = job.timeline.ranks[3];
  EXPECT_EQ(r3.steps.back().step, job.oom->step);
  EXPECT_EQ(r3.steps.back().ooms, 1u);
  EXPECT_EQ(job.timeline.ranks[0].steps.back().ooms, 0u);
  int64_t planted = PlantedCapacityStep(spec, 3, 1000);
  EXPECT_NEAR(double(job.oom->step), double(planted), 2.0);
}

}  // namespace
}  // namespace memtrace::analysis::sim
