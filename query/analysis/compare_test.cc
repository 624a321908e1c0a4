#include "query/analysis/compare.h"

#include "gtest/gtest.h"
#include "query/analysis/sim/job_simulator.h"
#include "query/analysis/sim/scenarios.h"

namespace memtrace::analysis {
namespace {

const CompareItem* Find(const CompareReport& r, const std::string& analysis,
                        const std::string& subject) {
  for (const CompareItem& it : r.items) {
    if (it.analysis == analysis && it.subject == subject) return &it;
  }
  return nullptr;
}

TEST(CompareTest, ALeakFixedBetweenTwoJobsShowsAsChanges) {
  JobTimeline before = sim::Simulate(sim::LeakJob(5, 30, 128 * kMiB)).timeline;
  sim::JobSpec fixed = sim::HealthyJob();
  fixed.job_id = "fixed";
  JobTimeline after = sim::Simulate(fixed).timeline;
  CompareReport report = CompareJobs(before, after);
  EXPECT_EQ(report.job_a, "leak");
  EXPECT_EQ(report.job_b, "fixed");

  const CompareItem* d = Find(report, "diverged", "first rank");
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(d->changed);
  EXPECT_EQ(d->b, "none");
  EXPECT_EQ(d->a.rfind("rank 5 at step ", 0), 0u) << d->a;

  const CompareItem* g = Find(report, "growth", sim::kLeakTag);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->changed);
  EXPECT_EQ(g->b, "-");
  EXPECT_GT(g->a_value, 100.0 * kMiB);

  const CompareItem* l = Find(report, "leaks", "leaking ranks");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->a, "rank 5");
  EXPECT_EQ(l->b, "none");

  const CompareItem* f = Find(report, "floor", "median final floor");
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(f->changed);  // one rank of eight leaked: the median floor is the same

  // Changed items come first.
  bool seen_unchanged = false;
  for (const CompareItem& it : report.items) {
    if (!it.changed) seen_unchanged = true;
    if (seen_unchanged) {
      EXPECT_FALSE(it.changed) << it.analysis << " " << it.subject;
    }
  }
}

// A rank already at the capacity is the soonest trouble: the headroom row names it.
TEST(CompareTest, ARankAtCapacityIsNamedInTheHeadroomRow) {
  JobTimeline leak = sim::Simulate(sim::LeakJob(3, 20, 200 * kMiB, 8, 150)).timeline;
  sim::JobSpec healthy = sim::HealthyJob(8, 150);
  healthy.job_id = "healthy";
  CompareParams params;
  params.headroom.capacity_bytes = 45 * kGiB;  // rank 3 of the leak peaks above it
  CompareReport report = CompareJobs(leak, sim::Simulate(healthy).timeline, params);
  const CompareItem* h = Find(report, "headroom", "soonest full rank");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->a, "rank 3 at capacity");
  EXPECT_EQ(h->b, "no forecast");
  EXPECT_TRUE(h->changed);
}

TEST(CompareTest, AJobComparedWithItselfHasNoChanges) {
  JobTimeline job = sim::Simulate(sim::GradAccumulationJob()).timeline;
  CompareReport report = CompareJobs(job, job);
  for (const CompareItem& it : report.items) {
    EXPECT_FALSE(it.changed) << it.analysis << " " << it.subject << ": " << it.a << " vs " << it.b;
  }
  EXPECT_NE(Find(report, "growth", "fsdp:grads"), nullptr);
}

// Gradients kept on 8 ranks grow 64 MiB/step on each: the item read "512 MiB/step on all 8
// ranks", the sum, which a user takes for each GPU's growth.
TEST(CompareTest, GrowthOnSeveralRanksIsGivenPerRank) {
  JobTimeline job = sim::Simulate(sim::GradAccumulationJob()).timeline;
  CompareReport report = CompareJobs(job, job);
  const CompareItem* g = Find(report, "growth", "fsdp:grads");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->a, "64.0 MiB/step per rank on all 8 ranks");
  EXPECT_NEAR(g->a_value, 8 * 64.0 * kMiB, 8 * kMiB);  // the value stays the sum

  JobTimeline leak = sim::Simulate(sim::LeakJob(5, 30, 256 * kMiB)).timeline;
  CompareReport leak_report = CompareJobs(leak, leak);
  const CompareItem* one = Find(leak_report, "growth", sim::kLeakTag);
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->a, "256 MiB/step on 1 rank");
}

// Rank 7 stopped in warm-up, too short to fit: the gradients grow on all 7 ranks fitted, of 8.
TEST(CompareTest, GrowthOnAllFittedRanksSaysOfHowMany) {
  JobTimeline job = sim::Simulate(sim::GradAccumulationJob()).timeline;
  job.ranks[7].steps.resize(2);
  CompareReport report = CompareJobs(job, job);
  const CompareItem* g = Find(report, "growth", "fsdp:grads");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->a, "64.0 MiB/step per rank on all 7 of 8 ranks");
}

TEST(CompareTest, ALowerRolloutPeakIsReported) {
  sim::JobSpec a = sim::RlJob(false);
  sim::JobSpec b = sim::RlJob(false);
  b.phases[0].peak_bytes = 16 * kGiB;  // smaller KV cache
  CompareReport report = CompareJobs(sim::Simulate(a).timeline, sim::Simulate(b).timeline);
  const CompareItem* p = Find(report, "peak", "rollout");
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->changed);
  EXPECT_NEAR(p->a_value - p->b_value, 8.0 * kGiB, 0.1 * kGiB);
  const CompareItem* u = Find(report, "peak", "actor_update");
  ASSERT_NE(u, nullptr);
  EXPECT_FALSE(u->changed);
}

// Neither job has phases, so there are no phase peaks: the job's highest step peak still shows
// a 30 GiB spike added in B (it read "0 differences").
TEST(CompareTest, AHigherPeakInAJobWithoutPhasesIsReported) {
  sim::JobSpec a = sim::HealthyJob();
  sim::JobSpec b = sim::HealthyJob();
  b.spikes.push_back({-1, "eval", 10, 3, 30 * kGiB});
  CompareReport report = CompareJobs(sim::Simulate(a).timeline, sim::Simulate(b).timeline);
  const CompareItem* p = Find(report, "peak", "highest step peak");
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->changed);
  EXPECT_GT(p->b_value - p->a_value, 25.0 * kGiB);  // ~30 GiB; the highest steps differ in noise
  EXPECT_EQ(report.items.front().subject, "highest step peak");  // changed items first
}

// The step an OOM cut short (RankTimeline::cut_short, read as a row in progress) is often the
// highest: counted, as FindPeaks counts it.
TEST(CompareTest, TheHighestPeakCountsAStepCutShort) {
  JobTimeline job = sim::Simulate(sim::HealthyJob()).timeline;
  RankTimeline& rank = job.ranks[2];
  rank.steps.back().peak_bytes = 90 * kGiB;
  rank.MoveLastToInProgress();
  rank.cut_short = true;
  const JobAnalyses analyses = AnalyzeJob(job);
  EXPECT_EQ(analyses.max_peak_bytes, 90 * kGiB);
  EXPECT_EQ(analyses.max_peak_rank, 2u);
}

// A job without step markers (keyed by time bucket) against one with them: the same growth per
// key is no sameness, and the report says first that the two are keyed differently.
TEST(CompareTest, JobsKeyedDifferentlySayFirstHow) {
  JobTimeline stepped = sim::Simulate(sim::LeakJob(5, 30)).timeline;
  JobTimeline bucketed = stepped;
  bucketed.job_id = "bucketed";
  bucketed.time_axis = true;
  bucketed.bucket_ns = 1'000'000'000;
  CompareReport report = CompareJobs(stepped, bucketed);
  ASSERT_FALSE(report.items.empty());
  EXPECT_EQ(report.items.front().analysis, "axis");
  EXPECT_TRUE(report.items.front().changed);
  EXPECT_EQ(report.items.front().a, "steps");
  EXPECT_EQ(report.items.front().b, "1s time buckets");
  const CompareReport itself = CompareJobs(stepped, stepped);
  const CompareItem* same = Find(itself, "axis", "compared by");
  ASSERT_NE(same, nullptr);
  EXPECT_FALSE(same->changed);
  // Buckets of 1 s and 1.4 s (another --bucket_ms, or another window of whole steps) are keyed
  // differently too: both printed "1 s" and the axis read unchanged.
  JobTimeline wider = bucketed;
  wider.bucket_ns = 1'400'000'000;
  const CompareReport widened = CompareJobs(bucketed, wider);
  const CompareItem* widths = Find(widened, "axis", "compared by");
  ASSERT_NE(widths, nullptr);
  EXPECT_TRUE(widths->changed);
  EXPECT_EQ(widths->a, "1s time buckets");
  EXPECT_EQ(widths->b, "1.4s time buckets");
}

// Jobs without step markers are keyed by wall-clock time buckets: the same job run twice, at
// different times, read as "rank 5 at <one time> | rank 5 at <another>  changed".
TEST(CompareTest, TheSameJobRunAtAnotherTimeHasNoChangesOnTheTimeAxis) {
  const auto at = [](int64_t first_bucket) {
    JobTimeline job = sim::Simulate(sim::LeakJob(5, 30, 1 * kGiB)).timeline;
    job.time_axis = true;
    job.bucket_ns = 1'000'000'000;
    for (RankTimeline& r : job.ranks) {
      for (StepPoint& p : r.steps) p.step += first_bucket;
    }
    return job;
  };
  const CompareReport report = CompareJobs(at(1'796'000'000), at(1'796'000'200));
  for (const CompareItem& it : report.items) {
    EXPECT_FALSE(it.changed) << it.analysis << " " << it.subject << ": " << it.a << " vs " << it.b;
  }
  const CompareItem* diverged = Find(report, "diverged", "first rank");
  ASSERT_NE(diverged, nullptr);
  EXPECT_EQ(diverged->a.rfind("rank 5 at +", 0), 0u) << diverged->a;
  EXPECT_NE(diverged->a.find(" into the job"), std::string::npos) << diverged->a;
  const CompareItem* headroom = Find(report, "headroom", "soonest full rank");
  ASSERT_NE(headroom, nullptr);
  EXPECT_NE(headroom->a.find("into the job"), std::string::npos) << headroom->a;
}

}  // namespace
}  // namespace memtrace::analysis
