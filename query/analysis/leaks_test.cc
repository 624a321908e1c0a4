#include "query/analysis/leaks.h"

#include <algorithm>
#include <cstdlib>

#include "gtest/gtest.h"
#include "query/analysis/sim/job_simulator.h"
#include "query/analysis/sim/scenarios.h"

namespace memtrace::analysis {
namespace {

using sim::Simulate;

const RankCurve& CurveOf(const LeakReport& report, uint32_t rank) {
  for (const RankCurve& c : report.curves) {
    if (c.rank == rank) return c;
  }
  static const RankCurve kNone;
  ADD_FAILURE() << "no curve for rank " << rank;
  return kNone;
}

TEST(LeakTest, RisingFloorOnRankFiveIsALeakAndTheRestAreNot) {
  JobTimeline job = Simulate(sim::LeakJob(5, 30, 128 * kMiB)).timeline;
  LeakReport report = FindLeaks(job);
  ASSERT_EQ(report.curves.size(), 8u);
  EXPECT_EQ(report.leaking_ranks, 1u);
  const RankCurve& leak = CurveOf(report, 5);
  EXPECT_EQ(leak.curve, CurveClass::kLeak);
  EXPECT_NEAR(leak.evidence.recent_bytes_per_step, 128.0 * kMiB, 0.02 * 128 * kMiB);
  EXPECT_GT(leak.evidence.floor_end_bytes, leak.evidence.floor_start_bytes + 8 * kGiB);
  EXPECT_LE(std::abs(leak.evidence.rising_since_step - 30), 2);
  // A leak's rising peaks are not spikes.
  EXPECT_EQ(leak.evidence.first_spikes, (std::vector<int64_t>{50}));
  for (const RankCurve& c : report.curves) {
    if (c.rank != 5) {
      EXPECT_NE(c.curve, CurveClass::kLeak) << "rank " << c.rank;
    }
  }
}

TEST(LeakTest, ALeaksLastStepsAreNotSpikes) {
  // The floor's running median, cut short at the series' end, lagged a floor rising 256 MiB a
  // step by ~2.5 steps' worth (640 MiB), which read as spikes in a leak's last steps whenever
  // its steps were as regular as these.
  JobTimeline job = Simulate(sim::LeakJob(5, 30, 256 * kMiB)).timeline;
  for (StepPoint& p : job.ranks[5].steps) {
    p.floor_bytes =
        14 * kGiB + 256 * kMiB * static_cast<uint64_t>(std::max<int64_t>(0, p.step - 30));
    p.peak_bytes = p.floor_bytes + 10 * kGiB + (p.step == 50 ? kGiB : 0);
  }
  LeakReport report = FindLeaks(job);
  const RankCurve& leak = CurveOf(report, 5);
  EXPECT_EQ(leak.curve, CurveClass::kLeak);
  EXPECT_EQ(leak.evidence.first_spikes, (std::vector<int64_t>{50}));
}

// 4 GiB a step from step 88 of 100: each step's peak rises by the allocation, which the floor
// follows one step later. That read "spikes: 9 (max +4.11 GiB, every ~1 step)" on a pure leak.
TEST(LeakTest, ALargeLeaksRisingPeaksThatTheNextFloorKeepsAreNotSpikes) {
  for (int64_t start : {88, 30}) {
    sim::JobSpec spec = sim::LeakJob(4, start, 4 * kGiB);
    spec.device_total = 1000 * kGiB;
    spec.spikes.clear();
    LeakReport report = FindLeaks(sim::Simulate(spec).timeline);
    const RankCurve& c = CurveOf(report, 4);
    EXPECT_EQ(c.curve, CurveClass::kLeak) << start;
    EXPECT_EQ(c.evidence.spike_steps, 0u)
        << start << ": first at "
        << (c.evidence.first_spikes.empty() ? -1 : c.evidence.first_spikes[0]);
  }
  // The same leak run to an OOM.
  LeakReport oom = FindLeaks(sim::Simulate(sim::OomJob()).timeline);
  EXPECT_EQ(CurveOf(oom, 3).evidence.spike_steps, 0u);
}

TEST(LeakTest, ALeakFromBeforeTheWindowRisesSinceItsFirstStep) {
  // From step 1, under warm-up: the floor rises from the first step examined (5). The median
  // of the first tenth of the floors put the start mid-rise, "rising since 10".
  JobTimeline job = Simulate(sim::LeakJob(4, 1, 256 * kMiB)).timeline;
  const LeakReport report = FindLeaks(job);
  const RankCurve& leak = CurveOf(report, 4);
  EXPECT_EQ(leak.curve, CurveClass::kLeak);
  EXPECT_EQ(leak.evidence.rising_since_step, leak.evidence.first_step);
  EXPECT_EQ(leak.evidence.first_step, 5);
  EXPECT_TRUE(leak.evidence.rising_from_first_examined);
}

TEST(LeakTest, ALeakAfterAOnePointFlatStartDidNotRiseFromTheFirstStepExamined) {
  // From step 5, the first step examined: the floor is flat there and rises after it. Its
  // rising_since_step is the first step too, which alone read as "may have begun earlier".
  JobTimeline job = Simulate(sim::LeakJob(4, 5, 256 * kMiB)).timeline;
  const RankCurve& leak = CurveOf(FindLeaks(job), 4);
  EXPECT_EQ(leak.curve, CurveClass::kLeak);
  EXPECT_EQ(leak.evidence.first_step, 5);
  EXPECT_EQ(leak.evidence.rising_since_step, 5);
  EXPECT_FALSE(leak.evidence.rising_from_first_examined);
}

TEST(LeakTest, ALeakFromAFewStepsAfterWarmupRisesSinceItsOwnStart) {
  // From step 9, four steps after warm-up: too few flat steps for the floor's fit to split them
  // off, so the rise was said to start at the first step examined (5).
  JobTimeline job = Simulate(sim::LeakJob(3, 9, 128 * kMiB)).timeline;
  const LeakReport report = FindLeaks(job);
  const RankCurve& leak = CurveOf(report, 3);
  EXPECT_EQ(leak.curve, CurveClass::kLeak);
  EXPECT_EQ(leak.evidence.first_step, 5);
  EXPECT_LE(std::abs(leak.evidence.rising_since_step - 9), 1);
}

TEST(LeakTest, ALeakThatBeganAFewStepsBeforeTheEndIsALeak) {
  // 1 GiB a step from step 95 of 100: four steps' rises, too few for the floor's fit to split
  // off or for its trend test, so the rank read as no leak (its healthy spikes named instead).
  for (int64_t start : {94, 96}) {
    SCOPED_TRACE(start);
    const LeakReport report = FindLeaks(Simulate(sim::LeakJob(6, start, 1 * kGiB)).timeline);
    EXPECT_EQ(report.leaking_ranks, 1u);
    const RankCurve& leak = CurveOf(report, 6);
    EXPECT_EQ(leak.curve, CurveClass::kLeak);
    EXPECT_EQ(leak.evidence.rising_since_step, start);
    EXPECT_NEAR(leak.evidence.floor_bytes_per_step, 1.0 * kGiB, 0.05 * kGiB);
  }
}

TEST(LeakTest, AWholeStepSpikeInTheFirstOrLastStepIsASpike) {
  // A checkpoint at the end of training (or in the step open now) holds 4 GiB for the whole
  // step: floor and peak both rise, and only the steps around it tell it from the floor.
  for (bool last : {false, true}) {
    SCOPED_TRACE(last ? "last step" : "first step");
    sim::JobSpec spec;
    spec.ranks = 4;
    JobTimeline job = Simulate(spec).timeline;
    std::vector<StepPoint>& steps = job.ranks[2].steps;
    for (StepPoint& p : steps) {
      p.floor_bytes = 14 * kGiB;
      p.peak_bytes = 24 * kGiB;
    }
    LeakParams params;
    params.warmup_steps = 0;
    StepPoint& p = last ? steps.back() : steps.front();
    p.floor_bytes += 4 * kGiB;
    p.peak_bytes += 4 * kGiB;
    const LeakReport report = FindLeaks(job, {}, params);
    const RankCurve& c = CurveOf(report, 2);
    ASSERT_EQ(c.evidence.first_spikes.size(), 1u);
    EXPECT_EQ(c.evidence.first_spikes[0], p.step);
  }
}

TEST(LeakTest, ALeakThatStartsLateIsALeakAtItsOwnRate) {
  // 64 MiB a step over the last 20 of the 95 steps after warm-up: one line over the window
  // measured a quarter of it and called the rank a plateau.
  JobTimeline job = Simulate(sim::LeakJob(6, 80, 64 * kMiB)).timeline;
  LeakReport report = FindLeaks(job);
  EXPECT_EQ(report.leaking_ranks, 1u);
  const RankCurve& leak = CurveOf(report, 6);
  EXPECT_EQ(leak.curve, CurveClass::kLeak);
  EXPECT_NEAR(leak.evidence.floor_bytes_per_step, 64.0 * kMiB, 0.05 * 64 * kMiB);
  EXPECT_LE(std::abs(leak.evidence.rising_since_step - 80), 2);
}

TEST(LeakTest, HealthyJobHasSpikesAndPlateausButNoLeak) {
  sim::JobSpec spec = sim::HealthyJob();
  JobTimeline job = Simulate(spec).timeline;
  std::vector<RankLiveSet> live;
  for (uint32_t r = 0; r < spec.ranks; ++r) {
    live.push_back(sim::LiveAt(spec, r, 99, sim::Moment::kEnd));
  }
  LeakReport report = FindLeaks(job, live);
  EXPECT_EQ(report.leaking_ranks, 0u);
  // Rank 0: eval (+3 GiB) at 12, 37, 62, 87 and the checkpoint (+1 GiB) at 50.
  const RankCurve& r0 = CurveOf(report, 0);
  EXPECT_EQ(r0.curve, CurveClass::kSpikes);
  EXPECT_EQ(r0.evidence.first_spikes, (std::vector<int64_t>{12, 37, 50, 62, 87}));
  EXPECT_NEAR(double(r0.evidence.max_spike_excess_bytes), 3.0 * kGiB, 300.0 * kMiB);
  // Every other rank spikes at the checkpoint only (rank 6 also prefetches at 7, 27, ...).
  EXPECT_EQ(CurveOf(report, 3).evidence.first_spikes, (std::vector<int64_t>{50}));
  EXPECT_EQ(CurveOf(report, 6).evidence.first_spikes,
            (std::vector<int64_t>{7, 27, 47, 50, 67, 87}));
  for (const RankCurve& c : report.curves) {
    EXPECT_TRUE(c.curve == CurveClass::kSpikes || c.curve == CurveClass::kPlateau)
        << "rank " << c.rank << " is " << CurveClassName(c.curve);
  }
  EXPECT_TRUE(report.candidates.empty());
  EXPECT_TRUE(report.phase_survivors.empty());
  EXPECT_TRUE(report.phase_residues.empty());
}

TEST(LeakTest, RegularSpikesReportTheirPeriod) {
  sim::JobSpec spec;
  spec.steps = 100;
  spec.spikes.push_back({-1, "eval", 10, 3, 4 * kGiB, false});
  LeakReport report = FindLeaks(Simulate(spec).timeline);
  for (const RankCurve& c : report.curves) {
    EXPECT_EQ(c.curve, CurveClass::kSpikes);
    EXPECT_EQ(c.evidence.spike_period_steps, 10);
    EXPECT_EQ(c.evidence.spike_steps, 9u);  // 13, 23, ..., 93; 3 is in warm-up
  }
}

TEST(LeakTest, AFlatJobWithoutSpikesIsAPlateau) {
  sim::JobSpec spec;
  spec.steps = 80;
  LeakReport report = FindLeaks(Simulate(spec).timeline);
  for (const RankCurve& c : report.curves) EXPECT_EQ(c.curve, CurveClass::kPlateau);
}

TEST(LeakTest, AFloorThatJumpedOnceThenStayedIsNotALeak) {
  sim::JobSpec spec;
  spec.steps = 100;
  spec.ranks = 4;
  JobTimeline job = Simulate(spec).timeline;
  for (StepPoint& p : job.ranks[1].steps) {
    if (p.step >= 40) {
      p.floor_bytes += 4 * kGiB;  // the allocator reserved a bigger segment, once
      p.peak_bytes += 4 * kGiB;
    }
  }
  LeakReport report = FindLeaks(job);
  EXPECT_EQ(CurveOf(report, 1).curve, CurveClass::kPlateau);
  EXPECT_GT(CurveOf(report, 1).evidence.floor_growth_bytes, 0);
}

// As above, but the 8 GiB are allocated during step 40 and kept: that step's floor (its lowest
// point, before the allocation) is still the old one while its peak holds the new block. A
// level that stepped up, not a spike at step 40.
TEST(LeakTest, MemoryAllocatedInAStepAndKeptIsAStepUpNotASpike) {
  sim::JobSpec spec;
  spec.steps = 100;
  spec.ranks = 4;
  JobTimeline job = Simulate(spec).timeline;
  for (StepPoint& p : job.ranks[1].steps) {
    if (p.step >= 40) p.peak_bytes += 8 * kGiB;
    if (p.step > 40) p.floor_bytes += 8 * kGiB;
  }
  LeakReport report = FindLeaks(job);
  EXPECT_EQ(CurveOf(report, 1).curve, CurveClass::kPlateau);
  EXPECT_EQ(CurveOf(report, 1).evidence.spike_steps, 0u);
  // A spike the floors after it do not keep is still one.
  JobTimeline spiked = Simulate(spec).timeline;
  spiked.ranks[1].steps[40].peak_bytes += 8 * kGiB;
  EXPECT_EQ(CurveOf(FindLeaks(spiked), 1).evidence.spike_steps, 1u);
}

// A leak from step 10, five steps into the window: the flat steps before it are no spikes (they
// read as such against the line through the leak, which passes under them).
TEST(LeakTest, TheFlatStepsBeforeALeakThatStartsSoonAreNotSpikes) {
  const LeakReport report = FindLeaks(Simulate(sim::LeakJob(5, 10, 1 * kGiB, 8, 60)).timeline);
  const RankCurve& c = CurveOf(report, 5);
  EXPECT_EQ(c.curve, CurveClass::kLeak);
  // Only the planted checkpoint every 50 steps is a spike on rank 5.
  for (int64_t step : c.evidence.first_spikes) EXPECT_EQ(step % 50, 0) << step;
}

// Found by recomputing a Kineto import by hand: a rank whose floor rose 512 MiB a step over
// steps 10..24 and fell back at 25 (the leak freed) was called "spikes" at 23, 24 and 25,
// though every peak stood its usual 4 GiB above its own floor. The rest of the job is flat.
TEST(LeakTest, TheTopOfAFreedLeakIsNoSpike) {
  JobTimeline job;
  for (uint32_t r = 0; r < 4; ++r) {
    RankTimeline rank;
    rank.rank = r;
    for (int64_t i = 0; i < 40; ++i) {
      StepPoint p;
      p.step = i;
      double floor = 10.0 * kGiB;
      if (r == 1 && i >= 10 && i <= 24) floor += 0.5 * kGiB * static_cast<double>(i - 9);
      p.floor_bytes = static_cast<uint64_t>(floor);
      p.peak_bytes = p.floor_bytes + 4 * kGiB;
      // Step 25 ran on the leaked memory before freeing it.
      if (r == 1 && i == 25) p.peak_bytes = static_cast<uint64_t>(17.5 * kGiB + 4.0 * kGiB);
      p.end_bytes = p.floor_bytes;
      rank.steps.push_back(p);
    }
    job.ranks.push_back(std::move(rank));
  }
  const LeakReport report = FindLeaks(job);
  const RankCurve& c = CurveOf(report, 1);
  EXPECT_NE(c.curve, CurveClass::kSpikes);
  EXPECT_EQ(c.evidence.spike_steps, 0u);
  // A step that held 6 GiB for its whole length on that rank still is one.
  job.ranks[1].steps[32].floor_bytes += 6 * kGiB;
  job.ranks[1].steps[32].peak_bytes += 6 * kGiB;
  const LeakReport with_spike = FindLeaks(job);
  const RankCurve& spiked = CurveOf(with_spike, 1);
  EXPECT_EQ(spiked.evidence.spike_steps, 1u);
  EXPECT_EQ(spiked.evidence.max_spike_step, 32);
}

TEST(LeakTest, CandidatesAreThePlantedTagAllocatedOverManySteps) {
  sim::JobSpec spec = sim::LeakJob(5, 30, 128 * kMiB);
  JobTimeline job = Simulate(spec).timeline;
  std::vector<RankLiveSet> live = {sim::LiveAt(spec, 5, 99, sim::Moment::kEnd),
                                   sim::LiveAt(spec, 4, 99, sim::Moment::kEnd)};
  LeakParams params;
  params.rank = 5;
  LeakReport report = FindLeaks(job, live, params);
  ASSERT_EQ(report.curves.size(), 1u);
  ASSERT_FALSE(report.candidates.empty());
  const LeakCandidate& c = report.candidates[0];
  EXPECT_EQ(c.rank, 5u);
  EXPECT_EQ(c.tag, sim::kLeakTag);
  EXPECT_EQ(c.source, sim::kLeakSource);
  // Allocated in steps 30..96: live across >= 3 step boundaries at step 99.
  EXPECT_EQ(c.count, 67u);
  EXPECT_EQ(c.distinct_steps, 67u);
  EXPECT_EQ(c.bytes, 67 * 128 * kMiB);
  EXPECT_EQ(c.oldest_step, 30);
  EXPECT_EQ(c.newest_step, 96);
  // Params, grads and optimizer state come from warm-up; this step's cache is too young.
  for (const LeakCandidate& other : report.candidates) EXPECT_NE(other.tag, "fsdp:params");
  EXPECT_EQ(report.candidates.size(), 1u);
}

// `memtrace import` seeds memory from before a Kineto trace as one allocation at its first
// moment: with --warmup 0 it was listed as the top candidate ("kineto:before-trace 3.82 GiB
// oldest 2"), though when it was allocated is unknown.
TEST(LeakTest, MemoryFromBeforeTheTraceIsNoCandidate) {
  sim::JobSpec spec = sim::LeakJob(5, 30, 128 * kMiB);
  JobTimeline job = Simulate(spec).timeline;
  RankLiveSet set = sim::LiveAt(spec, 5, 99, sim::Moment::kEnd);
  LiveAllocation seed;
  seed.tag = kBeforeTraceTag;
  seed.step_allocated = 30;
  seed.address = 0xFFFFFF0000010000;
  seed.bytes = 100 * kGiB;
  set.allocations.push_back(seed);
  LeakParams params;
  params.rank = 5;
  LeakReport report = FindLeaks(job, {set}, params);
  ASSERT_FALSE(report.candidates.empty());
  for (const LeakCandidate& c : report.candidates) EXPECT_NE(c.tag, kBeforeTraceTag);
  EXPECT_EQ(report.candidates[0].tag, sim::kLeakTag);
}

TEST(LeakTest, CandidatesCountStepBoundariesNotStepNumbers) {
  // The same job with step markers every 10 iterations (steps 0, 10, ..., 990): a buffer made
  // in step 970 and read at 990 crossed 2 boundaries, not 20, and is no candidate.
  sim::JobSpec spec = sim::LeakJob(5, 30, 128 * kMiB);
  JobTimeline job = Simulate(spec).timeline;
  for (RankTimeline& r : job.ranks) {
    for (StepPoint& p : r.steps) p.step *= 10;
  }
  RankLiveSet set = sim::LiveAt(spec, 5, 99, sim::Moment::kEnd);
  set.at_step *= 10;
  for (LiveAllocation& a : set.allocations) a.step_allocated *= 10;
  LeakParams params;
  params.rank = 5;
  params.warmup_steps = 5;
  LeakReport report = FindLeaks(job, {set}, params);
  ASSERT_FALSE(report.candidates.empty());
  EXPECT_EQ(report.candidates[0].tag, sim::kLeakTag);
  EXPECT_EQ(report.candidates[0].count, 67u);  // steps 300..960, as 30..96 before
  EXPECT_EQ(report.candidates[0].newest_step, 960);
}

TEST(LeakTest, RolloutMemoryStillLiveInTrainingIsReported) {
  sim::JobSpec spec = sim::RlJob(/*keep_rollout=*/true);
  JobTimeline job = Simulate(spec).timeline;
  // A moment inside actor_update of step 40, on every rank.
  std::vector<RankLiveSet> live;
  for (uint32_t r = 0; r < spec.ranks; ++r) {
    live.push_back(sim::LiveInPhase(spec, r, 40, "actor_update"));
  }
  ASSERT_EQ(live[0].open_phases, std::vector<std::string>{"actor_update"});
  LeakReport report = FindLeaks(job, live);
  ASSERT_EQ(report.phase_survivors.size(), 8u);
  for (const PhaseSurvivor& s : report.phase_survivors) {
    EXPECT_EQ(s.phase, "rollout");
    EXPECT_EQ(s.bytes, 6 * kGiB);
    EXPECT_EQ(s.oldest_step, 0);
  }
  ASSERT_EQ(report.phase_residues.size(), 8u);
  for (const PhaseResidue& r : report.phase_residues) {
    EXPECT_EQ(r.phase, "rollout");
    EXPECT_EQ(r.residue_steps, r.phase_steps);
    EXPECT_EQ(r.median_residue_bytes, 6 * kGiB);
  }
  // Kept once, not growing: a plateau, not a leak.
  EXPECT_EQ(report.leaking_ranks, 0u);
}

TEST(LeakTest, PhaseResiduesNeedMinResidueStepsHoweverFewStepsThePhaseClosedIn) {
  // Warm-up 5 of 7 steps leaves 2 in which rollout ran and closed, both ending with its 6 GiB:
  // fewer than the 3 steps leaks.h asks for. (A job without step markers, whose rollout is open
  // at most bucket ends, read "rollout 1 of 1".)
  LeakReport report = FindLeaks(Simulate(sim::RlJob(/*keep_rollout=*/true, 7)).timeline);
  EXPECT_TRUE(report.phase_residues.empty()) << report.phase_residues[0].residue_steps;
  LeakParams two;
  two.min_residue_steps = 2;
  report = FindLeaks(Simulate(sim::RlJob(/*keep_rollout=*/true, 7)).timeline, {}, two);
  EXPECT_EQ(report.phase_residues.size(), 8u);
}

TEST(LeakTest, RolloutThatFreesItsMemoryHasNoSurvivors) {
  sim::JobSpec spec = sim::RlJob(/*keep_rollout=*/false);
  JobTimeline job = Simulate(spec).timeline;
  std::vector<RankLiveSet> live;
  for (uint32_t r = 0; r < spec.ranks; ++r) {
    live.push_back(sim::LiveAt(spec, r, 40, sim::Moment::kPeak));
  }
  LeakReport report = FindLeaks(job, live);
  EXPECT_TRUE(report.phase_survivors.empty());
  EXPECT_TRUE(report.phase_residues.empty());
  EXPECT_EQ(report.leaking_ranks, 0u);
}

TEST(LeakTest, APhaseStillOpenAtAStepsEndLeavesNoResidue) {
  // A time bucket that ends mid-rollout holds the rollout's memory because the rollout is still
  // running, not because it left it behind.
  sim::JobSpec spec = sim::RlJob(false);
  JobTimeline job = Simulate(spec).timeline;
  const NameId rollout = job.names.Intern("rollout");
  for (RankTimeline& rank : job.ranks) {
    for (StepPoint& p : rank.steps) {
      std::vector<GroupBytes> tags(p.by_tag().begin(), p.by_tag().end());
      std::vector<GroupBytes> phases(p.by_phase().begin(), p.by_phase().end());
      for (GroupBytes& ph : phases) {
        if (ph.name != rollout) continue;
        ph.open = true;
        tags.push_back({rollout, false, false, 6 * kGiB, 6 * kGiB});
      }
      p.groups = StepGroups(tags, p.by_source(), phases);
    }
  }
  LeakReport report = FindLeaks(job);
  EXPECT_TRUE(report.phase_residues.empty()) << report.phase_residues[0].phase;
}

// An RL job whose rollouts on rank 2 each leave 256 MiB behind from step 10 on.
sim::JobSpec AccumulatingRolloutJob() {
  sim::JobSpec spec = sim::RlJob(false);
  spec.phases[0].retained_bytes = 256 * kMiB;
  spec.phases[0].retained_accumulates = true;
  spec.phases[0].retained_rank = 2;
  spec.phases[0].retained_from_step = 10;
  return spec;
}

TEST(LeakTest, AccumulatingRolloutOutputsAreBothALeakAndASurvivor) {
  const sim::JobSpec spec = AccumulatingRolloutJob();
  JobTimeline job = Simulate(spec).timeline;
  std::vector<RankLiveSet> live = {sim::LiveInPhase(spec, 2, 50, "actor_update"),
                                   sim::LiveInPhase(spec, 2, 50, "rollout")};
  LeakReport report = FindLeaks(job, live);
  EXPECT_EQ(CurveOf(report, 2).curve, CurveClass::kLeak);
  EXPECT_EQ(report.leaking_ranks, 1u);
  // In actor_update, all of steps 10..50 survived rollout; inside step 50's rollout, its own
  // block is still in its phase.
  ASSERT_EQ(report.phase_survivors.size(), 2u);
  EXPECT_EQ(report.phase_survivors[0].rank, 2u);
  EXPECT_EQ(report.phase_survivors[0].count, 41u);
  EXPECT_EQ(report.phase_survivors[1].count, 40u);
  EXPECT_EQ(report.phase_survivors[1].open_phases, std::vector<std::string>{"rollout"});
  ASSERT_EQ(report.phase_residues.size(), 1u);
  EXPECT_EQ(report.phase_residues[0].rank, 2u);
}

TEST(LeakTest, SurvivorsThatEachRunOfAPhaseAddsToComeBeforeOnesKeptOnce) {
  // actor_update keeps 7 GiB made by its first run (optimizer state: healthy, and bigger);
  // each rollout from step 10 on leaves 256 MiB more behind (the leak to find).
  sim::JobSpec spec = AccumulatingRolloutJob();
  spec.phases[1].retained_bytes = 7 * kGiB;
  JobTimeline job = Simulate(spec).timeline;
  std::vector<RankLiveSet> live;
  for (uint32_t r = 0; r < spec.ranks; ++r)
    live.push_back(sim::LiveInPhase(spec, r, 20, "rollout"));
  LeakReport report = FindLeaks(job, live);
  ASSERT_EQ(report.phase_survivors.size(), 9u);
  EXPECT_EQ(report.phase_survivors[0].rank, 2u);
  EXPECT_EQ(report.phase_survivors[0].phase, "rollout");
  EXPECT_EQ(report.phase_survivors[0].distinct_steps, 10u);
  for (size_t i = 1; i < report.phase_survivors.size(); ++i) {
    const PhaseSurvivor& s = report.phase_survivors[i];
    EXPECT_EQ(s.phase, "actor_update");
    EXPECT_EQ(s.distinct_steps, 1u);
    EXPECT_EQ(s.rank, i - 1) << "equal survivors in rank order";
  }
}

// The same job without step markers: every allocation is "step 0", so the runs of a phase are
// told apart by time, allocations more than half a bucket apart being separate runs. Read by
// step, every rollout's KV cache was one run's and came after the optimizer's state.
TEST(LeakTest, WithoutStepMarkersThePhaseRunsAreToldApartByTime) {
  sim::JobSpec spec = AccumulatingRolloutJob();
  spec.phases[1].retained_bytes = 7 * kGiB;
  JobTimeline job = Simulate(spec).timeline;
  job.time_axis = true;
  job.bucket_ns = spec.step_ns;  // a bucket per (unmarked) step
  std::vector<RankLiveSet> live;
  for (uint32_t r = 0; r < spec.ranks; ++r) {
    RankLiveSet set = sim::LiveInPhase(spec, r, 20, "actor_update");
    set.at_step = 0;
    for (LiveAllocation& a : set.allocations) a.step_allocated = 0;
    live.push_back(std::move(set));
  }
  // One run's allocations across a bucket's end, 2 ms apart: still one run.
  LiveAllocation straddling;
  straddling.tag = "kv:extra";
  straddling.phase = "rollout";
  straddling.bytes = 8 * kGiB;
  straddling.ts_ns = spec.start_ns + 3 * spec.step_ns - 1'000'000;
  live[0].allocations.push_back(straddling);
  straddling.ts_ns += 2'000'000;
  live[0].allocations.push_back(straddling);

  LeakReport report = FindLeaks(job, live);
  // As with step markers: rank 2's rollouts first, then what one run left once (the straddling
  // pair, and each rank's optimizer state from the first actor_update, older than the open
  // run's allocations).
  ASSERT_EQ(report.phase_survivors.size(), 10u);
  EXPECT_EQ(report.phase_survivors[0].rank, 2u);
  EXPECT_EQ(report.phase_survivors[0].phase, "rollout");
  EXPECT_EQ(report.phase_survivors[0].distinct_steps, 11u);  // the rollouts of steps 10 to 20
  int actor_update = 0;
  for (size_t i = 1; i < report.phase_survivors.size(); ++i) {
    const PhaseSurvivor& s = report.phase_survivors[i];
    EXPECT_EQ(s.distinct_steps, 1u) << s.phase << " " << s.tag << " on rank " << s.rank;
    if (s.tag == "kv:extra") EXPECT_EQ(s.bytes, 16 * kGiB);
    actor_update += s.phase == "actor_update";
  }
  EXPECT_EQ(actor_update, 8);

  // Inside step 20's rollout: the open run is the latest by time, and what the rollouts of
  // steps 10 to 19 left is found. Every rollout allocation used to read as the open run's own.
  std::vector<RankLiveSet> in_rollout;
  for (uint32_t r = 0; r < spec.ranks; ++r) {
    RankLiveSet set = sim::LiveInPhase(spec, r, 20, "rollout");
    ASSERT_EQ(set.open_phases, std::vector<std::string>{"rollout"});
    set.at_step = 0;
    for (LiveAllocation& a : set.allocations) a.step_allocated = 0;
    in_rollout.push_back(std::move(set));
  }
  report = FindLeaks(job, in_rollout);
  ASSERT_FALSE(report.phase_survivors.empty());
  EXPECT_EQ(report.phase_survivors[0].rank, 2u);
  EXPECT_EQ(report.phase_survivors[0].phase, "rollout");
  EXPECT_EQ(report.phase_survivors[0].distinct_steps, 10u);
  EXPECT_EQ(report.phase_survivors[0].count, 10u);
  for (const PhaseSurvivor& s : report.phase_survivors) {
    if (s.phase == "rollout") EXPECT_EQ(s.rank, 2u) << "no other rank's rollout left anything";
  }
}

TEST(LeakTest, ARankWithTooFewStepsSaysSo) {
  sim::JobSpec spec = sim::HealthyJob(4, 9);
  LeakReport report = FindLeaks(Simulate(spec).timeline);
  for (const RankCurve& c : report.curves) EXPECT_EQ(c.curve, CurveClass::kTooShort);
}

}  // namespace
}  // namespace memtrace::analysis
