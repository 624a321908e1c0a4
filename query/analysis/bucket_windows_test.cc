#include "query/analysis/bucket_windows.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "gtest/gtest.h"
#include "query/analysis/diverged.h"
#include "query/analysis/headroom.h"
#include "query/analysis/leaks.h"
#include "query/analysis/sim/job_simulator.h"
#include "query/analysis/sim/scenarios.h"

namespace memtrace::analysis {
namespace {

constexpr int64_t kBucketNs = 1'000'000'000;
constexpr int64_t kFirstBucket = 1'796'332'003;  // not a multiple of the window

JobTimeline StretchedIntoBuckets(const JobTimeline& steps, int64_t buckets, uint64_t activations) {
  return sim::StretchedIntoBuckets(steps, buckets, activations, kFirstBucket);
}

JobTimeline LeakInTenSecondSteps() {
  return StretchedIntoBuckets(Simulate(sim::LeakJob(5, 30, 256 * kMiB)).timeline, 10, 14 * kGiB);
}

// The window is the fewest buckets whose floors are calm on every rank: each window holds a
// bucket at a step's end or start, where the activations are gone. Over 10-bucket steps, windows
// of 8 calmed the median rank, but one in five of them held no step end and read its floor
// 1.4 GiB high: whole steps do not.
TEST(StepWindowTest, BucketsOfStepsLongerThanABucketAreReadInWholeSteps) {
  const JobTimeline job = LeakInTenSecondSteps();
  EXPECT_EQ(StepWindowOf(job), 10);
  EXPECT_EQ(StepWindowOf(StepMetricsOf(job)), 10);
  const JobTimeline five = StretchedIntoBuckets(Simulate(sim::HealthyJob()).timeline, 5, 14 * kGiB);
  EXPECT_EQ(StepWindowOf(five), 4);
  // Every window's floor is its steps' floor, as the step axis has it.
  const JobTimeline steps = Simulate(sim::HealthyJob()).timeline;
  const JobTimeline windows = InStepWindows(five, 4);
  for (const StepPoint& w : windows.ranks[0].steps) {
    const int64_t first_step = (w.start_ns / kBucketNs - kFirstBucket) / 5;
    const int64_t last_step = (w.end_ns / kBucketNs - 1 - kFirstBucket) / 5;
    uint64_t floor = UINT64_MAX;
    for (int64_t s = first_step; s <= last_step; ++s) {
      floor = std::min(floor, steps.ranks[0].steps[s].floor_bytes);
    }
    EXPECT_EQ(w.floor_bytes, floor) << w.step;
  }
}

// Found by a user: a leaking rank's steps grew longer than the others', and the windows that
// calmed the cohort (chosen by the median rank) missed every other one of its step ends. Its
// floor read 7 GiB high, its leak from its first window, its growth a third too high. Here
// rank 5's steps take 12 buckets and the others' 10: every window must hold one of its step
// ends too.
TEST(StepWindowTest, TheWindowCalmsEveryRankNotOnlyTheMedianOne) {
  const JobTimeline steps = Simulate(sim::LeakJob(5, 30, 256 * kMiB)).timeline;
  JobTimeline job = StretchedIntoBuckets(steps, 10, 14 * kGiB);
  job.ranks[5] = StretchedIntoBuckets(steps, 12, 14 * kGiB).ranks[5];
  const int64_t window = StepWindowOf(job);
  EXPECT_GT(window, 8) << "8 calms the ranks of 10-bucket steps only";
  const JobTimeline windows = InStepWindows(job, window);
  const RankTimeline& slow = windows.ranks[5];
  ASSERT_GT(slow.steps.size(), 50u);
  for (const StepPoint& w : slow.steps) {
    const int64_t first = (w.start_ns / kBucketNs - kFirstBucket) / 12;
    const int64_t last = std::min<int64_t>((w.end_ns / kBucketNs - 1 - kFirstBucket) / 12, 99);
    uint64_t highest = 0;  // of the step floors the window overlaps
    for (int64_t s = first; s <= last; ++s) {
      highest = std::max(highest, steps.ranks[5].steps[s].floor_bytes);
    }
    EXPECT_LE(w.floor_bytes, highest) << "window " << w.step << " missed its step ends";
  }
}

// Floors that climb through steps of 20 buckets or more: the climb is most of the changes, and
// measured about their median the swing read as none (no window was taken).
TEST(StepWindowTest, LongStepsWithSteadyClimbsAreWindowedToo) {
  for (int64_t buckets : {20, 25, 30}) {
    SCOPED_TRACE(buckets);
    const JobTimeline job =
        StretchedIntoBuckets(Simulate(sim::HealthyJob()).timeline, buckets, 14 * kGiB);
    EXPECT_GE(StepWindowOf(job), buckets * 2 / 3);
  }
}

// The same with the slow leaking rank stopped after 10 of its steps (an OOM): a window too wide
// to measure it (45 buckets) passed it by and was taken; windows that measure it decide.
TEST(StepWindowTest, ARankThatStoppedEarlyIsNotPassedByAWindowTooWideToMeasureIt) {
  const JobTimeline steps = Simulate(sim::LeakJob(5, 3, 256 * kMiB)).timeline;
  JobTimeline job = StretchedIntoBuckets(steps, 10, 14 * kGiB);
  RankTimeline slow = StretchedIntoBuckets(steps, 12, 14 * kGiB).ranks[5];
  slow.steps.resize(120);
  job.ranks[5] = slow;
  const int64_t window = StepWindowOf(job);
  EXPECT_GE(window, 10);
  EXPECT_LE(window, 12);
}

TEST(StepWindowTest, BucketsWhoseFloorsDoNotSwingStayAsTheyAre) {
  JobTimeline job = Simulate(sim::LeakJob(5, 30)).timeline;  // one bucket a step
  job.time_axis = true;
  job.bucket_ns = kBucketNs;
  for (RankTimeline& r : job.ranks) {
    for (StepPoint& p : r.steps) p.step += kFirstBucket;
  }
  EXPECT_EQ(StepWindowOf(job), 1);
  JobTimeline stepped = LeakInTenSecondSteps();
  stepped.time_axis = false;  // a job with step markers is never windowed
  EXPECT_EQ(StepWindowOf(stepped), 1);
}

TEST(StepWindowTest, AWindowMergesItsBucketsIntoOnePoint) {
  JobTimeline job = LeakInTenSecondSteps();
  for (RankTimeline& r : job.ranks) {
    for (StepPoint& p : r.steps) p.peak_ns = p.start_ns + 7;
  }
  const JobTimeline windows = InStepWindows(job, 10);
  EXPECT_EQ(windows.bucket_ns, 10 * kBucketNs);
  ASSERT_EQ(windows.ranks.size(), job.ranks.size());
  const std::vector<StepPoint>& buckets = job.ranks[0].steps;
  const std::vector<StepPoint>& merged = windows.ranks[0].steps;
  // 100 steps from bucket ...003: the first window holds 7 buckets, then 99 of 10, then 3.
  ASSERT_EQ(merged.size(), 101u);
  const StepPoint& second = merged[1];
  EXPECT_EQ(second.step, (kFirstBucket + 7) / 10);
  EXPECT_EQ(second.start_ns, buckets[7].start_ns);
  EXPECT_EQ(second.end_ns, buckets[16].end_ns);
  uint64_t floor = UINT64_MAX, peak = 0, allocs = 0;
  int64_t peak_ns = 0;
  for (size_t i = 7; i <= 16; ++i) {
    floor = std::min(floor, buckets[i].floor_bytes);
    if (buckets[i].peak_bytes > peak) peak_ns = buckets[i].peak_ns;
    peak = std::max(peak, buckets[i].peak_bytes);
    allocs += buckets[i].allocs;
  }
  EXPECT_EQ(second.floor_bytes, floor);
  EXPECT_EQ(second.peak_bytes, peak);
  EXPECT_EQ(second.peak_ns, peak_ns);  // when the highest bucket peaked
  EXPECT_NE(peak_ns, buckets[7].peak_ns);
  EXPECT_EQ(second.end_bytes, buckets[16].end_bytes);
  EXPECT_EQ(second.allocs, allocs);
  // A tag's live bytes are the last bucket's; one that bucket does not list held none.
  ASSERT_GE(second.by_tag().size(), buckets[16].by_tag().size());
  for (const GroupBytes& g : second.by_tag()) {
    uint64_t live = 0, peak = 0;
    for (const GroupBytes& l : buckets[16].by_tag()) {
      if (l.name == g.name) live = l.live_bytes;
    }
    for (size_t i = 7; i <= 16; ++i) {
      for (const GroupBytes& b : buckets[i].by_tag()) {
        if (b.name == g.name) peak = std::max(peak, b.peak_bytes);
      }
    }
    EXPECT_EQ(g.live_bytes, live) << windows.names.Name(g.name);
    EXPECT_EQ(g.peak_bytes, peak) << windows.names.Name(g.name);
  }
  // The step metrics are windowed alike.
  const JobStepMetrics metrics = InStepWindows(StepMetricsOf(job), 10);
  EXPECT_EQ(metrics.bucket_ns, 10 * kBucketNs);
  ASSERT_EQ(metrics.ranks[0].size(), 101u);
  EXPECT_EQ(metrics.ranks[0].floor_bytes[1], floor);
  EXPECT_EQ(metrics.ranks[0].peak_bytes[1], peak);
  EXPECT_EQ(metrics.ranks[0].end_bytes[1], buckets[16].end_bytes);
}

// A rank's bucket in progress (its agent is still sending) makes the window it falls in the
// rank's window in progress: without it, that window would be short of a bucket, its floor the
// lowest of fewer buckets.
TEST(StepWindowTest, TheWindowOfABucketInProgressIsInProgress) {
  JobTimeline job = LeakInTenSecondSteps();
  RankTimeline& rank = job.ranks[0];
  const std::vector<StepPoint> buckets = rank.steps;
  rank.MoveLastToInProgress();
  // 100 steps from bucket ...003: 7 buckets, then 99 windows of 10, then 3 (the last in progress).
  const JobTimeline windows = InStepWindows(job, 10);
  const RankTimeline& merged = windows.ranks[0];
  ASSERT_EQ(merged.steps.size(), 100u);
  ASSERT_TRUE(merged.in_progress.has_value());
  const size_t n = buckets.size();
  EXPECT_EQ(merged.in_progress->step, buckets[n - 1].step / 10);
  EXPECT_EQ(merged.in_progress->start_ns, buckets[n - 3].start_ns);
  EXPECT_EQ(merged.in_progress->end_bytes, buckets[n - 1].end_bytes);
  const uint64_t floor = std::min(
      {buckets[n - 3].floor_bytes, buckets[n - 2].floor_bytes, buckets[n - 1].floor_bytes});
  EXPECT_EQ(merged.in_progress->floor_bytes, floor);
  EXPECT_EQ(merged.steps.back().step, merged.in_progress->step - 1);
  EXPECT_FALSE(windows.ranks[1].in_progress.has_value());
  EXPECT_EQ(windows.ranks[1].steps.size(), 101u);

  const JobStepMetrics metrics = InStepWindows(StepMetricsOf(job), 10);
  ASSERT_EQ(metrics.ranks[0].size(), 100u);
  ASSERT_TRUE(metrics.ranks[0].in_progress.has_value());
  EXPECT_EQ(metrics.ranks[0].in_progress->step, merged.in_progress->step);
  EXPECT_EQ(metrics.ranks[0].in_progress->start_ns, merged.in_progress->start_ns);
  EXPECT_EQ(metrics.ranks[0].in_progress->floor_bytes, floor);
  EXPECT_EQ(metrics.ranks[0].in_progress->peak_bytes, merged.in_progress->peak_bytes);
  EXPECT_EQ(metrics.ranks[0].in_progress->end_bytes, merged.in_progress->end_bytes);
}

// The reviewer's case: a 256 MiB-a-step leak on rank 5 from step 30 of 10 s steps, without step
// markers. Bucket by bucket, the analyses saw the activations' swing; in windows of a step they
// see the leak.
TEST(StepWindowTest, TheAnalysesFindALeakInLongStepsReadInWindows) {
  const JobTimeline job = LeakInTenSecondSteps();
  const int64_t window = StepWindowOf(job);
  const JobTimeline windows = InStepWindows(job, window);
  const int64_t leak_window = (kFirstBucket + 30 * 10) / window;

  const DivergenceReport divergence = FindDivergence(windows);
  ASSERT_EQ(divergence.status, DivergenceStatus::kDiverged) << divergence.message;
  EXPECT_EQ(divergence.diverged.front().rank, 5u);
  EXPECT_LE(std::abs(divergence.diverged.front().onset_step - leak_window), 5)
      << divergence.message;

  const LeakReport leaks = FindLeaks(windows);
  bool rank5 = false;
  for (const RankCurve& c : leaks.curves) {
    if (c.rank != 5) {
      EXPECT_NE(c.curve, CurveClass::kLeak) << c.rank;
      continue;
    }
    rank5 = true;
    EXPECT_EQ(c.curve, CurveClass::kLeak);
    EXPECT_LE(std::abs(c.evidence.rising_since_step - leak_window), 3);
    // 256 MiB a 10-bucket step, per window.
    EXPECT_NEAR(c.evidence.floor_bytes_per_step, 256.0 * kMiB * window / 10, 16.0 * kMiB);
  }
  EXPECT_TRUE(rank5);

  const HeadroomReport headroom = ForecastHeadroom(windows);
  for (const RankHeadroom& h : headroom.entries) {
    EXPECT_EQ(h.status, h.rank == 5 ? HeadroomStatus::kForecast : HeadroomStatus::kFlat) << h.rank;
  }
}

TEST(CommonWindowTest, TwoBucketWidthsShareTheShortestWholeWindowAtLeastAsWide) {
  constexpr int64_t kMs = 1'000'000;
  // 250 ms and 1 s buckets, windows of 5 s asked: 5 s, 20 and 5 buckets.
  EXPECT_EQ(CommonWindowNs(250 * kMs, 1000 * kMs, 5000 * kMs), 5000 * kMs);
  // Rounded up to a whole number of both: 300 and 500 ms share 1.5 s.
  EXPECT_EQ(CommonWindowNs(300 * kMs, 500 * kMs, 2000 * kMs), 3000 * kMs);
  // 999 and 1000 ms share only 999 s: no window, rather than one 200x wider than asked.
  EXPECT_EQ(CommonWindowNs(999 * kMs, 1000 * kMs, 5000 * kMs), 0);
  // Within 4x of what was asked is taken; past it is not.
  EXPECT_EQ(CommonWindowNs(700 * kMs, 1100 * kMs, 1500 * kMs), 0);           // 7.7 s is 5.1x
  EXPECT_EQ(CommonWindowNs(700 * kMs, 1100 * kMs, 2000 * kMs), 7700 * kMs);  // 3.85x
  // Widths past an hour, or whose multiple would overflow, give none.
  EXPECT_EQ(CommonWindowNs(int64_t{3'600'000'000'001}, 1000 * kMs, 1), 0);
  EXPECT_EQ(CommonWindowNs(INT64_MAX / 2 - 1, INT64_MAX / 3, 1), 0);
  EXPECT_EQ(CommonWindowNs(0, 1000 * kMs, 1), 0);
}

}  // namespace
}  // namespace memtrace::analysis
