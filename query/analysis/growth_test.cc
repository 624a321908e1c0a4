#include "query/analysis/growth.h"

#include "gtest/gtest.h"
#include "query/analysis/sim/job_simulator.h"
#include "query/analysis/sim/scenarios.h"

namespace memtrace::analysis {
namespace {

using sim::Simulate;

TEST(GrowthTest, NamesTheLeakedTagOnRankFiveOnly) {
  JobTimeline job = Simulate(sim::LeakJob(5, 30, 128 * kMiB)).timeline;
  GrowthReport report = FindGrowth(job);
  ASSERT_EQ(report.groups.size(), 1u);
  const GroupGrowth& g = report.groups[0];
  EXPECT_EQ(g.name, sim::kLeakTag);
  EXPECT_EQ(g.scope, GrowthScope::kSomeRanks);
  EXPECT_EQ(g.ranks_growing, 1u);
  EXPECT_EQ(g.ranks_with_group, 1u);
  ASSERT_EQ(g.ranks.size(), 1u);
  EXPECT_EQ(g.ranks[0].rank, 5u);
  // The leak runs over 70 of the 95 fitted steps: Theil-Sen sees most of its 128 MiB/step.
  EXPECT_GT(g.ranks[0].bytes_per_step, 0.8 * 128 * kMiB);
  EXPECT_LT(g.ranks[0].bytes_per_step, 1.05 * 128 * kMiB);
  EXPECT_EQ(report.first_step, 5);
  EXPECT_EQ(report.last_step, 99);
}

TEST(GrowthTest, WindowAfterTheOnsetMeasuresThePlantedRate) {
  JobTimeline job = Simulate(sim::LeakJob(5, 30, 128 * kMiB)).timeline;
  GrowthParams params;
  params.window_steps = 50;
  GrowthReport report = FindGrowth(job, params);
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_NEAR(report.groups[0].ranks[0].bytes_per_step, 128.0 * kMiB, 0.01 * 128 * kMiB);
  EXPECT_EQ(report.first_step, 50);
}

TEST(GrowthTest, ByRankAndByTagRankPointAtRankFive) {
  JobTimeline job = Simulate(sim::LeakJob(5, 30, 128 * kMiB)).timeline;
  GrowthParams by_rank;
  by_rank.by = GrowthBy::kRank;
  GrowthReport r = FindGrowth(job, by_rank);
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_EQ(r.groups[0].rank, 5u);
  EXPECT_EQ(r.groups[0].scope, GrowthScope::kSomeRanks);

  GrowthParams by_tag_rank;
  by_tag_rank.by = GrowthBy::kTagRank;
  GrowthReport tr = FindGrowth(job, by_tag_rank);
  ASSERT_EQ(tr.groups.size(), 1u);
  EXPECT_EQ(tr.groups[0].name, sim::kLeakTag);
  EXPECT_EQ(tr.groups[0].rank, 5u);
  // Series holding memory at some step end: params, grads, adam, nccl, allocator cache and the
  // checkpoint on every rank, prefetch on rank 6, the leak on rank 5 (eval is freed in-step).
  EXPECT_EQ(tr.groups_examined, 8u * 6 + 1 + 1);
}

TEST(GrowthTest, GradientsGrowingOnEveryRankAreAllRanks) {
  JobTimeline job = Simulate(sim::GradAccumulationJob()).timeline;
  GrowthReport report = FindGrowth(job);
  ASSERT_EQ(report.groups.size(), 1u);
  const GroupGrowth& g = report.groups[0];
  EXPECT_EQ(g.name, "fsdp:grads");
  EXPECT_EQ(g.scope, GrowthScope::kAllRanks);
  EXPECT_EQ(g.ranks_growing, 8u);
  EXPECT_EQ(g.ranks.size(), 8u);
  EXPECT_NEAR(g.median_bytes_per_step, 64.0 * kMiB, 0.02 * 64 * kMiB);
  EXPECT_NEAR(g.total_bytes_per_step, 8 * 64.0 * kMiB, 8 * 0.02 * 64 * kMiB);

  GrowthParams by_rank;
  by_rank.by = GrowthBy::kRank;
  GrowthReport r = FindGrowth(job, by_rank);
  EXPECT_EQ(r.groups.size(), 8u);
  for (const GroupGrowth& one : r.groups) EXPECT_EQ(one.scope, GrowthScope::kAllRanks);
}

TEST(GrowthTest, ARankThatDiedBeforeTheWindowDoesNotMakeSharedGrowthLookPartial) {
  // Rank 7 stopped in warm-up: the 7 ranks that ran the window all grow gradients, which is
  // growth all ranks share, not a leak on "some".
  JobTimeline job = Simulate(sim::GradAccumulationJob()).timeline;
  std::vector<StepPoint> kept;
  for (const StepPoint& p : job.ranks[7].steps) {
    if (p.step < 2) kept.push_back(p);
  }
  job.ranks[7].steps = kept;
  GrowthReport report = FindGrowth(job);
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].ranks_growing, 7u);
  EXPECT_EQ(report.groups[0].scope, GrowthScope::kAllRanks);
  // "All" is all of the 7 fitted, which the report counts apart from the 8 selected.
  EXPECT_EQ(report.ranks, 8u);
  EXPECT_EQ(report.ranks_fitted, 7u);
  // A leak on one of the running ranks is still "some".
  JobTimeline leak = Simulate(sim::LeakJob(5, 30)).timeline;
  leak.ranks[7].steps = kept;
  GrowthReport one = FindGrowth(leak);
  ASSERT_GE(one.groups.size(), 1u);
  EXPECT_EQ(one.groups[0].scope, GrowthScope::kSomeRanks);
}

// Rank 3 restarted near the end: at step 96 it has only its own warm-up in the window, at step 90
// too few points after it (5 < min_points) to grow. Neither can show growth every other rank
// shares, so it is still growth on all ranks, not a leak on 7 of 8.
TEST(GrowthTest, ARankThatRestartedLateDoesNotMakeSharedGrowthLookPartial) {
  for (int64_t restart_at : {96, 90}) {
    sim::JobSpec spec = sim::GradAccumulationJob();
    spec.restarts.push_back({3, restart_at});
    GrowthReport report = FindGrowth(Simulate(spec).timeline);
    ASSERT_EQ(report.groups.size(), 1u) << restart_at;
    EXPECT_EQ(report.groups[0].name, "fsdp:grads");
    EXPECT_EQ(report.groups[0].ranks_growing, 7u) << restart_at;
    EXPECT_EQ(report.groups[0].scope, GrowthScope::kAllRanks) << restart_at;
  }
  // Restarted early enough to grow again, it is one of the 8.
  sim::JobSpec spec = sim::GradAccumulationJob();
  spec.restarts.push_back({3, 50});
  GrowthReport report = FindGrowth(Simulate(spec).timeline);
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].ranks_growing, 8u);
  EXPECT_EQ(report.groups[0].scope, GrowthScope::kAllRanks);
}

TEST(GrowthTest, HealthyJobWithNoiseAndSpikesGrowsNowhere) {
  JobTimeline job = Simulate(sim::HealthyJob()).timeline;
  for (GrowthBy by : {GrowthBy::kTag, GrowthBy::kRank, GrowthBy::kTagRank, GrowthBy::kSource,
                      GrowthBy::kSourceRank}) {
    GrowthParams params;
    params.by = by;
    GrowthReport report = FindGrowth(job, params);
    EXPECT_TRUE(report.groups.empty()) << GrowthByName(by) << ": " << report.groups[0].name;
    EXPECT_GT(report.groups_examined, 0u);
  }
}

TEST(GrowthTest, BySourceNamesTheLibraryThatGrows) {
  sim::JobSpec spec = sim::HealthyJob();
  // NCCL registering a new buffer for every new communicator, on every rank.
  spec.growths.push_back({-1, "nccl:buffers", "libnccl.so.2", 20, 32 * kMiB});
  JobTimeline job = Simulate(spec).timeline;
  GrowthParams params;
  params.by = GrowthBy::kSource;
  GrowthReport report = FindGrowth(job, params);
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].name, "libnccl.so.2");
  EXPECT_EQ(report.groups[0].scope, GrowthScope::kAllRanks);
}

TEST(GrowthTest, AOneTimeJumpWithinNoiseIsNotGrowth) {
  sim::JobSpec spec = sim::HealthyJob();
  // A leak too slow to matter: 32 MiB over the whole run.
  spec.growths.push_back({2, "slow", "libtorch_cuda.so", 50, 1 * kMiB / 2});
  JobTimeline job = Simulate(spec).timeline;
  EXPECT_TRUE(FindGrowth(job).groups.empty());
}

TEST(GrowthTest, ALeakThatStartsLateIsFoundAtItsOwnRate) {
  // 64 MiB a step over the last 20 of the 95 steps after warm-up: one line over all of them
  // measured about a quarter of it.
  JobTimeline job = Simulate(sim::LeakJob(5, 80, 64 * kMiB)).timeline;
  GrowthReport report = FindGrowth(job);
  ASSERT_EQ(report.groups.size(), 1u);
  ASSERT_EQ(report.groups[0].ranks.size(), 1u);
  const RankGrowth& g = report.groups[0].ranks[0];
  EXPECT_EQ(g.rank, 5u);
  EXPECT_NEAR(g.bytes_per_step, 64.0 * kMiB, 0.05 * 64 * kMiB);
  EXPECT_NEAR(static_cast<double>(g.first_step), 80, 2);
  // What it grew by is what it held more at the end, not the slope over the whole window.
  EXPECT_LE(g.growth_bytes, 1.05 * static_cast<double>(g.last_bytes - g.first_bytes));
}

TEST(GrowthTest, ALeakOverMostOfTheWindowIsMeasuredFromWhereItStarted) {
  // Rising over 70 of the 95 steps after warm-up: one line over all of them has the leak's own
  // slope, so the fit was kept, and the growth was that slope over the whole window (94 steps
  // of it where the tag held nothing for the first 25).
  JobTimeline job = Simulate(sim::LeakJob(5, 30, 256 * kMiB)).timeline;
  GrowthReport report = FindGrowth(job);
  ASSERT_EQ(report.groups.size(), 1u);
  ASSERT_EQ(report.groups[0].ranks.size(), 1u);
  const RankGrowth& g = report.groups[0].ranks[0];
  EXPECT_NEAR(g.bytes_per_step, 256.0 * kMiB, 0.05 * 256 * kMiB);
  EXPECT_NEAR(static_cast<double>(g.first_step), 30, 2);
  EXPECT_NEAR(static_cast<double>(g.growth_bytes), 69.0 * 256 * kMiB, 3.0 * 256 * kMiB);
}

// The tag appears at step 10, five steps into the window: too few flat points for the fit to
// split them off, so the line spans the window, but the growth is counted from where it rose
// (it read 94 steps' worth of a leak 89 steps long).
TEST(GrowthTest, ATagThatAppearsAFewStepsIntoTheWindowGrowsFromThere) {
  JobTimeline job = Simulate(sim::LeakJob(5, 10, 256 * kMiB)).timeline;
  GrowthReport report = FindGrowth(job);
  ASSERT_EQ(report.groups.size(), 1u);
  ASSERT_EQ(report.groups[0].ranks.size(), 1u);
  const RankGrowth& g = report.groups[0].ranks[0];
  EXPECT_NEAR(static_cast<double>(g.first_step), 10, 1);
  EXPECT_NEAR(g.growth_bytes, 89.0 * 256 * kMiB, 2.0 * 256 * kMiB);
  EXPECT_LE(g.growth_bytes, static_cast<double>(g.last_bytes));
}

TEST(GrowthTest, ATagThatGrewOverTheLastFewStepsGrows) {
  // 1 GiB a step from step 96 of 100: four rises, too few for the trend test; no growth read.
  JobTimeline job = Simulate(sim::LeakJob(5, 96, 1 * kGiB)).timeline;
  GrowthReport report = FindGrowth(job);
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].name, sim::kLeakTag);
  ASSERT_EQ(report.groups[0].ranks.size(), 1u);
  const RankGrowth& g = report.groups[0].ranks[0];
  EXPECT_EQ(g.rank, 5u);
  // Measured from the step before its first rise, where leaks' "rising since" puts it.
  EXPECT_EQ(g.first_step, 95);
  EXPECT_NEAR(g.growth_bytes, 4.0 * kGiB, 0.2 * kGiB);  // steps 96..99, 1 GiB each
  EXPECT_NEAR(g.bytes_per_step, 1.0 * kGiB, 0.05 * kGiB);
}

TEST(GrowthTest, ATagThatJumpedOnceThenStayedIsNotGrowth) {
  sim::JobSpec spec = sim::HealthyJob();
  // Rank 1 keeps 4 GiB of its rollout's memory from step 50 on: one jump, then flat.
  spec.phases.push_back({"rollout", 1 * kGiB, 4 * kGiB, 1, 50, false});
  JobTimeline job = Simulate(spec).timeline;
  GrowthReport report = FindGrowth(job);
  for (const GroupGrowth& g : report.groups) ADD_FAILURE() << g.name << " grows";
}

// The same with noise: the allocator cache jitters by up to 128 MiB a step and jumps by 4 GiB
// once. One line over it rises (the pairs across the jump do), and its end sits on the line, so
// no split is tried; it is flat after the jump, which is what rules it out.
TEST(GrowthTest, ANoisyTagThatJumpedOnceIsNotGrowth) {
  JobTimeline job = Simulate(sim::HealthyJob()).timeline;
  const NameId cache = job.names.Intern("allocator:cache");
  for (StepPoint& p : job.ranks[1].steps) {
    if (p.step < 50) continue;
    for (GroupBytes& g : p.groups.mutable_tags()) {
      if (g.name == cache) g.live_bytes += 4 * kGiB;
    }
  }
  GrowthReport report = FindGrowth(job);
  for (const GroupGrowth& g : report.groups) ADD_FAILURE() << g.name << " grows";
}

TEST(GrowthTest, RanksGroupsFastestFirst) {
  sim::JobSpec spec = sim::LeakJob(5, 10, 64 * kMiB);
  spec.growths.push_back({1, "leak:fast", "libfoo.so", 10, 256 * kMiB});
  JobTimeline job = Simulate(spec).timeline;
  GrowthReport report = FindGrowth(job);
  ASSERT_EQ(report.groups.size(), 2u);
  EXPECT_EQ(report.groups[0].name, "leak:fast");
  EXPECT_EQ(report.groups[1].name, sim::kLeakTag);
}

}  // namespace
}  // namespace memtrace::analysis
