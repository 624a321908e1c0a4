#include "query/analysis/diverged.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "query/analysis/sim/job_simulator.h"
#include "query/analysis/sim/scenarios.h"

namespace memtrace::analysis {
namespace {

using sim::Simulate;

TEST(DivergenceTest, ReportsLeakingRankFiveAtItsOnset) {
  sim::JobSpec spec = sim::LeakJob(/*rank=*/5, /*start_step=*/30);
  JobTimeline job = Simulate(spec).timeline;
  DivergenceReport report = FindDivergence(job);
  ASSERT_EQ(report.status, DivergenceStatus::kDiverged) << report.message;
  ASSERT_EQ(report.diverged.size(), 1u);
  const RankDivergence& d = report.diverged[0];
  EXPECT_EQ(d.rank, 5u);
  EXPECT_LE(std::abs(d.onset_step - 30), 5) << "onset " << d.onset_step;
  EXPECT_LE(std::abs(d.departure_step - 30), 2) << "departure " << d.departure_step;
  EXPECT_EQ(d.direction, 1);
  EXPECT_GT(d.value_bytes, d.cohort_median_bytes);
  EXPECT_GE(d.excess_bytes, int64_t{410 * kMiB});  // 2% of a ~21 GiB floor
  EXPECT_EQ(d.onset_ns, job.ranks[5].steps[d.onset_step].start_ns);
  // By the last step it holds ~70 leaked steps more than the cohort.
  EXPECT_NEAR(double(d.last_excess_bytes), 69.0 * 128 * kMiB, 4.0 * 128 * kMiB);
  EXPECT_EQ(d.last_step, 99);
  EXPECT_TRUE(report.offsets.empty());
}

// Without step markers the keys are time-bucket indexes: the report names the bucket's time,
// not a "step 1796332086".
TEST(DivergenceTest, AJobWithoutStepMarkersIsReportedInTime) {
  JobTimeline job = Simulate(sim::LeakJob(5, 30)).timeline;
  constexpr int64_t kFirstBucket = 1'796'332'000;  // 2026-12-03 21:06:40 UTC, 1 s buckets
  job.time_axis = true;
  job.bucket_ns = 1'000'000'000;
  for (RankTimeline& r : job.ranks) {
    for (StepPoint& p : r.steps) p.step += kFirstBucket;
  }
  DivergenceReport report = FindDivergence(job);
  ASSERT_EQ(report.status, DivergenceStatus::kDiverged) << report.message;
  EXPECT_EQ(report.bucket_ns, 1'000'000'000);
  EXPECT_NE(report.message.find("rank 5 diverged first, at 2026-12-03 21:07:"), std::string::npos)
      << report.message;
  EXPECT_EQ(report.message.find("step"), std::string::npos) << report.message;
}

// A leak that starts with the baseline steps (right after warm-up) is found at its onset, not
// steps later with the rest reported as an offset the rank never had.
TEST(DivergenceTest, ALeakFromTheFirstComparedStepIsADivergenceNotAnOffset) {
  DivergenceReport report = FindDivergence(Simulate(sim::LeakJob(1, 5, 256 * kMiB)).timeline);
  ASSERT_EQ(report.status, DivergenceStatus::kDiverged) << report.message;
  ASSERT_EQ(report.diverged.size(), 1u);
  EXPECT_EQ(report.diverged[0].rank, 1u);
  EXPECT_LE(report.diverged[0].onset_step, 8) << report.message;
  EXPECT_TRUE(report.offsets.empty()) << report.offsets[0].offset_bytes;
}

// A leak begun in warm-up (step 0 or 1) is dated at the first compared steps, 7 or 8: the report
// says the rank was drifting from the first step compared, so that it does not read as "began
// at 7". One begun at step 30 is not so qualified.
TEST(DivergenceTest, ADriftFromTheFirstComparedStepMayHaveBegunInWarmUp) {
  for (int64_t from : {0, 1}) {
    const DivergenceReport report =
        FindDivergence(Simulate(sim::LeakJob(3, from, 256 * kMiB)).timeline);
    ASSERT_EQ(report.diverged.size(), 1u) << report.message;
    EXPECT_TRUE(report.diverged[0].departed_before_compared) << from;
    EXPECT_NE(report.message.find("rank 3 was drifting from the first step compared, after the 5 "
                                  "warm-up steps (--warmup): it may have begun earlier"),
              std::string::npos)
        << report.message;
  }
  // Flat at the first compared step (step 5) and rising after it: nothing began before it.
  const DivergenceReport at_first = FindDivergence(Simulate(sim::LeakJob(3, 5)).timeline);
  ASSERT_EQ(at_first.diverged.size(), 1u) << at_first.message;
  EXPECT_FALSE(at_first.diverged[0].departed_before_compared);
  EXPECT_EQ(at_first.message.find("may have begun earlier"), std::string::npos) << at_first.message;
  const DivergenceReport later = FindDivergence(Simulate(sim::LeakJob(3, 30)).timeline);
  ASSERT_EQ(later.diverged.size(), 1u) << later.message;
  EXPECT_FALSE(later.diverged[0].departed_before_compared);
  EXPECT_EQ(later.message.find("may have begun earlier"), std::string::npos) << later.message;
}

// A leak from step 1 is already 1 GiB up when the comparison starts after warm-up: it is a
// divergence, not also "a rank that always held a different amount".
TEST(DivergenceTest, ALeakFromBeforeTheComparedStepsIsNotAlsoAnOffset) {
  DivergenceReport report = FindDivergence(Simulate(sim::LeakJob(4, 1, 256 * kMiB)).timeline);
  ASSERT_EQ(report.status, DivergenceStatus::kDiverged) << report.message;
  ASSERT_EQ(report.diverged.size(), 1u);
  EXPECT_EQ(report.diverged[0].rank, 4u);
  EXPECT_TRUE(report.offsets.empty()) << report.offsets[0].offset_bytes;
}

// Rank 3 keeps 8 GiB from step 8 on, inside its baseline steps (5..9): the onset is step 8 with
// 8 GiB more, not the first baseline step with a fraction of it (a line through a step starts
// below the level before it).
TEST(DivergenceTest, ALevelThatStepsInsideTheBaselineStepsDivergesWhereItStepped) {
  JobTimeline job = Simulate(sim::HealthyJob()).timeline;
  for (StepPoint& p : job.ranks[3].steps) {
    if (p.step >= 8) p.floor_bytes += 8 * kGiB;
  }
  DivergenceReport report = FindDivergence(job);
  ASSERT_EQ(report.diverged.size(), 1u) << report.message;
  EXPECT_EQ(report.diverged[0].rank, 3u);
  EXPECT_EQ(report.diverged[0].onset_step, 8) << report.message;
  EXPECT_NEAR(double(report.diverged[0].excess_bytes), 8.0 * kGiB, 256.0 * kMiB);
  EXPECT_TRUE(report.offsets.empty()) << report.offsets[0].offset_bytes;
}

// A leak of 96 MiB a step from step 0 moves the rank's baseline by less than the offset
// threshold (2% of ~21 GiB); the rank diverges, and is not also "a rank that always held a
// different amount" because of what it leaked before the comparison began.
TEST(DivergenceTest, ASlowLeakFromTheStartIsADivergenceNotAlsoAnOffset) {
  DivergenceReport report = FindDivergence(Simulate(sim::LeakJob(3, 0, 96 * kMiB)).timeline);
  ASSERT_EQ(report.diverged.size(), 1u) << report.message;
  EXPECT_EQ(report.diverged[0].rank, 3u);
  EXPECT_TRUE(report.offsets.empty()) << report.offsets[0].offset_bytes;
}

// With no warm-up the job's first step, where every rank's floor is 0 (nothing was allocated
// before it began), is a baseline step: a leak from step 2 is found where it left the cohort,
// not at step 0 where every rank held 0 B.
TEST(DivergenceTest, WithoutWarmUpAnEmptyFirstStepDoesNotDateALeakBack) {
  JobTimeline job = Simulate(sim::LeakJob(1, 2, 256 * kMiB)).timeline;
  for (RankTimeline& r : job.ranks) r.steps[0].floor_bytes = 0;
  DivergenceParams params;
  params.warmup_steps = 0;
  DivergenceReport report = FindDivergence(job, params);
  ASSERT_EQ(report.diverged.size(), 1u) << report.message;
  EXPECT_EQ(report.diverged[0].rank, 1u);
  EXPECT_GE(report.diverged[0].onset_step, 3) << report.message;
  EXPECT_LE(report.diverged[0].onset_step, 6) << report.message;
  EXPECT_GT(report.diverged[0].value_bytes, 0u);
}

// `leakers` each leak 256 MiB a step from step 20.
JobTimeline JobWithLeaksOn(uint32_t ranks, std::vector<int32_t> leakers) {
  sim::JobSpec spec = sim::HealthyJob(ranks);
  for (int32_t r : leakers) {
    spec.growths.push_back({r, sim::kLeakTag, "libtorch_cuda.so", 20, 256 * kMiB});
  }
  return Simulate(spec).timeline;
}

std::vector<uint32_t> DivergedRanks(const DivergenceReport& report) {
  std::vector<uint32_t> ranks;
  for (const RankDivergence& d : report.diverged) ranks.push_back(d.rank);
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

// Half the ranks leak alike: the median sits between the halves and none is outside the cohort
// by it. The ranks split in two, and the half that moved is named against the half that did not.
TEST(DivergenceTest, HalfTheRanksLeakingAreNamedAgainstTheHalfThatDidNot) {
  DivergenceReport report = FindDivergence(JobWithLeaksOn(8, {1, 2, 3, 4}));
  ASSERT_EQ(report.status, DivergenceStatus::kDiverged) << report.message;
  EXPECT_EQ(DivergedRanks(report), (std::vector<uint32_t>{1, 2, 3, 4})) << report.message;
  for (const RankDivergence& d : report.diverged) {
    EXPECT_EQ(d.direction, 1);
    EXPECT_GE(d.onset_step, 20);
    EXPECT_LE(d.onset_step, 26);
  }
  EXPECT_NE(report.message.find("split in two groups there: compared with the 4 that kept theirs"),
            std::string::npos)
      << report.message;
  // Alike, they leave together: none of them is "first" with the others "following".
  EXPECT_NE(report.message.find("ranks 1, 2, 3 and 4 diverged first, together, at step "),
            std::string::npos)
      << report.message;
  EXPECT_NE(report.message.find("; no other rank followed"), std::string::npos) << report.message;
}

// Two of three ranks leak: the median follows them, and the healthy rank read as diverged below.
TEST(DivergenceTest, TwoOfThreeLeakingAreNamedNotTheRankThatStayed) {
  DivergenceReport report = FindDivergence(JobWithLeaksOn(3, {1, 2}));
  EXPECT_EQ(DivergedRanks(report), (std::vector<uint32_t>{1, 2})) << report.message;
  for (const RankDivergence& d : report.diverged) EXPECT_EQ(d.direction, 1);
}

// Six or seven of eight ranks leak and the rest do not: the median moves with the leakers, and the
// ranks that kept their baseline read as diverged below (the plot drew a healthy rank red). Too
// few to be a split, they are still what the leakers are measured against.
TEST(DivergenceTest, AMajorityThatLeaksIsNamedNotTheFewThatStayed) {
  for (const std::vector<uint32_t>& leaking :
       {std::vector<uint32_t>{0, 1, 2, 4, 5, 6, 7}, std::vector<uint32_t>{0, 1, 2, 3, 4, 5}}) {
    DivergenceReport report =
        FindDivergence(JobWithLeaksOn(8, std::vector<int32_t>(leaking.begin(), leaking.end())));
    ASSERT_EQ(DivergedRanks(report), leaking) << report.message;
    for (const RankDivergence& d : report.diverged) {
      EXPECT_EQ(d.direction, 1) << d.rank;
      EXPECT_GE(d.onset_step, 20) << d.rank;
      EXPECT_LE(d.onset_step, 26) << d.rank;
    }
    const std::string stayed =
        leaking.size() == 7 ? "the one that kept its baseline" : "the 2 that kept theirs";
    EXPECT_NE(report.message.find("compared with " + stayed), std::string::npos) << report.message;
  }
  // Three of four.
  DivergenceReport report = FindDivergence(JobWithLeaksOn(4, {0, 1, 2}));
  EXPECT_EQ(DivergedRanks(report), (std::vector<uint32_t>{0, 1, 2})) << report.message;
}

// What the ranks-that-kept-their-baseline reference must not do (a reviewer's cases, each of which
// named healthy ranks when the reference was the ranks near whichever one moved least).
JobStepMetrics NoisyCohort(int ranks, double growth_mib, double noise_sd_mib, unsigned seed) {
  std::mt19937 random(seed);
  std::normal_distribution<double> noise(0, noise_sd_mib * kMiB);
  JobStepMetrics job;
  job.job_id = "noisy";
  for (int r = 0; r < ranks; ++r) {
    RankStepMetrics m;
    m.rank = static_cast<uint32_t>(r);
    for (int s = 0; s < 120; ++s) {
      const auto v = static_cast<uint64_t>(30.0 * kGiB + s * growth_mib * kMiB + noise(random));
      m.step.push_back(s);
      m.start_ns.push_back(s);
      m.floor_bytes.push_back(v);
      m.end_bytes.push_back(v);
      m.peak_bytes.push_back(v);
    }
    job.ranks.push_back(std::move(m));
  }
  return job;
}

TEST(DivergenceTest, EveryRankGrowingAlikeWithNoiseHasNoDivergence) {
  for (int ranks : {8, 32}) {
    for (unsigned seed = 1; seed <= 10; ++seed) {
      const DivergenceReport report = FindDivergence(NoisyCohort(ranks, 64, 300, seed));
      EXPECT_TRUE(report.diverged.empty())
          << ranks << " ranks, seed " << seed << ": " << report.message;
    }
  }
}

TEST(DivergenceTest, ComparedByAbsoluteValuesTheOddRankIsNamed) {
  sim::JobSpec spec = sim::HealthyJob();
  for (uint32_t r = 1; r < 8; ++r) spec.offsets.push_back({r, "extra", 1 * kGiB});
  DivergenceParams absolute;
  absolute.relative_to_baseline = false;
  const DivergenceReport report = FindDivergence(Simulate(spec).timeline, absolute);
  ASSERT_EQ(DivergedRanks(report), (std::vector<uint32_t>{0})) << report.message;
  EXPECT_EQ(report.diverged[0].direction, -1);
}

// Every rank's gradients grow, and rank 5 restarts alone at step 40: its new attempt's baseline
// is its own, not the job's, and the seven that kept growing are not "above" it.
TEST(DivergenceTest, ARankRestartedAloneIsNoBaselineForTheRest) {
  sim::JobSpec spec = sim::GradAccumulationJob();
  spec.restarts.push_back({5, 40});
  const DivergenceReport report = FindDivergence(Simulate(spec).timeline);
  for (const RankDivergence& d : report.diverged) {
    EXPECT_EQ(d.rank, 5u) << report.message;
  }
}

// Leaks that start one rank after another until most ranks leak: each is named at its own onset,
// and the healthy ranks never are (they read as diverged below once the leakers were the median).
TEST(DivergenceTest, StaggeredLeaksOnMostRanksAreEachNamed) {
  sim::JobSpec spec = sim::LeakJob(0, 20, 256 * kMiB);
  for (uint32_t rank = 1; rank <= 5; ++rank) {
    spec.growths.push_back({int32_t(rank), sim::kLeakTag, "", 20 + 5 * int64_t{rank}, 256 * kMiB});
  }
  DivergenceReport report = FindDivergence(Simulate(spec).timeline);
  ASSERT_EQ(DivergedRanks(report), (std::vector<uint32_t>{0, 1, 2, 3, 4, 5})) << report.message;
  for (const RankDivergence& d : report.diverged) {
    EXPECT_EQ(d.direction, 1) << d.rank;
    EXPECT_LE(std::abs(d.onset_step - (20 + 5 * int64_t{d.rank})), 5)
        << d.rank << " " << d.onset_step << " " << report.message;
  }
}

// Half of eight ranks leaking one after another (from 20, 25, 30, 35): the last was named a step
// later than the rest, at +768 MiB where they were at +512. Its own rise moved the median of
// all eight a quarter GiB, under the threshold that let the four that kept their baseline be
// the reference, and the split of the eight was refused for the movers' own spread.
TEST(DivergenceTest, EachOfStaggeredFollowersIsNamedAtTheSameExcess) {
  sim::JobSpec spec = sim::LeakJob(0, 20, 256 * kMiB, 8, 60);
  for (uint32_t rank = 1; rank <= 3; ++rank) {
    spec.growths.push_back({int32_t(rank), sim::kLeakTag, "", 20 + 5 * int64_t{rank}, 256 * kMiB});
  }
  DivergenceReport report = FindDivergence(Simulate(spec).timeline);
  ASSERT_EQ(DivergedRanks(report), (std::vector<uint32_t>{0, 1, 2, 3})) << report.message;
  const RankDivergence& first = report.diverged[0];
  for (const RankDivergence& d : report.diverged) {
    EXPECT_EQ(d.onset_step - (20 + 5 * int64_t{d.rank}), first.onset_step - 20) << d.rank;
    // The simulator's noise moves each by a little: a step of the leak is 256 MiB.
    EXPECT_NEAR(static_cast<double>(d.excess_bytes), static_cast<double>(first.excess_bytes),
                160.0 * kMiB)
        << d.rank;
  }
}

TEST(DivergenceTest, ListsFollowersInOnsetOrder) {
  sim::JobSpec spec = sim::LeakJob(5, 30);
  spec.growths.push_back({2, "leak:other", "libfoo.so", 60, 256 * kMiB});
  spec.growths.push_back({7, "leak:third", "libfoo.so", 45, 256 * kMiB});
  DivergenceReport report = FindDivergence(Simulate(spec).timeline);
  ASSERT_EQ(report.diverged.size(), 3u);
  EXPECT_EQ(report.diverged[0].rank, 5u);
  EXPECT_EQ(report.diverged[1].rank, 7u);
  EXPECT_EQ(report.diverged[2].rank, 2u);
  EXPECT_LE(std::abs(report.diverged[1].onset_step - 45), 5);
  EXPECT_LE(std::abs(report.diverged[2].onset_step - 60), 5);
}

TEST(DivergenceTest, HealthyJobWithSpikesHasNoDivergence) {
  DivergenceReport report = FindDivergence(Simulate(sim::HealthyJob()).timeline);
  EXPECT_EQ(report.status, DivergenceStatus::kNoneDiverged) << report.message;
  EXPECT_TRUE(report.diverged.empty());
  EXPECT_TRUE(report.offsets.empty());
  EXPECT_EQ(report.steps_compared, 95u);
  EXPECT_NE(report.message.find("no rank diverged"), std::string::npos);
}

TEST(DivergenceTest, GrowthOnEveryRankIsNoDivergence) {
  DivergenceReport report = FindDivergence(Simulate(sim::GradAccumulationJob()).timeline);
  EXPECT_EQ(report.status, DivergenceStatus::kNoneDiverged) << report.message;
}

TEST(DivergenceTest, AFloorSpikeShorterThanThePersistenceWindowDoesNotCount) {
  sim::JobSpec spec = sim::HealthyJob();
  // Rank 1 holds 4 GiB for 4 whole steps in a row, once: under k = 5.
  for (int64_t s = 40; s < 44; ++s) spec.spikes.push_back({1, "burst", 1000, s, 4 * kGiB, true});
  JobTimeline job = Simulate(spec).timeline;
  EXPECT_TRUE(FindDivergence(job).diverged.empty());
  DivergenceParams shorter;
  shorter.persistence_steps = 3;
  DivergenceReport report = FindDivergence(job, shorter);
  ASSERT_EQ(report.diverged.size(), 1u);
  EXPECT_EQ(report.diverged[0].rank, 1u);
  EXPECT_EQ(report.diverged[0].onset_step, 40);
  EXPECT_EQ(report.diverged[0].run_steps, 4u);
}

TEST(DivergenceTest, AnOffsetStaysAnOffsetWhileEveryRankStillGrows) {
  // Every rank grows 128 MiB a step through the baseline steps (gradients kept on all ranks):
  // each rank's baseline moves by a divergence's worth, but not apart from the others', so rank
  // 0's extra 1 GiB is still an offset.
  sim::JobSpec spec = sim::HealthyJob();
  spec.offsets.push_back({0, "rank0:extra", 1 * kGiB});
  spec.growths.push_back({-1, "fsdp:grads", "libtorch_cuda.so", 0, 128 * kMiB});
  DivergenceReport report = FindDivergence(Simulate(spec).timeline);
  EXPECT_TRUE(report.diverged.empty());
  ASSERT_EQ(report.offsets.size(), 1u);
  EXPECT_EQ(report.offsets[0].rank, 0u);
}

TEST(DivergenceTest, ConstantOffsetIsAnOffsetNotADivergence) {
  sim::JobSpec spec = sim::HealthyJob();
  spec.offsets.push_back({0, "rank0:extra", 1 * kGiB});
  JobTimeline job = Simulate(spec).timeline;
  DivergenceReport report = FindDivergence(job);
  EXPECT_TRUE(report.diverged.empty());
  ASSERT_EQ(report.offsets.size(), 1u);
  EXPECT_EQ(report.offsets[0].rank, 0u);
  EXPECT_NEAR(double(report.offsets[0].offset_bytes), double(kGiB), 128.0 * kMiB);
  // Compared on absolute values, the same rank is out of the cohort from the first step.
  DivergenceParams absolute;
  absolute.relative_to_baseline = false;
  DivergenceReport abs_report = FindDivergence(job, absolute);
  ASSERT_EQ(abs_report.diverged.size(), 1u);
  EXPECT_EQ(abs_report.diverged[0].rank, 0u);
  EXPECT_EQ(abs_report.diverged[0].onset_step, 5);
}

TEST(DivergenceTest, ARankThatDropsIsReportedBelow) {
  sim::JobSpec spec = sim::HealthyJob();
  spec.offsets.push_back({4, "rank4:cache", 3 * kGiB});
  JobTimeline job = Simulate(spec).timeline;
  // From step 50, rank 4 releases its 3 GiB cache.
  for (StepPoint& p : job.ranks[4].steps) {
    if (p.step >= 50) p.floor_bytes -= 3 * kGiB;
  }
  DivergenceReport report = FindDivergence(job);
  ASSERT_EQ(report.diverged.size(), 1u);
  EXPECT_EQ(report.diverged[0].rank, 4u);
  EXPECT_EQ(report.diverged[0].direction, -1);
  EXPECT_EQ(report.diverged[0].onset_step, 50);
}

TEST(DivergenceTest, IdenticalRanksStillNeedTheByteThreshold) {
  JobTimeline job;
  job.job_id = "identical";
  for (uint32_t r = 0; r < 4; ++r) {
    RankTimeline t;
    t.rank = r;
    for (int64_t s = 0; s < 30; ++s) {
      StepPoint p;
      p.step = s;
      p.floor_bytes = 20 * kGiB + (r == 2 && s >= 10 ? 2 * kMiB : 0);
      t.steps.push_back(p);
    }
    job.ranks.push_back(t);
  }
  // MAD is 0: rank 2's 2 MiB has an infinite z but is far under the byte threshold.
  EXPECT_TRUE(FindDivergence(job).diverged.empty());
  for (StepPoint& p : job.ranks[2].steps) {
    if (p.step >= 10) p.floor_bytes += 1 * kGiB;
  }
  DivergenceReport report = FindDivergence(job);
  ASSERT_EQ(report.diverged.size(), 1u);
  EXPECT_TRUE(std::isinf(report.diverged[0].robust_z));
  EXPECT_EQ(report.diverged[0].onset_step, 10);
}

TEST(DivergenceTest, TwoRanksAreTooFewForACohort) {
  sim::JobSpec spec = sim::LeakJob(1, 30);
  spec.ranks = 2;
  DivergenceReport report = FindDivergence(Simulate(spec).timeline);
  EXPECT_EQ(report.status, DivergenceStatus::kTooFewRanks);
  EXPECT_TRUE(report.diverged.empty());
  EXPECT_NE(report.message.find("at least 3 ranks"), std::string::npos);
}

TEST(DivergenceTest, OnlyWarmUpStepsAreTooFewSteps) {
  sim::JobSpec spec = sim::HealthyJob();
  spec.steps = 4;
  JobTimeline job = Simulate(spec).timeline;
  DivergenceReport report = FindDivergence(job);
  EXPECT_EQ(report.status, DivergenceStatus::kTooFewSteps);
  EXPECT_EQ(report.message,
            "no step after the 5 warm-up steps had 3 ranks to compare (job has 4 steps)");
  // By time bucket (no step markers), the sentence says buckets.
  job.time_axis = true;
  job.bucket_ns = 1'000'000'000;
  EXPECT_EQ(FindDivergence(job).message,
            "no time bucket after the 5 warm-up time buckets had 3 ranks to compare (job has 4 "
            "time buckets)");
}

// Fewer compared steps than --persistence: no rank could have stayed out that long, and the
// report says so rather than "all stayed within the cohort over steps 6..6".
TEST(DivergenceTest, FewerComparedStepsThanThePersistenceAreTooFewSteps) {
  sim::JobSpec spec = sim::HealthyJob();
  spec.steps = 7;
  const DivergenceReport report = FindDivergence(Simulate(spec).timeline);
  EXPECT_EQ(report.status, DivergenceStatus::kTooFewSteps);
  EXPECT_EQ(report.message,
            "only 2 steps after the 5 warm-up steps had 3 ranks to compare, fewer than "
            "--persistence 5: no rank could be seen to diverge (job has 7 steps)");
  spec.steps = 10;  // 5 compared: enough
  EXPECT_EQ(FindDivergence(Simulate(spec).timeline).status, DivergenceStatus::kNoneDiverged);
}

TEST(DivergenceTest, StepsMissingOnARankNeitherCountNorBreakItsRun) {
  sim::JobSpec spec = sim::LeakJob(5, 30);
  JobTimeline job = Simulate(spec).timeline;
  // Rank 5 lost every other rollup after step 40 (e.g. a dropped stream segment).
  std::vector<StepPoint> kept;
  for (StepPoint& p : job.ranks[5].steps) {
    if (p.step <= 40 || p.step % 2 == 0) kept.push_back(p);
  }
  job.ranks[5].steps = kept;
  DivergenceReport report = FindDivergence(job);
  ASSERT_EQ(report.diverged.size(), 1u);
  EXPECT_EQ(report.diverged[0].rank, 5u);
  EXPECT_LE(std::abs(report.diverged[0].onset_step - 30), 5);
}

TEST(DivergenceTest, ARankWithNoPointAfterWarmUpIsNoOffset) {
  // Rank 7 died in warm-up (or just started a new attempt): it has no baseline, so it is
  // neither an offset "always 10 GiB below the cohort" nor part of the baselines' spread.
  sim::JobSpec spec = sim::HealthyJob();
  JobTimeline job = Simulate(spec).timeline;
  std::vector<StepPoint> kept;
  for (StepPoint& p : job.ranks[7].steps) {
    if (p.step < 2) kept.push_back(p);
  }
  ASSERT_FALSE(kept.empty());
  job.ranks[7].steps = kept;
  DivergenceReport report = FindDivergence(job);
  EXPECT_TRUE(report.offsets.empty()) << report.offsets.size();
  EXPECT_TRUE(report.diverged.empty());
  // A real offset next to it is still found.
  spec.offsets.push_back({0, "rank0:extra", 1 * kGiB});
  JobTimeline with_offset = Simulate(spec).timeline;
  with_offset.ranks[7].steps = kept;
  DivergenceReport second = FindDivergence(with_offset);
  ASSERT_EQ(second.offsets.size(), 1u);
  EXPECT_EQ(second.offsets[0].rank, 0u);
}

// Rank 4 ran 4 steps, all warm-up, and was compared nowhere: "all 5 ranks stayed within the
// cohort" vouched for it. Only the compared ranks are counted, and it is named.
TEST(DivergenceTest, ARankNeverComparedIsNotCountedAndIsNamed) {
  JobTimeline job = Simulate(sim::HealthyJob(5, 60)).timeline;
  job.ranks[4].steps.resize(4);
  DivergenceReport report = FindDivergence(job);
  ASSERT_EQ(report.status, DivergenceStatus::kNoneDiverged) << report.message;
  EXPECT_EQ(report.ranks, 5u);
  EXPECT_EQ(report.ranks_compared, 4u);
  EXPECT_EQ(report.ranks_not_compared, std::vector<uint32_t>{4});
  EXPECT_EQ(report.message.find("all 5 ranks"), std::string::npos) << report.message;
  EXPECT_NE(report.message.find("all 4 ranks compared (of 5)"), std::string::npos)
      << report.message;
  EXPECT_NE(report.message.find("rank 4 had no compared step"), std::string::npos)
      << report.message;
  // Every rank compared: nothing said of one left out.
  DivergenceReport full = FindDivergence(Simulate(sim::HealthyJob(5, 60)).timeline);
  EXPECT_EQ(full.ranks_compared, 5u);
  EXPECT_NE(full.message.find("all 5 ranks stayed"), std::string::npos) << full.message;
}

// Rank 3's process restarted at step 50 (a Ray actor restarted alone): its first steps there are
// its own warm-up (Adam state after its first step, 4 GiB of caches over its first 4). Counted as
// compared steps, they made its baseline, and it "diverged above" from there on.
TEST(DivergenceTest, ARestartedRankWarmsUpAgainBeforeItIsCompared) {
  sim::JobSpec spec = sim::HealthyJob();
  spec.warmup_bytes = 4 * kGiB;
  spec.warmup_steps = 4;
  spec.restarts.push_back({3, 50});
  JobTimeline job = Simulate(spec).timeline;
  ASSERT_EQ(job.ranks.size(), 9u);  // rank 3's two attempts
  DivergenceReport report = FindDivergence(job);
  EXPECT_EQ(report.status, DivergenceStatus::kNoneDiverged) << report.message;
  EXPECT_TRUE(report.diverged.empty());
  EXPECT_TRUE(report.offsets.empty());
  EXPECT_EQ(report.first_step, 5);

  // A leak on the restarted rank after its warm-up is still found, at its onset.
  spec.growths.push_back({3, sim::kLeakTag, sim::kLeakSource, 30, 256 * kMiB});
  DivergenceReport leak = FindDivergence(Simulate(spec).timeline);
  ASSERT_EQ(leak.diverged.size(), 1u) << leak.message;
  EXPECT_EQ(leak.diverged[0].rank, 3u);
  EXPECT_EQ(leak.diverged[0].attempt, 1u);
  EXPECT_LE(std::abs(leak.diverged[0].onset_step - 80), 3);
}

// Out of the cohort, but for fewer compared steps in a row than --persistence: "stayed within
// the cohort" would have hidden a rank 61 steps above it.
TEST(DivergedTest, ARunShorterThanThePersistenceIsNamed) {
  DivergenceParams params;
  params.persistence_steps = 200;
  DivergenceReport report = FindDivergence(sim::Simulate(sim::LeakJob(5, 40)).timeline, params);
  EXPECT_TRUE(report.diverged.empty());
  EXPECT_NE(report.message.find("no rank diverged for 200 compared steps in a row "
                                "(--persistence) over steps 5..99; the longest run out of the "
                                "cohort was rank 5's: "),
            std::string::npos)
      << report.message;
  // A job none of whose ranks left the cohort for two steps in a row: over 95 steps a
  // persistence of 200 could not have seen one diverge, which it says.
  const DivergenceReport healthy =
      FindDivergence(sim::Simulate(sim::HealthyJob()).timeline, params);
  EXPECT_EQ(healthy.status, DivergenceStatus::kTooFewSteps);
  EXPECT_NE(healthy.message.find("only 95 steps after the 5 warm-up steps had 3 ranks to compare, "
                                 "fewer than --persistence 200"),
            std::string::npos)
      << healthy.message;
}

// Two compared steps cannot tell an amount a rank always held from a leak that began before
// them: a rank leaking from step 1 was listed as "always held +768 MiB".
TEST(DivergedTest, TooFewBaselineStepsMakeNoOffset) {
  DivergenceReport report =
      FindDivergence(sim::Simulate(sim::LeakJob(5, 1, 256 * kMiB, 8, 7)).timeline);
  EXPECT_EQ(report.steps_compared, 2u);
  EXPECT_TRUE(report.offsets.empty()) << report.offsets[0].rank;
}

// Where a leaking rank departed is read against the ranks that kept their baseline, also when
// most ranks leak: five of eight read "drift from" the onset itself, where one of eight read
// 32 (before the split showed, the reference was every rank's median, a leaker).
TEST(DivergedTest, TheDepartureOfAMajorityThatLeaksIsReadAgainstTheRanksThatStayed) {
  const DivergenceReport one = FindDivergence(Simulate(sim::LeakJob(0, 30, 64 * kMiB)).timeline);
  ASSERT_EQ(one.diverged.size(), 1u) << one.message;
  sim::JobSpec spec = sim::LeakJob(0, 30, 64 * kMiB);
  for (uint32_t rank = 1; rank <= 4; ++rank) {
    spec.growths.push_back({rank, sim::kLeakTag, "", 30, 64 * kMiB});
  }
  const DivergenceReport five = FindDivergence(Simulate(spec).timeline);
  ASSERT_EQ(five.diverged.size(), 5u) << five.message;
  // The onset waits for the split to show (a gap of a threshold between the groups); where they
  // departed does not.
  for (const RankDivergence& d : five.diverged) {
    EXPECT_LE(std::abs(d.departure_step - one.diverged[0].departure_step), 1) << d.rank;
    EXPECT_LT(d.departure_step, d.onset_step) << d.rank;
  }
}

}  // namespace
}  // namespace memtrace::analysis
