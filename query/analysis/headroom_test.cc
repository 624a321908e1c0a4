#include "query/analysis/headroom.h"

#include <cmath>
#include <cstdio>

#include "gtest/gtest.h"
#include "query/analysis/sim/job_simulator.h"
#include "query/analysis/sim/scenarios.h"

namespace memtrace::analysis {
namespace {

TEST(HeadroomTest, PlantedLinearLeakForecastsTheCapacityStepWithinTenPercent) {
  // Rank 3 leaks 200 MiB per step from step 20; the job is observed for 150 steps, long before
  // the leak fills the 80 GiB device.
  sim::JobSpec spec = sim::LeakJob(3, 20, 200 * kMiB, 8, 150);
  int64_t planted = sim::PlantedCapacityStep(spec, 3);
  ASSERT_GT(planted, 150);
  JobTimeline job = sim::Simulate(spec).timeline;
  HeadroomReport report = ForecastHeadroom(job);
  EXPECT_EQ(report.forecasts, 1u);
  const RankHeadroom& h = report.entries[0];
  EXPECT_EQ(h.rank, 3u);
  ASSERT_EQ(h.status, HeadroomStatus::kForecast);
  EXPECT_LE(std::abs(double(h.forecast_step - planted)), 0.1 * planted)
      << "forecast " << h.forecast_step << " planted " << planted;
  std::printf("headroom: planted step %lld, forecast %lld\n", (long long)planted,
              (long long)h.forecast_step);
  EXPECT_NEAR(h.floor_bytes_per_step, 200.0 * kMiB, 2.0 * kMiB);
  EXPECT_EQ(h.capacity_bytes, 80 * kGiB);
  EXPECT_TRUE(h.capacity_from_samples);
  EXPECT_EQ(h.overhead_bytes, 600 * kMiB);
  EXPECT_DOUBLE_EQ(h.step_ns, 2e9);
  EXPECT_EQ(h.eta_ns, int64_t(h.forecast_step - 149) * 2'000'000'000);
  EXPECT_GT(h.floor_forecast_step, h.forecast_step);
  for (size_t i = 1; i < report.entries.size(); ++i) {
    EXPECT_EQ(report.entries[i].status, HeadroomStatus::kFlat) << report.entries[i].rank;
    EXPECT_EQ(report.entries[i].forecast_step, -1);
  }
}

// The step a running rank is in is no step of the trend, but its peak so far was reached, and
// its OOM happened: ignored, a rank whose step in progress had passed the device read 20 GiB of
// headroom, and one that had run out of memory in it read "flat".
TEST(HeadroomTest, TheStepInProgressRaisesTheLatestPeakAndCarriesItsOom) {
  JobTimeline job = sim::Simulate(sim::HealthyJob()).timeline;
  for (RankTimeline& r : job.ranks) r.MoveLastToInProgress();
  const HeadroomReport before = ForecastHeadroom(job);
  ASSERT_EQ(before.entries.size(), job.ranks.size());
  for (const RankHeadroom& h : before.entries) {
    EXPECT_NE(h.status, HeadroomStatus::kAtCapacity) << h.rank;
    EXPECT_NE(h.status, HeadroomStatus::kOutOfMemory) << h.rank;
  }
  job.ranks[2].in_progress->peak_bytes = 79 * kGiB + 800 * kMiB;  // past 80 GiB - 600 MiB outside
  job.ranks[5].in_progress->ooms = 1;
  const HeadroomReport after = ForecastHeadroom(job);
  for (const RankHeadroom& h : after.entries) {
    if (h.rank == 2) {
      EXPECT_EQ(h.status, HeadroomStatus::kAtCapacity);
      EXPECT_EQ(h.last_peak_bytes, 79 * kGiB + 800 * kMiB);
      EXPECT_EQ(h.headroom_bytes, 0u);
    } else if (h.rank == 5) {
      EXPECT_EQ(h.status, HeadroomStatus::kOutOfMemory);
      EXPECT_EQ(h.forecast_step, job.ranks[5].in_progress->step);
    } else {
      EXPECT_EQ(h.status, before.entries[0].status) << h.rank;
    }
    // The trend and the date are the steps': the last one ended.
    EXPECT_EQ(h.last_step, job.ranks[h.rank].steps.back().step) << h.rank;
  }
  // A rank whose only row is in progress has no trend, but its OOM is news, and so is a peak
  // already past the device (it read "too short").
  job.ranks[5].steps.clear();
  job.ranks[2].steps.clear();
  job.ranks[3].steps.clear();
  for (const RankHeadroom& h : ForecastHeadroom(job).entries) {
    if (h.rank == 5) EXPECT_EQ(h.status, HeadroomStatus::kOutOfMemory);
    if (h.rank == 2) {
      EXPECT_EQ(h.status, HeadroomStatus::kAtCapacity);
      EXPECT_EQ(h.last_peak_bytes, 79 * kGiB + 800 * kMiB);
      EXPECT_EQ(h.capacity_bytes, 80 * kGiB);
      EXPECT_EQ(h.overhead_bytes, 600 * kMiB) << "from the row in progress's device sample";
      EXPECT_EQ(h.headroom_bytes, 0u);
      EXPECT_EQ(h.last_step, job.ranks[2].in_progress->step);
    }
    if (h.rank == 3) {
      EXPECT_EQ(h.status, HeadroomStatus::kTooShort) << "under the device: no trend yet";
      EXPECT_GT(h.headroom_bytes, 0u);
    }
  }
}

// An eval pass every 10 steps needs 18 GiB more: the rank runs out of memory on such a step,
// long before a typical step's peak would reach the capacity. The forecast is that step (at
// most one period early), not where the median step gets.
// A window shorter than min_points made every rank "too short" without a word.
TEST(HeadroomTest, ARecentWindowTooShortToFitIsRefused) {
  HeadroomParams params;
  params.recent_steps = 7;
  absl::Status s = CheckHeadroomParams(params);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("at least 8"), std::string::npos) << s.message();
  for (uint32_t ok : {0u, 8u, 50u}) {
    params.recent_steps = ok;
    EXPECT_TRUE(CheckHeadroomParams(params).ok()) << ok;
  }
}

// Found by a user: with --warmup past a rank's steps (or a profiler trace of 5 steps), the rank
// is too short to forecast, and its "outside" read 0 B and its headroom the whole capacity
// less its peak. What the device holds outside traced allocations is read from every step then.
TEST(HeadroomTest, ARankTooShortToForecastStillReadsWhatTheDeviceHoldsOutside) {
  JobTimeline job = sim::Simulate(sim::LeakJob(3, 20, 200 * kMiB, 8, 150)).timeline;
  HeadroomParams params;
  params.warmup_steps = 200;
  HeadroomReport report = ForecastHeadroom(job, params);
  ASSERT_EQ(report.entries.size(), 8u);
  for (const RankHeadroom& h : report.entries) {
    EXPECT_EQ(h.status, HeadroomStatus::kTooShort) << h.rank;
    EXPECT_EQ(h.overhead_bytes, 600 * kMiB) << h.rank;
    EXPECT_EQ(h.headroom_bytes, 80 * kGiB - 600 * kMiB - h.last_peak_bytes) << h.rank;
  }
}

TEST(HeadroomTest, APeriodicSpikeIsWhatRunsOutFirst) {
  sim::JobSpec spec = sim::LeakJob(2, 10, 200 * kMiB, 8, 60);
  spec.spikes.push_back({-1, "eval", 10, 0, 18 * kGiB});
  const int64_t planted = sim::PlantedCapacityStep(spec, 2);
  ASSERT_GT(planted, 60);
  sim::JobSpec without_spikes = spec;
  without_spikes.spikes.clear();
  ASSERT_GT(sim::PlantedCapacityStep(without_spikes, 2), planted + 50);
  HeadroomReport report = ForecastHeadroom(sim::Simulate(spec).timeline);
  ASSERT_EQ(report.forecasts, 1u);
  const RankHeadroom& h = report.entries[0];
  EXPECT_EQ(h.rank, 2u);
  EXPECT_LE(h.forecast_step, planted);
  EXPECT_GE(h.forecast_step, planted - 12) << "planted " << planted;
  EXPECT_GE(h.transient_bytes, 18 * kGiB);
}

TEST(HeadroomTest, ALeakThatStartsLateIsForecastAtItsOwnRate) {
  // 256 MiB a step from step 55 of 80: the last 50 steps are mostly flat, and one line over
  // them forecast the capacity ~160 steps late.
  sim::JobSpec spec = sim::LeakJob(4, 55, 256 * kMiB, 8, 80);
  int64_t planted = sim::PlantedCapacityStep(spec, 4);
  ASSERT_GT(planted, 80);
  HeadroomReport report = ForecastHeadroom(sim::Simulate(spec).timeline);
  const RankHeadroom& h = report.entries[0];
  EXPECT_EQ(h.rank, 4u);
  ASSERT_EQ(h.status, HeadroomStatus::kForecast);
  EXPECT_NEAR(h.floor_bytes_per_step, 256.0 * kMiB, 0.05 * 256 * kMiB);
  EXPECT_LE(std::abs(double(h.forecast_step - planted)), 0.1 * planted)
      << "forecast " << h.forecast_step << " planted " << planted;
}

TEST(HeadroomTest, ALeakOfTheLastFewStepsIsForecast) {
  // 1 GiB a step from step 95 of 100: too few steps for the trend test, so the rank read as
  // flat while it was 60-odd steps from running out.
  sim::JobSpec spec = sim::LeakJob(4, 95, 1 * kGiB, 8, 100);
  int64_t planted = sim::PlantedCapacityStep(spec, 4);
  ASSERT_GT(planted, 100);
  HeadroomReport report = ForecastHeadroom(sim::Simulate(spec).timeline);
  EXPECT_EQ(report.forecasts, 1u);
  const RankHeadroom& h = report.entries[0];
  EXPECT_EQ(h.rank, 4u);
  ASSERT_EQ(h.status, HeadroomStatus::kForecast);
  EXPECT_NEAR(h.floor_bytes_per_step, 1.0 * kGiB, 0.05 * kGiB);
  EXPECT_LE(std::abs(double(h.forecast_step - planted)), 0.1 * planted)
      << "forecast " << h.forecast_step << " planted " << planted;
}

TEST(HeadroomTest, ACapacityBelowWhatTheRankUsesIsNotAForecast) {
  sim::JobSpec spec = sim::LeakJob(3, 20, 200 * kMiB, 8, 150);
  HeadroomParams params;
  params.capacity_bytes = 25 * kGiB;  // every rank peaks above 30 GiB
  JobTimeline job = sim::Simulate(spec).timeline;
  // The last row has only begun (a running job's step, or a job's final time bucket holding its
  // last milliseconds): its peak is no more than its floor.
  for (RankTimeline& r : job.ranks) r.steps.back().peak_bytes = r.steps.back().floor_bytes;
  HeadroomReport report = ForecastHeadroom(job, params);
  EXPECT_EQ(report.forecasts, 0u);
  for (const RankHeadroom& h : report.entries) {
    EXPECT_EQ(h.status, HeadroomStatus::kAtCapacity) << h.rank;
    EXPECT_EQ(h.headroom_bytes, 0u);
    EXPECT_EQ(h.forecast_step, -1);
  }
}

// A rank already at the capacity comes before the flat ones, as the soonest trouble.
TEST(HeadroomTest, ARankAtCapacityIsListedFirst) {
  HeadroomParams params;
  params.capacity_bytes = 45 * kGiB;  // the leaking rank 3 peaks above it, the others ~35 GiB
  HeadroomReport report =
      ForecastHeadroom(sim::Simulate(sim::LeakJob(3, 20, 200 * kMiB, 8, 150)).timeline, params);
  ASSERT_FALSE(report.entries.empty());
  EXPECT_EQ(report.entries[0].rank, 3u);
  EXPECT_EQ(report.entries[0].status, HeadroomStatus::kAtCapacity);
  for (size_t i = 1; i < report.entries.size(); ++i) {
    EXPECT_EQ(report.entries[i].status, HeadroomStatus::kFlat) << report.entries[i].rank;
  }
}

TEST(HeadroomTest, HealthyJobHasNoForecast) {
  HeadroomReport report = ForecastHeadroom(sim::Simulate(sim::HealthyJob()).timeline);
  EXPECT_EQ(report.forecasts, 0u);
  for (const RankHeadroom& h : report.entries) {
    EXPECT_EQ(h.status, HeadroomStatus::kFlat);
    EXPECT_GT(h.headroom_bytes, 40 * kGiB);
  }
}

TEST(HeadroomTest, AGivenCapacityOverridesTheSamples) {
  sim::JobSpec spec = sim::LeakJob(3, 20, 200 * kMiB, 8, 150);
  JobTimeline job = sim::Simulate(spec).timeline;
  HeadroomParams params;
  params.capacity_bytes = 70 * kGiB;
  HeadroomReport report = ForecastHeadroom(job, params);
  sim::JobSpec smaller = spec;
  smaller.device_total = 70 * kGiB;
  int64_t planted = sim::PlantedCapacityStep(smaller, 3);
  ASSERT_GT(planted, 150);  // after the observed steps
  EXPECT_EQ(report.entries[0].rank, 3u);
  EXPECT_FALSE(report.entries[0].capacity_from_samples);
  EXPECT_LE(std::abs(double(report.entries[0].forecast_step - planted)), 0.1 * planted);
}

TEST(HeadroomTest, WithoutCapacityThereIsNoForecast) {
  sim::JobSpec spec = sim::LeakJob(3, 20, 200 * kMiB, 4, 60);
  JobTimeline job = sim::Simulate(spec).timeline;
  for (RankTimeline& r : job.ranks) {
    for (StepPoint& p : r.steps) p.device_total = p.device_used_max = 0;
  }
  HeadroomReport report = ForecastHeadroom(job);
  EXPECT_EQ(report.forecasts, 0u);
  for (const RankHeadroom& h : report.entries) EXPECT_EQ(h.status, HeadroomStatus::kNoCapacity);
}

TEST(HeadroomTest, AForecastTooFarOutForItsTimeIsFlatNotANegativeEta) {
  // Steps of 4000 s instead of 2 s: within the horizon of 10^7 steps, a capacity millions of
  // steps away is ~10^19 ns away, past what eta_ns holds.
  sim::JobSpec spec = sim::LeakJob(3, 20, 200 * kMiB, 4, 150);
  JobTimeline job = sim::Simulate(spec).timeline;
  for (RankTimeline& r : job.ranks) {
    for (StepPoint& p : r.steps) {
      p.start_ns *= 2000;
      p.end_ns *= 2000;
    }
  }
  HeadroomParams params;
  params.capacity_bytes = 1024 * kGiB;  // ~5000 steps of 200 MiB: ~230 days
  RankHeadroom near = ForecastHeadroom(job, params).entries[0];
  EXPECT_EQ(near.rank, 3u);
  ASSERT_EQ(near.status, HeadroomStatus::kForecast);
  EXPECT_GT(near.eta_ns, 0);
  EXPECT_DOUBLE_EQ(near.step_ns, 4e12);
  params.capacity_bytes = 600 * 1024 * kGiB;  // ~3 M steps: ~380 years
  HeadroomReport far = ForecastHeadroom(job, params);
  EXPECT_EQ(far.forecasts, 0u);
  for (const RankHeadroom& h : far.entries) {
    EXPECT_EQ(h.status, HeadroomStatus::kFlat) << h.rank;
    EXPECT_EQ(h.eta_ns, 0) << h.rank;
  }
}

TEST(HeadroomTest, ARankThatAlreadyRanOutSaysSo) {
  sim::JobSpec spec = sim::OomJob();
  sim::SimulatedJob job = sim::Simulate(spec);
  HeadroomReport report = ForecastHeadroom(job.timeline);
  ASSERT_FALSE(report.entries.empty());
  EXPECT_EQ(report.entries[0].rank, 3u);
  EXPECT_EQ(report.entries[0].status, HeadroomStatus::kOutOfMemory);
  EXPECT_EQ(report.entries[0].forecast_step, job.oom->step);
  // How fast it got there (512 MiB a step from step 10), not 0.
  EXPECT_NEAR(report.entries[0].floor_bytes_per_step, 512.0 * kMiB, 0.05 * 512 * kMiB);
}

}  // namespace
}  // namespace memtrace::analysis
