#include "query/analysis/peak.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "query/analysis/sim/job_simulator.h"
#include "query/analysis/sim/scenarios.h"

namespace memtrace::analysis {
namespace {

TEST(PeakTest, ReportsEachPhasesPeakPerRank) {
  sim::JobSpec spec = sim::RlJob(false);
  // Rank 6 generates longer sequences: its rollout needs 6 GiB more.
  JobTimeline job = sim::Simulate(spec).timeline;
  for (StepPoint& p : job.ranks[6].steps) {
    for (GroupBytes& g : p.groups.mutable_phases()) {
      if (job.names.Name(g.name) == "rollout" && p.step == 33) g.peak_bytes += 6 * kGiB;
    }
  }
  PeakReport report = FindPeaks(job);
  ASSERT_EQ(report.summaries.size(), 2u);
  EXPECT_EQ(report.summaries[0].group, "rollout");
  EXPECT_EQ(report.summaries[0].max_rank, 6u);
  EXPECT_EQ(report.summaries[0].max_step, 33);
  EXPECT_EQ(report.summaries[0].ranks, 8u);
  EXPECT_EQ(report.summaries[1].group, "actor_update");
  // Rollout: ~21 GiB held + 24 GiB of its own; actor update: + 12 GiB of activations.
  EXPECT_NEAR(double(report.summaries[0].median_rank_peak_bytes), 45.0 * kGiB, 0.2 * kGiB);
  EXPECT_NEAR(double(report.summaries[1].median_rank_peak_bytes), 33.0 * kGiB, 0.2 * kGiB);
  ASSERT_EQ(report.entries.size(), 16u);
  EXPECT_EQ(report.entries[0].group, "rollout");
  EXPECT_EQ(report.entries[0].rank, 0u);
  EXPECT_EQ(report.entries[6].peak_bytes, report.summaries[0].max_peak_bytes);
  EXPECT_EQ(report.entries[6].peak_ns, job.ranks[6].steps[33].start_ns);
  EXPECT_EQ(report.entries[0].steps, 60u);
}

TEST(PeakTest, ARanksPeakIsDatedToItsMomentWhereTheRowsKeepIt) {
  JobTimeline job = sim::Simulate(sim::LeakJob(5, 30)).timeline;
  StepPoint& spike = job.ranks[3].steps[20];
  spike.peak_bytes += 20 * kGiB;
  spike.peak_ns = spike.start_ns + 123'456'789;  // mid-step
  PeakParams params;
  params.by = PeakBy::kRank;
  const PeakReport report = FindPeaks(job, params);
  ASSERT_EQ(report.entries.size(), job.ranks.size());
  const PeakEntry& three = report.entries[3];
  ASSERT_EQ(three.rank, 3u);
  EXPECT_EQ(three.peak_step, spike.step);
  EXPECT_EQ(three.peak_ns, spike.start_ns + 123'456'789);
  EXPECT_TRUE(three.at_moment);
  // Rows without the moment (the simulator's, or written before it was kept): the step's start.
  const PeakEntry& zero = report.entries[0];
  EXPECT_FALSE(zero.at_moment);
  EXPECT_EQ(zero.peak_ns, job.ranks[0].steps[zero.peak_step - job.ranks[0].steps[0].step].start_ns);
}

TEST(PeakTest, APhaseStillOpenAtAStepsEndLeavesThatStepOutOfItsEnd) {
  // On the time axis a rollout spans buckets: a bucket it was still open at the end of says
  // what was live mid-rollout, not what the rollout left behind.
  JobTimeline job = sim::Simulate(sim::RlJob(false)).timeline;
  uint32_t open_rows = 0;
  uint64_t closed_end = 0;
  for (StepPoint& p : job.ranks[0].steps) {
    for (GroupBytes& g : p.groups.mutable_phases()) {
      if (job.names.Name(g.name) != "rollout") continue;
      closed_end = g.live_bytes;
      if (p.step % 2 == 0) {
        g.open = true;
        g.closed = false;
        g.live_bytes = g.peak_bytes;  // mid-rollout
        ++open_rows;
      }
    }
  }
  ASSERT_GT(open_rows, 0u);
  PeakReport report = FindPeaks(job);
  const PeakEntry& rollout = report.entries[0];
  ASSERT_EQ(rollout.group, "rollout");
  ASSERT_EQ(rollout.rank, 0u);
  EXPECT_EQ(rollout.open_at_end, open_rows);
  EXPECT_NEAR(double(rollout.median_end_bytes), double(closed_end), 0.05 * double(closed_end));

  // Open at the end of every step: no end to tell.
  for (StepPoint& p : job.ranks[0].steps) {
    for (GroupBytes& g : p.groups.mutable_phases()) {
      g.open = true;
      g.closed = false;
    }
  }
  report = FindPeaks(job);
  EXPECT_EQ(report.entries[0].open_at_end, report.entries[0].steps);
  EXPECT_EQ(report.entries[0].median_end_bytes, 0u);
}

// Time buckets that each hold the end of one run of a phase and the start of the next (1 s steps
// in 1 s buckets, offset): the phase is open at every bucket's end, yet closed in each. Its close
// is what it left behind ("typical at close" read the last bucket's alone, 27.0 GiB for 20.8).
// A run over two buckets peaks at the higher (the median of its halves read 29.5 for 34.8).
JobTimeline OnePhaseInBuckets(const std::vector<GroupBytes>& rows) {
  JobTimeline job;
  job.time_axis = true;
  job.bucket_ns = 1'000'000'000;
  const NameId update = job.names.Intern("actor_update");
  RankTimeline& r = job.ranks.emplace_back();
  for (size_t b = 0; b < rows.size(); ++b) {
    StepPoint& p = r.steps.emplace_back();
    p.step = 1'000 + static_cast<int64_t>(b);
    p.start_ns = p.step * job.bucket_ns;
    std::vector<GroupBytes> phases = {rows[b]};
    phases[0].name = update;
    p.groups = StepGroups({}, {}, phases);
  }
  return job;
}

TEST(PeakTest, APhaseOverSeveralBucketsHasItsClosesAndItsRunsPeaks) {
  PeakParams params;
  params.warmup_steps = 0;
  // Closed and reopened in every bucket but the first.
  std::vector<GroupBytes> reopened(20);
  for (size_t b = 0; b < reopened.size(); ++b) {
    reopened[b].open = b + 1 < reopened.size();
    reopened[b].closed = b > 0;
    reopened[b].live_bytes = b > 0 ? (10 + b) * kGiB : 3 * kGiB;  // at the close; first: its end
    reopened[b].peak_bytes = 30 * kGiB;
  }
  PeakReport report = FindPeaks(OnePhaseInBuckets(reopened), params);
  ASSERT_EQ(report.entries.size(), 1u);
  EXPECT_EQ(report.entries[0].steps, 20u);
  EXPECT_EQ(report.entries[0].open_at_end, 1u);  // the first bucket: it never closed there
  EXPECT_EQ(report.entries[0].median_end_bytes, static_cast<uint64_t>(20 * kGiB));  // of 11..29
  // Runs peaking at 30 and 20 GiB in turn, each closing in the bucket where the next begins: a
  // run begun in a bucket took that bucket's peak, its predecessor's, and every run read 30.
  reopened.resize(21);
  for (size_t b = 0; b < reopened.size(); ++b) {
    reopened[b].open = b + 1 < reopened.size();
    reopened[b].closed = b > 0;
    reopened[b].peak_bytes = (b % 2 == 1 ? 30 : 20) * kGiB;
  }
  report = FindPeaks(OnePhaseInBuckets(reopened), params);
  EXPECT_EQ(report.entries[0].median_peak_bytes, static_cast<uint64_t>(25 * kGiB));

  // Ten runs of two buckets each: 20 GiB in the first, 30 in the second, where it closes.
  std::vector<GroupBytes> runs(20);
  for (size_t b = 0; b < runs.size(); ++b) {
    const bool second = b % 2 == 1;
    runs[b].open = !second;
    runs[b].closed = second;
    runs[b].live_bytes = 5 * kGiB;
    runs[b].peak_bytes = (second ? 30 : 20) * kGiB;
  }
  report = FindPeaks(OnePhaseInBuckets(runs), params);
  ASSERT_EQ(report.entries.size(), 1u);
  EXPECT_EQ(report.entries[0].median_peak_bytes, static_cast<uint64_t>(30 * kGiB));
  EXPECT_EQ(report.entries[0].peak_bytes, static_cast<uint64_t>(30 * kGiB));
  EXPECT_EQ(report.entries[0].open_at_end, 10u);
}

TEST(PeakTest, AJobWithoutPhasesHasNoPhasePeaks) {
  PeakReport report = FindPeaks(sim::Simulate(sim::HealthyJob()).timeline);
  EXPECT_TRUE(report.summaries.empty());
  EXPECT_EQ(report.ranks, 8u);
}

TEST(PeakTest, ByTagEachTagPeaksOnTheRanksThatHoldIt) {
  JobTimeline job = sim::Simulate(sim::HealthyJob()).timeline;
  PeakParams by_tag;
  by_tag.by = PeakBy::kTag;
  PeakReport tags = FindPeaks(job, by_tag);
  ASSERT_FALSE(tags.summaries.empty());
  EXPECT_EQ(tags.summaries[0].group, "activations");
  // Only rank 0 runs the eval pass (3 GiB).
  auto eval = std::find_if(tags.summaries.begin(), tags.summaries.end(),
                           [](const PeakSummary& s) { return s.group == "eval"; });
  ASSERT_NE(eval, tags.summaries.end());
  EXPECT_EQ(eval->ranks, 1u);
  EXPECT_EQ(eval->max_rank, 0u);
  EXPECT_EQ(eval->max_peak_bytes, 3 * kGiB);
}

// A running rank's step in progress raises a peak it passed (live --at-peak reads that moment),
// but is no step of the typical ones: its numbers are only so far.
TEST(PeakTest, TheStepInProgressRaisesAPeakButNotTheTypicalOnes) {
  JobTimeline job = sim::Simulate(sim::HealthyJob()).timeline;
  RankTimeline& three = job.ranks[3];
  three.MoveLastToInProgress();
  PeakParams by_rank;
  by_rank.by = PeakBy::kRank;
  const PeakEntry before = FindPeaks(job, by_rank).entries[3];
  three.in_progress->peak_bytes = before.peak_bytes + 5 * kGiB;
  three.in_progress->peak_ns = three.in_progress->start_ns + 42;
  const PeakEntry after = FindPeaks(job, by_rank).entries[3];
  EXPECT_EQ(after.peak_bytes, before.peak_bytes + 5 * kGiB);
  EXPECT_EQ(after.peak_step, three.in_progress->step);
  EXPECT_EQ(after.peak_ns, three.in_progress->start_ns + 42);
  EXPECT_EQ(after.steps, before.steps);
  EXPECT_EQ(after.median_peak_bytes, before.median_peak_bytes);
  // Past --warmup only, as the steps are.
  by_rank.warmup_steps = static_cast<uint32_t>(three.steps.size() + 1);
  for (const PeakEntry& e : FindPeaks(job, by_rank).entries) EXPECT_NE(e.rank, 3u);
}

// A rank still in its first step (a model too large for its device fails there) has its peak
// so far, and no step of its own: the others' typical peaks are not its.
TEST(PeakTest, ARankInItsFirstStepHasItsPeakSoFar) {
  JobTimeline job = sim::Simulate(sim::HealthyJob()).timeline;
  RankTimeline& three = job.ranks[3];
  three.steps.resize(1);
  three.MoveLastToInProgress();
  ASSERT_TRUE(three.steps.empty());
  three.in_progress->peak_ns = three.in_progress->start_ns + 42;
  PeakParams by_rank;
  by_rank.by = PeakBy::kRank;
  const PeakReport ranks = FindPeaks(job, by_rank);
  ASSERT_EQ(ranks.entries.size(), 8u);
  const PeakEntry& e = ranks.entries[3];
  EXPECT_EQ(e.rank, 3u);
  EXPECT_EQ(e.peak_bytes, three.in_progress->peak_bytes);
  EXPECT_EQ(e.peak_step, three.in_progress->step);
  EXPECT_EQ(e.peak_ns, three.in_progress->start_ns + 42);
  EXPECT_EQ(e.steps, 0u);
  EXPECT_EQ(e.median_peak_bytes, 0u) << "no typical peak yet";
  EXPECT_EQ(ranks.summaries[0].ranks, 8u);

  PeakParams by_tag;
  by_tag.by = PeakBy::kTag;
  size_t rank3_tags = 0;
  for (const PeakEntry& t : FindPeaks(job, by_tag).entries) {
    if (t.rank != 3) continue;
    ++rank3_tags;
    EXPECT_EQ(t.steps, 0u) << t.group;
  }
  EXPECT_EQ(rank3_tags, three.in_progress->by_tag().size());
  EXPECT_GT(rank3_tags, 0u);
}

TEST(PeakTest, ByRankTheStepPeakOfEachRank) {
  JobTimeline job = sim::Simulate(sim::HealthyJob()).timeline;
  PeakParams by_rank;
  by_rank.by = PeakBy::kRank;
  PeakReport ranks = FindPeaks(job, by_rank);
  ASSERT_EQ(ranks.summaries.size(), 1u);
  EXPECT_EQ(ranks.entries.size(), 8u);
  // Rank 0's eval pass makes it the highest.
  EXPECT_EQ(ranks.summaries[0].max_rank, 0u);
}

}  // namespace
}  // namespace memtrace::analysis
