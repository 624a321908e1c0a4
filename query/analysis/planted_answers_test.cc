// The "must show" list, each on 20 differently seeded simulations, so a pass is not one
// lucky noise draw: a planted answer is found every time, and a healthy job never gets one.
#include <cstdlib>

#include "gtest/gtest.h"
#include "query/analysis/diverged.h"
#include "query/analysis/growth.h"
#include "query/analysis/headroom.h"
#include "query/analysis/leaks.h"
#include "query/analysis/live.h"
#include "query/analysis/sim/job_simulator.h"
#include "query/analysis/sim/scenarios.h"

namespace memtrace::analysis {
namespace {

constexpr uint64_t kSeeds = 20;

TEST(PlantedAnswersTest, LeakOnRankFiveFromStepThirty) {
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    sim::JobSpec spec = sim::LeakJob(5, 30);
    spec.seed = seed;
    JobTimeline job = sim::Simulate(spec).timeline;
    DivergenceReport d = FindDivergence(job);
    ASSERT_EQ(d.diverged.size(), 1u) << "seed " << seed;
    EXPECT_EQ(d.diverged[0].rank, 5u) << "seed " << seed;
    EXPECT_LE(std::abs(d.diverged[0].onset_step - 30), 5) << "seed " << seed;
    GrowthReport g = FindGrowth(job);
    ASSERT_EQ(g.groups.size(), 1u) << "seed " << seed;
    EXPECT_EQ(g.groups[0].name, sim::kLeakTag);
    ASSERT_EQ(g.groups[0].ranks.size(), 1u);
    EXPECT_EQ(g.groups[0].ranks[0].rank, 5u);
    LeakReport l = FindLeaks(job);
    EXPECT_EQ(l.leaking_ranks, 1u) << "seed " << seed;
  }
}

TEST(PlantedAnswersTest, GradientAccumulationGrowsOnEveryRankWithoutADivergence) {
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    sim::JobSpec spec = sim::GradAccumulationJob();
    spec.seed = seed;
    JobTimeline job = sim::Simulate(spec).timeline;
    EXPECT_TRUE(FindDivergence(job).diverged.empty()) << "seed " << seed;
    GrowthReport g = FindGrowth(job);
    ASSERT_EQ(g.groups.size(), 1u) << "seed " << seed;
    EXPECT_EQ(g.groups[0].name, "fsdp:grads");
    EXPECT_EQ(g.groups[0].scope, GrowthScope::kAllRanks) << "seed " << seed;
    const LeakReport leaks = FindLeaks(job);
    EXPECT_EQ(leaks.leaking_ranks, 8u) << "seed " << seed;
    // From step 10, five steps after warm-up: a flat start too short to split off the fit.
    for (const RankCurve& c : leaks.curves) {
      EXPECT_LE(std::abs(c.evidence.rising_since_step - 10), 1)
          << "seed " << seed << " rank " << c.rank << " since " << c.evidence.rising_since_step;
    }
  }
}

// A short job: 15 steps after warm-up, flat for the first 3 of them, then a leak (found with
// memtrace-sim --steps 20 --leak_from_step 8). No window under 16 steps was searched for a flat
// start: leaks said "rising since 5" and growth counted the rate over the flat steps too.
TEST(PlantedAnswersTest, ALeakAFewStepsIntoAShortWindowBeginsWhereItBegan) {
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    sim::JobSpec spec = sim::LeakJob(1, 8, 256 * kMiB, 4, 20);
    spec.seed = seed;
    JobTimeline job = sim::Simulate(spec).timeline;
    const LeakReport leaks = FindLeaks(job);
    ASSERT_EQ(leaks.leaking_ranks, 1u) << "seed " << seed;
    for (const RankCurve& c : leaks.curves) {
      if (c.rank != 1) continue;
      EXPECT_LE(std::abs(c.evidence.rising_since_step - 8), 1) << "seed " << seed;
      EXPECT_FALSE(c.evidence.rising_from_first_examined) << "seed " << seed;
    }
    GrowthReport g = FindGrowth(job);
    ASSERT_EQ(g.groups.size(), 1u) << "seed " << seed;
    ASSERT_EQ(g.groups[0].ranks.size(), 1u) << "seed " << seed;
    const RankGrowth& r = g.groups[0].ranks[0];
    EXPECT_LE(std::abs(r.first_step - 8), 1) << "seed " << seed;
    // What it grew by is what the series rose by, within a step's leak.
    EXPECT_NEAR(static_cast<double>(r.growth_bytes),
                static_cast<double>(r.last_bytes) - static_cast<double>(r.first_bytes),
                256.0 * kMiB)
        << "seed " << seed;
  }
}

TEST(PlantedAnswersTest, HealthyJobWithNoiseAndSpikesInventsNothing) {
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    sim::JobSpec spec = sim::HealthyJob();
    spec.seed = seed;
    JobTimeline job = sim::Simulate(spec).timeline;
    DivergenceReport d = FindDivergence(job);
    EXPECT_EQ(d.status, DivergenceStatus::kNoneDiverged) << "seed " << seed << ": " << d.message;
    EXPECT_TRUE(d.offsets.empty()) << "seed " << seed;
    for (GrowthBy by : {GrowthBy::kTag, GrowthBy::kRank, GrowthBy::kSource}) {
      GrowthParams p;
      p.by = by;
      GrowthReport g = FindGrowth(job, p);
      EXPECT_TRUE(g.groups.empty())
          << "seed " << seed << " by " << GrowthByName(by) << ": " << g.groups[0].name;
    }
    LeakReport l = FindLeaks(job);
    EXPECT_EQ(l.leaking_ranks, 0u) << "seed " << seed;
    EXPECT_EQ(ForecastHeadroom(job).forecasts, 0u) << "seed " << seed;
  }
}

TEST(PlantedAnswersTest, LiveAtOomListsThePlantedTagFirst) {
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    sim::JobSpec spec = sim::OomJob();
    spec.seed = seed;
    sim::SimulatedJob job = sim::Simulate(spec);
    ASSERT_TRUE(job.oom.has_value()) << "seed " << seed;
    uint32_t rank = job.oom->rank;
    EXPECT_EQ(rank, 3u);
    std::optional<OomMoment> oom = FindOom(job.timeline.ranks[rank]);
    ASSERT_TRUE(oom.has_value());
    RankLiveSet at = sim::LiveAt(spec, rank, oom->step, sim::Moment::kPeak);
    std::vector<RankLiveSet> others;
    for (uint32_t r = 0; r < spec.ranks; ++r) {
      if (r != rank) others.push_back(sim::LiveAt(spec, r, oom->step, sim::Moment::kPeak));
    }
    LiveReport live = DescribeLive(spec.job_id, at, others, {}, oom);
    ASSERT_FALSE(live.groups.empty());
    EXPECT_EQ(live.groups[0].tag, sim::kLeakTag) << "seed " << seed;
  }
}

TEST(PlantedAnswersTest, HeadroomForecastsThePlantedStepWithinTenPercent) {
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    sim::JobSpec spec = sim::LeakJob(3, 20, 200 * kMiB, 8, 150);
    spec.seed = seed;
    int64_t planted = sim::PlantedCapacityStep(spec, 3);
    HeadroomReport h = ForecastHeadroom(sim::Simulate(spec).timeline);
    ASSERT_EQ(h.forecasts, 1u) << "seed " << seed;
    EXPECT_EQ(h.entries[0].rank, 3u);
    EXPECT_LE(std::abs(double(h.entries[0].forecast_step - planted)), 0.1 * planted)
        << "seed " << seed << ": forecast " << h.entries[0].forecast_step << " planted " << planted;
  }
}

}  // namespace
}  // namespace memtrace::analysis
