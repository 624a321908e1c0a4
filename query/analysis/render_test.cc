#include "query/analysis/render.h"

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "query/analysis/report_proto.h"
#include "query/analysis/sim/job_simulator.h"
#include "query/analysis/sim/scenarios.h"

namespace memtrace::analysis {
namespace {

bool Has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// Prints each rendering once so a test log shows what a user would see.
void Show(const std::string& text) { std::printf("%s\n", text.c_str()); }

TEST(RenderTest, DivergenceTableNamesTheRankAndUnits) {
  v1::DivergenceReport w;
  ToProto(FindDivergence(sim::Simulate(sim::LeakJob(5, 30)).timeline), &w);
  std::string text = RenderDivergence(w);
  Show(text);
  EXPECT_TRUE(Has(text, "rank 5 diverged first")) << text;
  EXPECT_TRUE(Has(text, "GiB"));
  EXPECT_TRUE(Has(text, "node-0"));
  EXPECT_TRUE(Has(text, "onset"));

  v1::DivergenceReport none;
  ToProto(FindDivergence(sim::Simulate(sim::HealthyJob()).timeline), &none);
  std::string healthy = RenderDivergence(none);
  Show(healthy);
  EXPECT_TRUE(Has(healthy, "no rank diverged"));
  EXPECT_FALSE(Has(healthy, "onset"));

  // On buckets of 250 ms the onset's time keeps its ms, as its key column does ("10:00:39"
  // beside an onset at 10:00:39.750).
  v1::DivergenceReport quarter = w;
  quarter.set_bucket_ns(250'000'000);
  v1::RankDivergence& d = *quarter.mutable_diverged(0);
  d.set_onset_ns(int64_t{1767261639} * 1'000'000'000 + 750'000'000);
  EXPECT_TRUE(Has(RenderDivergence(quarter), "2026-01-01 10:00:39.750"))
      << RenderDivergence(quarter);
}

TEST(RenderTest, GrowthTableSaysWhereItGrows) {
  v1::GrowthReport leak;
  ToProto(FindGrowth(sim::Simulate(sim::LeakJob(5, 30)).timeline), &leak);
  std::string text = RenderGrowth(leak);
  Show(text);
  EXPECT_TRUE(Has(text, sim::kLeakTag));
  EXPECT_TRUE(Has(text, "1 of 8 ranks"));
  EXPECT_TRUE(Has(text, "MiB/step"));

  v1::GrowthReport all;
  ToProto(FindGrowth(sim::Simulate(sim::GradAccumulationJob()).timeline), &all);
  std::string grads = RenderGrowth(all);
  Show(grads);
  EXPECT_TRUE(Has(grads, "all 8 ranks"));
  EXPECT_TRUE(Has(grads, "0-7"));
  // The columns that add the ranks up say so.
  EXPECT_TRUE(Has(grads, "rate, summed")) << grads;
  EXPECT_TRUE(Has(grads, "growth, summed")) << grads;

  v1::GrowthReport none;
  ToProto(FindGrowth(sim::Simulate(sim::HealthyJob()).timeline), &none);
  EXPECT_TRUE(Has(RenderGrowth(none), "nothing grows"));

  // A window shorter than min_points fits nothing: that is said, not "nothing grows".
  GrowthParams short_window;
  short_window.window_steps = 7;
  v1::GrowthReport unfitted;
  ToProto(FindGrowth(sim::Simulate(sim::LeakJob(5, 30)).timeline, short_window), &unfitted);
  EXPECT_EQ(unfitted.groups_examined(), 0u);
  EXPECT_TRUE(Has(RenderGrowth(unfitted),
                  "nothing to fit (by tag): no series has 8 points in the last 7 (--window) after "
                  "each rank's first 5 steps (--warmup)"))
      << RenderGrowth(unfitted);

  // Per rank, the row says what grows on how many ranks: a source, when grouped by source.
  for (auto [by, name] : {std::pair{GrowthBy::kTagRank, "tag on 1"},
                          std::pair{GrowthBy::kSourceRank, "source on 1"}}) {
    GrowthParams params;
    params.by = by;
    v1::GrowthReport per_rank;
    ToProto(FindGrowth(sim::Simulate(sim::LeakJob(5, 30)).timeline, params), &per_rank);
    const std::string rows = RenderGrowth(per_rank);
    EXPECT_TRUE(Has(rows, name)) << rows;
  }
}

// A warm-up past every step the job has: the reports say so, not "no tag recorded" nor a
// window of "steps 0..0".
// Rank 7 stopped in warm-up and was never fitted: "all 8 ranks" beside "growing on 0-6" claimed
// it too.
TEST(RenderTest, GrowthOnAllFittedRanksSaysHowManyWereTooShort) {
  JobTimeline job = sim::Simulate(sim::GradAccumulationJob()).timeline;
  std::vector<StepPoint> kept(job.ranks[7].steps.begin(), job.ranks[7].steps.begin() + 2);
  job.ranks[7].steps = kept;
  v1::GrowthReport r;
  ToProto(FindGrowth(job), &r);
  std::string text = RenderGrowth(r);
  Show(text);
  EXPECT_TRUE(Has(text, "all 7 of 8 ranks (1 too short to fit)")) << text;
  EXPECT_TRUE(Has(text, "1 of 8 ranks too short to fit")) << text;
  EXPECT_FALSE(Has(text, "all 8 ranks")) << text;
  // A collector older than ranks_fitted: the growing ranks are the fitted ones.
  r.clear_ranks_fitted();
  EXPECT_TRUE(Has(RenderGrowth(r), "all 7 of 8 ranks (1 too short to fit)"));
}

TEST(RenderTest, AWarmUpPastTheJobSaysSo) {
  const JobTimeline job = sim::Simulate(sim::HealthyJob(4, 10)).timeline;
  PeakParams peak_params;
  peak_params.by = PeakBy::kTag;
  peak_params.warmup_steps = 100;
  v1::PeakReport peak;
  ToProto(FindPeaks(job, peak_params), &peak);
  EXPECT_TRUE(Has(RenderPeak(peak), "no tag recorded after each rank's first 100 steps (--warmup)"))
      << RenderPeak(peak);
  GrowthParams growth_params;
  growth_params.warmup_steps = 1000;
  v1::GrowthReport growth;
  ToProto(FindGrowth(job, growth_params), &growth);
  const std::string text = RenderGrowth(growth);
  EXPECT_TRUE(Has(text,
                  "nothing to fit (by tag): no series has 8 points after each rank's "
                  "first 1000 steps (--warmup)"))
      << text;
  EXPECT_FALSE(Has(text, "0..0")) << text;
  LeakParams leak_params;
  leak_params.warmup_steps = 100;
  v1::LeakReport leaks;
  ToProto(FindLeaks(job, {}, leak_params), &leaks);
  const std::string curves = RenderLeaks(leaks);
  EXPECT_TRUE(Has(curves, "too short")) << curves;
  EXPECT_FALSE(Has(curves, "0 B")) << curves;  // no floor measured is no floor of 0 B
}

// A job without step markers: windows, onsets and forecasts are times, not bucket indexes.
TEST(RenderTest, TimeBucketJobsAreShownInTime) {
  JobTimeline job = sim::Simulate(sim::LeakJob(5, 30, 256 * kMiB, 8, 100)).timeline;
  job.time_axis = true;
  job.bucket_ns = 1'000'000'000;
  for (RankTimeline& r : job.ranks) {
    for (StepPoint& p : r.steps) p.step += 1'796'332'000;  // 2026-12-03 21:06:40 UTC on
  }
  v1::GrowthReport g;
  ToProto(FindGrowth(job), &g);
  v1::LeakReport l;
  ToProto(FindLeaks(job), &l);
  v1::HeadroomReport h;
  ToProto(ForecastHeadroom(job), &h);
  PeakParams by_rank;
  by_rank.by = PeakBy::kRank;
  v1::PeakReport p;
  ToProto(FindPeaks(job, by_rank), &p);
  // By rank the group is the rank itself: no column of dashes.
  EXPECT_FALSE(Has(RenderPeak(p), "\n-  ")) << RenderPeak(p);
  for (const std::string& text :
       {RenderGrowth(g), RenderLeaks(l), RenderHeadroom(h), RenderPeak(p)}) {
    Show(text);
    EXPECT_TRUE(Has(text, "2026-12-03 21:")) << text;
    EXPECT_FALSE(Has(text, "17963")) << text;
  }
  EXPECT_TRUE(Has(RenderGrowth(g), "time buckets 2026-12-03 21:06:45..2026-12-03 21:08:19"));
  EXPECT_TRUE(Has(RenderGrowth(g), "256 MiB/s")) << RenderGrowth(g);
  EXPECT_FALSE(Has(RenderHeadroom(h), "/step"));
  v1::DivergenceReport d;
  ToProto(FindDivergence(job), &d);
  EXPECT_TRUE(Has(RenderDivergence(d), "persistence 5 buckets)")) << RenderDivergence(d);
}

// `leaks --rank 3` said "no rank leaks" of a job whose rank 5 leaks, and `--rank 5` "1 of 8 rank
// leaks" after looking at one: the verdict is about the rank examined.
TEST(RenderTest, LeaksOfOneRankSpeakOfThatRankOnly) {
  JobTimeline job = sim::Simulate(sim::LeakJob(5, 30)).timeline;
  LeakParams params;
  params.rank = 3;
  v1::LeakReport three;
  ToProto(FindLeaks(job, {}, params), &three);
  std::string text = RenderLeaks(three);
  Show(text);
  EXPECT_TRUE(Has(text, "rank 3 does not leak (spikes) (only rank 3 examined: --rank)")) << text;
  EXPECT_FALSE(Has(text, "no rank leaks")) << text;
  params.rank = 5;
  v1::LeakReport five;
  ToProto(FindLeaks(job, {}, params), &five);
  EXPECT_TRUE(Has(RenderLeaks(five), "job leak: rank 5 leaks (only rank 5 examined"))
      << RenderLeaks(five);
}

// Rank 7 ran 4 steps, all warm-up: "1 of 8 rank leaks" counted it among the ranks cleared.
TEST(RenderTest, LeaksCountOnlyTheRanksClassified) {
  JobTimeline job = sim::Simulate(sim::LeakJob(5, 30)).timeline;
  job.ranks[7].steps.resize(4);
  v1::LeakReport w;
  ToProto(FindLeaks(job), &w);
  std::string text = RenderLeaks(w);
  Show(text);
  EXPECT_TRUE(Has(text, "1 of 7 classified ranks leaks; rank 7 too short to classify")) << text;
  JobTimeline healthy = sim::Simulate(sim::HealthyJob()).timeline;
  healthy.ranks[7].steps.resize(4);
  ToProto(FindLeaks(healthy), &w);
  EXPECT_TRUE(
      Has(RenderLeaks(w), "no rank of the 7 classified leaks; rank 7 too short to classify"))
      << RenderLeaks(w);
  // None classified (one short imported trace): not "no rank of the 0 classified leaks".
  for (RankTimeline& rank : healthy.ranks) rank.steps.resize(4);
  ToProto(FindLeaks(healthy), &w);
  EXPECT_TRUE(Has(RenderLeaks(w),
                  "job healthy: no rank classified; ranks 0-7 too short to "
                  "classify\n"))
      << RenderLeaks(w);
}

// A leak from step 1, inside warm-up, read "rising since 5" as if it began there.
TEST(RenderTest, ALeakRisingFromTheFirstExaminedStepMayHaveBegunEarlier) {
  v1::LeakReport early;
  ToProto(FindLeaks(sim::Simulate(sim::LeakJob(3, 1)).timeline), &early);
  std::string text = RenderLeaks(early);
  Show(text);
  EXPECT_TRUE(Has(text,
                  "rank 3: rising from the first step examined after warm-up (--warmup 5): "
                  "it may have begun earlier"))
      << text;
  v1::LeakReport late;
  ToProto(FindLeaks(sim::Simulate(sim::LeakJob(5, 30)).timeline), &late);
  EXPECT_FALSE(Has(RenderLeaks(late), "may have begun earlier")) << RenderLeaks(late);
  // Flat at the first step examined, rising after it: nothing began before the window.
  v1::LeakReport flat_first;
  ToProto(FindLeaks(sim::Simulate(sim::LeakJob(3, 5)).timeline), &flat_first);
  EXPECT_EQ(flat_first.curves(3).evidence().rising_since_step(), 5);
  EXPECT_FALSE(Has(RenderLeaks(flat_first), "may have begun earlier")) << RenderLeaks(flat_first);
}

// Tag and phase names come from the job: compare and the phase tables printed an ESC sequence
// and a newline that forged a table row of its own.
TEST(RenderTest, JobStringsInCompareAndPhaseTablesAreEscaped) {
  const std::string evil = "evil\x1b[31mRED\nanalysis  fake-row";
  const auto clean = [](const std::string& text) {
    return !Has(text, "\x1b") && !Has(text, "\nanalysis  fake-row") && Has(text, "\\n");
  };
  v1::CompareReport c;
  c.set_job_a(evil);
  c.set_job_b("b");
  v1::CompareItem* it = c.add_items();
  it->set_analysis("growth");
  it->set_subject(evil);
  it->set_a(evil);
  it->set_b("-");
  EXPECT_TRUE(clean(RenderCompare(c))) << RenderCompare(c);

  v1::LeakReport l;
  l.set_job_id("j");
  v1::PhaseSurvivor* s = l.add_phase_survivors();
  s->set_phase(evil);
  s->add_open_phases(evil);
  v1::PhaseResidue* p = l.add_phase_residues();
  p->set_phase(evil);
  std::string leaks = RenderLeaks(l);
  EXPECT_TRUE(clean(leaks)) << leaks;

  v1::LiveReport live;
  live.set_job_id("j");
  live.add_open_phases(evil);
  EXPECT_TRUE(clean(RenderLive(live))) << RenderLive(live);
}

// A job without step markers spikes every ~10 time buckets, not "every ~10 steps".
TEST(RenderTest, SpikesOfAJobWithoutStepMarkersRecurInBuckets) {
  v1::LeakReport r;
  r.set_job_id("bucketed");
  r.set_ranks(1);
  r.set_bucket_ns(1'000'000'000);
  r.set_no_step_markers(true);
  v1::RankCurve* c = r.add_curves();
  c->set_curve(v1::CURVE_CLASS_SPIKES);
  v1::CurveEvidence* e = c->mutable_evidence();
  e->set_points(90);
  e->set_rising_since_step(-1);
  e->set_spike_steps(8);
  e->set_max_spike_excess_bytes(8 * kGiB);
  e->set_max_spike_step(1'796'534'337);
  e->set_spike_period_steps(10);
  v1::PhaseResidue* p = r.add_phase_residues();
  p->set_phase("rollout");
  p->set_residue_steps(5);
  p->set_phase_steps(9);
  std::string text = RenderLeaks(r);
  Show(text);
  EXPECT_TRUE(Has(text, "every ~10 buckets)")) << text;
  // Which buckets its figures are of: after warm-up, where memtrace peak reads all of them.
  EXPECT_FALSE(Has(text, "after each rank's first")) << text;
  r.mutable_params()->set_warmup_steps(5);
  EXPECT_TRUE(Has(RenderLeaks(r),
                  "(floors and typical peaks of the buckets after each rank's first 5, --warmup; "
                  "memtrace peak reads every bucket unless given --warmup 5)\n"))
      << RenderLeaks(r);
  EXPECT_TRUE(Has(text, "live at time bucket ends")) << text;
  EXPECT_FALSE(Has(text, "steps")) << text;
}

// Rank 4 ran 4 steps, all warm-up: "compared 5 ranks" claimed it.
TEST(RenderTest, DivergenceCountsOnlyTheRanksCompared) {
  JobTimeline job = sim::Simulate(sim::HealthyJob(5, 60)).timeline;
  job.ranks[4].steps.resize(4);
  v1::DivergenceReport w;
  ToProto(FindDivergence(job), &w);
  std::string text = RenderDivergence(w);
  Show(text);
  EXPECT_TRUE(Has(text, "compared 4 of 5 ranks over")) << text;
  EXPECT_TRUE(Has(text, "rank 4 had no compared step")) << text;
}

TEST(RenderTest, LeakTablesShowCurvesCandidatesAndPhases) {
  sim::JobSpec spec = sim::LeakJob(5, 30);
  std::vector<RankLiveSet> live = {sim::LiveAt(spec, 5, 99, sim::Moment::kEnd)};
  v1::LeakReport w;
  ToProto(FindLeaks(sim::Simulate(spec).timeline, live), &w);
  std::string text = RenderLeaks(w);
  Show(text);
  EXPECT_TRUE(Has(text, "1 of 8 ranks leaks"));
  // "1 of 8 rank leaks" read as if one rank had been examined; two leak, plural.
  sim::JobSpec two = sim::LeakJob(5, 30);
  two.growths.push_back({2, sim::kLeakTag, sim::kLeakSource, 30, 256 * kMiB});
  v1::LeakReport both;
  ToProto(FindLeaks(sim::Simulate(two).timeline), &both);
  EXPECT_TRUE(Has(RenderLeaks(both), "job leak: 2 of 8 ranks leak\n")) << RenderLeaks(both);
  EXPECT_TRUE(Has(text, "leak candidates"));
  EXPECT_TRUE(Has(text, "segments"));
  EXPECT_TRUE(Has(text, "spikes"));

  sim::JobSpec rl = sim::RlJob(true);
  std::vector<RankLiveSet> rl_live = {sim::LiveInPhase(rl, 0, 40, "actor_update")};
  v1::LeakReport r;
  ToProto(FindLeaks(sim::Simulate(rl).timeline, rl_live), &r);
  std::string phases = RenderLeaks(r);
  Show(phases);
  EXPECT_TRUE(Has(phases, "no rank leaks"));
  EXPECT_TRUE(Has(phases, "memory still live after its phase ended"));
  EXPECT_TRUE(Has(phases, "rollout"));
  EXPECT_TRUE(Has(phases, "6.00 GiB"));
  EXPECT_TRUE(Has(phases, "since step"));

  // Without step markers the survivors' steps are all 0: no step columns, and a note.
  r.set_no_step_markers(true);
  r.set_bucket_ns(1'000'000'000);
  const std::string no_steps = RenderLeaks(r);
  EXPECT_TRUE(Has(no_steps, "(no step markers: compared 1000 ms time buckets; no leak candidates)"))
      << no_steps;
  EXPECT_FALSE(Has(no_steps, "since step")) << no_steps;
  EXPECT_TRUE(Has(no_steps, "6.00 GiB")) << no_steps;
  // The runs that left the memory, told apart by time, are still shown.
  EXPECT_TRUE(Has(no_steps, " runs ")) << no_steps;

  // A live set of an earlier attempt (--at before a restart): the rows say which.
  EXPECT_FALSE(Has(text, "attempt")) << text;
  ASSERT_GT(w.candidates_size(), 0);
  w.mutable_candidates(0)->set_attempt(1);
  EXPECT_TRUE(Has(RenderLeaks(w), " attempt ")) << RenderLeaks(w);
}

// A job whose ranks restarted: the line under the verdict says which attempts were read and
// names the OOM of one that was not.
TEST(RenderTest, ARestartedJobsReportsSayWhichAttemptTheyRead) {
  JobTimeline job = sim::Simulate(sim::LeakJob(5, 30)).timeline;
  v1::DivergenceReport d;
  ToProto(FindDivergence(job), &d);
  const std::string plain = RenderDivergence(d);
  EXPECT_FALSE(Has(plain, "attempt")) << plain;
  d.mutable_attempts()->set_attempts(2);
  d.mutable_attempts()->set_unread(8);
  v1::UnreadOom* oom = d.mutable_attempts()->add_unread_ooms();
  oom->set_rank(3);
  oom->set_attempt(0);
  oom->set_first_oom_ns(1'767'232'820'250'000'000);
  const std::string text = RenderDivergence(d);
  const std::string first_line = plain.substr(0, plain.find('\n') + 1);
  EXPECT_EQ(text.find(first_line + "note: read each rank's latest attempt (the job has 2); not "
                                   "read, an OOM of rank 3 attempt 0 at 2026-01-01 02:00:20.250 "
                                   "(--attempt 0 reads it)\n"),
            0u)
      << text;
  // OOMs of two attempts: each is named, not only the first's.
  v1::UnreadOom* later = d.mutable_attempts()->add_unread_ooms();
  later->set_rank(5);
  later->set_attempt(1);
  later->set_first_oom_ns(1'767'232'830'000'000'000);
  EXPECT_TRUE(Has(RenderDivergence(d), "(--attempt 0 or 1 reads them)\n")) << RenderDivergence(d);
  d.mutable_attempts()->mutable_unread_ooms()->RemoveLast();
  d.mutable_attempts()->set_at_moment(true);  // leaks --at
  EXPECT_TRUE(Has(RenderDivergence(d),
                  "\nnote: read each rank's attempt running at that moment "
                  "(the job has 2); not read, an OOM of rank 3"))
      << RenderDivergence(d);
  d.mutable_attempts()->set_asked(1);
  d.mutable_attempts()->clear_unread_ooms();
  EXPECT_TRUE(Has(RenderDivergence(d), "\nnote: read attempt 1 of the job's 2 (--attempt)\n"))
      << RenderDivergence(d);
}

// A rank's subprocesses (an engine that inherited its RANK): their memory beside the rank's, in
// none of its figures, with the age of what was read when their last event came before.
TEST(RenderTest, LiveShowsTheRanksSubprocessesApart) {
  v1::LiveReport live;
  live.set_job_id("j");
  live.set_rank(3);
  live.set_at_step(7);
  live.set_at_ns(1'767'232'820'250'000'000);
  live.set_total_bytes(uint64_t{4} << 30);
  live.set_total_count(12);
  v1::SubprocessLive* engine = live.add_subprocesses();
  engine->set_rank(1000000);
  engine->set_pid(4711);
  engine->set_live_bytes(uint64_t{60} << 30);
  engine->set_allocation_count(3);
  engine->set_at_ns(1'767'232'810'000'000'000);
  v1::SubprocessLive* busy = live.add_subprocesses();
  busy->set_rank(1000001);
  busy->set_pid(4712);
  busy->set_live_bytes(uint64_t{1} << 20);
  busy->set_allocation_count(1);
  busy->set_at_ns(live.at_ns());
  EXPECT_TRUE(Has(RenderLive(live),
                  "4.00 GiB live in 12 allocations\n"
                  "and its subprocess pid 4711 (memtrace ranks: 1000000): 60.0 GiB live in 3 "
                  "allocations, as of its last event at 2026-01-01 02:00:10.000 (idle since, or "
                  "exited)\n"
                  "and its subprocess pid 4712 (memtrace ranks: 1000001): 1.00 MiB live in 1 "
                  "allocations\n\n"))
      << RenderLive(live);
  // The process that started the rank's, connected after it (RankIdentity.started_the_rank).
  busy->set_started_the_rank(true);
  EXPECT_TRUE(Has(RenderLive(live),
                  "and the process that started it, pid 4712 (memtrace ranks: 1000001): 1.00 MiB"))
      << RenderLive(live);
  // One whose live set the collector could not read is said in its place.
  engine->set_unread("DATA_LOSS: block damaged");
  EXPECT_TRUE(Has(RenderLive(live),
                  "and its subprocess pid 4711 (memtrace ranks: 1000000): not read: DATA_LOSS: "
                  "block damaged\n"))
      << RenderLive(live);
}

// The lines of `text` that start, after their indent, with one of `prefixes`, indent removed.
std::vector<std::string> RowsStartingWith(const std::string& text,
                                          const std::vector<std::string>& prefixes) {
  std::vector<std::string> rows;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripLeadingAsciiWhitespace(line);
    for (const std::string& prefix : prefixes) {
      if (absl::StartsWith(line, prefix)) {
        rows.emplace_back(line);
        break;
      }
    }
  }
  return rows;
}

// Rows of the leak sections that differ only in their rank are one row listing the ranks: 1024
// ranks that each keep the optimizer state of their first update read as one line, and the
// rank unlike them stands out.
TEST(RenderTest, LeakRowsAlikeOnSeveralRanksAreOneRow) {
  v1::LeakReport r;
  r.set_job_id("j");
  r.set_ranks(8);
  for (uint32_t rank = 0; rank < 8; ++rank) {
    v1::RankCurve* curve = r.add_curves();
    curve->set_rank(rank);
    curve->set_curve(rank == 3 ? v1::CURVE_CLASS_LEAK : v1::CURVE_CLASS_PLATEAU);
    curve->mutable_evidence()->set_points(50);
    curve->mutable_evidence()->set_floor_start_bytes(14 * kGiB);
    curve->mutable_evidence()->set_floor_end_bytes(rank == 3 ? 56 * kGiB : 14 * kGiB);
    v1::PhaseSurvivor* p = r.add_phase_survivors();
    p->set_rank(rank);
    p->set_phase("actor_update");
    p->set_tag("optim:adam");
    p->set_source("libc10_cuda.so");
    p->set_count(16);
    p->set_bytes(rank == 3 ? 9 * kGiB : 7 * kGiB);
    p->set_distinct_steps(1);
    p->set_at_step(60);
    p->add_open_phases("rollout");
    v1::PhaseResidue* q = r.add_phase_residues();
    q->set_rank(rank);
    q->set_phase("rollout");
    q->set_phase_steps(60);
    q->set_residue_steps(60);
    q->set_median_residue_bytes(kGiB);
    q->set_last_residue_bytes(kGiB);
    q->set_max_residue_bytes(kGiB);
  }
  for (uint32_t rank : {3u, 5u}) {
    v1::LeakCandidate* c = r.add_candidates();
    c->set_rank(rank);
    c->set_tag("leak:cache");
    c->set_count(28);
    c->set_bytes(2 * kGiB);
    c->set_distinct_steps(28);
    c->set_oldest_step(30);
    c->set_newest_step(57);
    c->set_at_step(60);
  }
  const std::string text = RenderLeaks(r);
  const std::vector<std::string> rows = RowsStartingWith(text, {"0-", "3 ", "3,5 "});
  ASSERT_EQ(rows.size(), 6u) << text;
  EXPECT_TRUE(absl::StartsWith(rows[0], "0-2,4-7  plateau")) << text;
  EXPECT_TRUE(absl::StartsWith(rows[1], "3  leak")) << text;
  EXPECT_TRUE(Has(rows[1], "56.0 GiB")) << text;
  EXPECT_TRUE(absl::StartsWith(rows[2], "3,5  leak:cache")) << text;
  EXPECT_TRUE(absl::StartsWith(rows[3], "0-2,4-7  actor_update  optim:adam")) << text;
  EXPECT_TRUE(Has(rows[3], "7.00 GiB")) << text;
  EXPECT_TRUE(absl::StartsWith(rows[4], "3  actor_update  optim:adam")) << text;
  EXPECT_TRUE(Has(rows[4], "9.00 GiB")) << text;
  EXPECT_TRUE(absl::StartsWith(rows[5], "0-7  rollout  60 of 60")) << text;
}

// headroom's ranks alike are one row too: the flat ones, after the one forecast.
TEST(RenderTest, HeadroomRowsAlikeOnSeveralRanksAreOneRow) {
  v1::HeadroomReport h;
  h.set_job_id("j");
  h.set_ranks(4);
  h.set_forecasts(1);
  for (uint32_t rank : {2u, 0u, 1u, 3u}) {
    v1::RankHeadroom* e = h.add_entries();
    e->set_rank(rank);
    e->set_status(rank == 2 ? v1::HEADROOM_STATUS_FORECAST : v1::HEADROOM_STATUS_FLAT);
    e->set_capacity_bytes(80 * kGiB);
    e->set_last_peak_bytes(rank == 2 ? 60 * kGiB : 34 * kGiB);
    e->set_forecast_step(rank == 2 ? 412 : -1);
  }
  const std::vector<std::string> headroom_rows =
      RowsStartingWith(RenderHeadroom(h), {"2 ", "0,1,3 ", "0-1"});
  ASSERT_EQ(headroom_rows.size(), 2u) << RenderHeadroom(h);
  EXPECT_TRUE(absl::StartsWith(headroom_rows[0], "2  forecast")) << RenderHeadroom(h);
  EXPECT_TRUE(absl::StartsWith(headroom_rows[1], "0-1,3  flat")) << RenderHeadroom(h);
}

// peak's per-rank rows too, where each rank reached the same peak at its own step: the steps'
// range. By rank, each row's moment is its own: they stay apart. On time buckets, whose range
// would read as one time, ranks that reached it in other buckets stay apart.
TEST(RenderTest, PeakRowsAlikeShareOneWithTheRangeOfTheirSteps) {
  v1::PeakReport peak;
  peak.set_job_id("j");
  peak.set_ranks(4);
  peak.add_summaries()->set_group("rollout");
  for (uint32_t rank = 0; rank < 4; ++rank) {
    v1::PeakEntry* e = peak.add_entries();
    e->set_group("rollout");
    e->set_rank(rank);
    e->set_peak_bytes(rank == 3 ? 40 * kGiB : 22 * kGiB);
    e->set_peak_step(rank == 3 ? 99 : std::vector<int64_t>{4, 1, 2}[rank]);
    e->set_median_peak_bytes(22 * kGiB);
    e->set_steps(100);
  }
  const std::string peaks = RenderPeak(peak);
  EXPECT_TRUE(Has(peaks, "rollout   0-2  22.0 GiB      1-4")) << peaks;
  EXPECT_TRUE(Has(peaks, "rollout     3  40.0 GiB       99")) << peaks;

  v1::PeakReport by_rank = peak;
  by_rank.set_by(v1::PEAK_BY_RANK);
  for (v1::PeakEntry& e : *by_rank.mutable_entries()) {
    e.clear_group();
    e.set_peak_at_moment(true);
    e.set_peak_ns(int64_t{1'800'000'000} * 1'000'000'000 + e.rank() * 1'000'000);
  }
  const std::string apart = RenderPeak(by_rank);
  for (const char* row :
       {"\n   0  22.0 GiB        4", "\n   1  22.0 GiB        1", "\n   2  22.0 GiB        2"}) {
    EXPECT_TRUE(Has(apart, row)) << row << "\n" << apart;
  }

  v1::PeakReport buckets = peak;
  buckets.set_bucket_ns(1'000'000'000);
  for (v1::PeakEntry& e : *buckets.mutable_entries()) {
    e.set_peak_step(e.rank() == 1 ? 1'800'000'001 : 1'800'000'000);
  }
  const std::string by_bucket = RenderPeak(buckets);
  EXPECT_TRUE(Has(by_bucket, "rollout   0,2  22.0 GiB")) << by_bucket;
  EXPECT_TRUE(Has(by_bucket, "rollout     1  22.0 GiB")) << by_bucket;
  EXPECT_FALSE(Has(by_bucket, "0-2")) << by_bucket;
}

// A long list of ranks sharing a row is cut short, with their count: 1024 ranks whose values
// differ in a digit fall into rows of hundreds of scattered ranks.
TEST(RenderTest, ALongListOfRanksIsCutShortWithItsCount) {
  v1::LeakReport r;
  r.set_job_id("j");
  r.set_ranks(200);
  for (uint32_t rank = 0; rank < 200; ++rank) {
    v1::PhaseResidue* q = r.add_phase_residues();
    q->set_rank(rank);
    q->set_phase("rollout");
    q->set_phase_steps(60);
    q->set_residue_steps(60);
    q->set_max_residue_bytes(rank % 2 == 0 ? kGiB : 2 * kGiB);
  }
  const std::string text = RenderLeaks(r);
  std::vector<std::string> rows;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, "rollout")) rows.emplace_back(line);
  }
  ASSERT_EQ(rows.size(), 2u) << text;
  const std::string evens = std::string(absl::StripLeadingAsciiWhitespace(rows[0]));
  EXPECT_TRUE(absl::StartsWith(evens, "100 ranks: 0,2,4,6,")) << text;
  EXPECT_TRUE(absl::StrContains(evens, ",...  rollout")) << text;
  EXPECT_LE(evens.find("  rollout"), 40u) << text;
  EXPECT_TRUE(absl::StartsWith(std::string(absl::StripLeadingAsciiWhitespace(rows[1])),
                               "100 ranks: 1,3,5,"))
      << text;
}

// A report of the ranks' subprocesses says so under its first line: its "ranks" are stream
// numbers from 1000000, which read as launcher ranks otherwise.
TEST(RenderTest, ReportsOfSubprocessesSaySo) {
  const std::string note =
      "(compared: the ranks' subprocesses with each other; each \"rank\" here is a subprocess's "
      "number in memtrace ranks, which names its rank and pid)\n";
  v1::DivergenceReport d;
  d.set_job_id("j");
  v1::GrowthReport g;
  g.set_job_id("j");
  v1::LeakReport l;
  l.set_job_id("j");
  v1::PeakReport p;
  p.set_job_id("j");
  // headroom forecasts each on its own: it compares none with another.
  const std::string forecast =
      "(forecast: the ranks' subprocesses, each against the device it shares with its rank; "
      "each \"rank\" here is a subprocess's number in memtrace ranks, which names its rank and "
      "pid)\n";
  v1::HeadroomReport h;
  h.set_job_id("j");
  for (bool subprocesses : {false, true}) {
    d.set_subprocesses(subprocesses);
    g.set_subprocesses(subprocesses);
    l.set_subprocesses(subprocesses);
    p.set_subprocesses(subprocesses);
    h.set_subprocesses(subprocesses);
    for (const auto& [text, expected] :
         std::vector<std::pair<std::string, std::string>>{{RenderDivergence(d), note},
                                                          {RenderGrowth(g), note},
                                                          {RenderLeaks(l), note},
                                                          {RenderPeak(p), note},
                                                          {RenderHeadroom(h), forecast}}) {
      EXPECT_EQ(Has(text, expected), subprocesses) << text;
      EXPECT_FALSE(Has(text, "each \"rank\" here") && !subprocesses) << text;
      // Under the first line.
      if (subprocesses) EXPECT_EQ(text.find(expected), text.find('\n') + 1) << text;
    }
  }
}

// The attempts note of a report of the subprocesses counts their attempts (not the job's), and
// names an unread OOM by the subprocess's number and its rank.
TEST(RenderTest, TheAttemptsNoteOfSubprocessesNamesThemAndTheirRanks) {
  v1::LeakReport l;
  l.set_job_id("j");
  l.set_subprocesses(true);
  v1::AttemptsNote* n = l.mutable_attempts();
  n->set_attempts(2);
  n->set_unread(2);
  v1::UnreadOom* oom = n->add_unread_ooms();
  oom->set_rank(1000003);
  oom->set_attempt(0);
  oom->set_subprocess_of_rank(1);
  oom->set_first_oom_ns(int64_t{1'800'000'000} * 1'000'000'000);
  const std::string text = RenderLeaks(l);
  EXPECT_TRUE(Has(text,
                  "note: read the subprocesses of each rank's latest attempt that started any "
                  "(theirs are of 2 attempts); not read, an OOM of subprocess 1000003 (of rank 1) "
                  "attempt 0 at "))
      << text;
  n->set_asked(0);
  EXPECT_TRUE(Has(RenderLeaks(l), "note: read the subprocesses of attempt 0 (--attempt)"))
      << RenderLeaks(l);
  // Of the ranks, as before.
  l.set_subprocesses(false);
  n->clear_asked();
  n->mutable_unread_ooms(0)->clear_subprocess_of_rank();
  EXPECT_TRUE(Has(RenderLeaks(l),
                  "note: read each rank's latest attempt (the job has 2); not "
                  "read, an OOM of rank 1000003 attempt 0 at "))
      << RenderLeaks(l);
}

// A subprocess's own live set (live --rank of its stream): named by its process and its rank,
// read at its rank's end of a step when one was asked, and said to be compared with nothing.
TEST(RenderTest, LiveOfASubprocessNamesItsProcessAndItsRank) {
  v1::LiveReport live;
  live.set_job_id("j");
  live.set_rank(1000000);
  live.set_subprocess_of_rank(3);
  live.set_subprocess_pid(4711);
  live.set_no_step_markers(true);
  live.set_at_ns(1'767'232'810'000'000'000);
  live.set_total_bytes(uint64_t{60} << 30);
  live.set_total_count(3);
  v1::LiveGroup* kv = live.add_groups();
  kv->set_tag("kv_cache");
  kv->set_bytes(uint64_t{60} << 30);
  kv->set_count(3);
  EXPECT_TRUE(Has(RenderLive(live),
                  "job j: pid 4711, a subprocess of rank 3 (memtrace ranks: 1000000), at "
                  "2026-01-01 02:00:10.000\n"
                  "60.0 GiB live in 3 allocations (compared with no rank: `memtrace live --rank "
                  "3` shows it beside its rank)\n"))
      << RenderLive(live);
  EXPECT_FALSE(Has(RenderLive(live), "others")) << RenderLive(live);
  EXPECT_TRUE(Has(RenderLive(live), "kv_cache")) << RenderLive(live);

  live.set_rank_step(19);
  EXPECT_TRUE(Has(RenderLive(live),
                  "(memtrace ranks: 1000000), at the end of rank 3's step 19 (its last event by "
                  "then at 2026-01-01 02:00:10.000)\n"))
      << RenderLive(live);
  live.set_subprocess_started_the_rank(true);
  EXPECT_TRUE(Has(RenderLive(live),
                  "job j: pid 4711, the process that started rank 3's (memtrace ranks: 1000000), "))
      << RenderLive(live);
}

// At the peak: how high, when to the millisecond, in which step; and `peak --by rank` says when
// each rank reached its own where the rows keep it.
TEST(RenderTest, TheMomentOfAPeakIsShownWhereItIsKnown) {
  v1::LiveReport live;
  live.set_job_id("j");
  live.set_rank(3);
  live.set_at_peak(true);
  live.set_peak_bytes(uint64_t{52} << 30);
  live.set_asked_ns(1'767'232'820'250'000'000);
  live.set_at_ns(1'767'232'820'250'000'000);
  live.set_at_step(19);
  EXPECT_TRUE(Has(RenderLive(live),
                  "rank 3 at its peak of 52.0 GiB, reached at 2026-01-01 02:00:20.250 (step 19)\n"))
      << RenderLive(live);

  JobTimeline job = sim::Simulate(sim::LeakJob(5, 30)).timeline;
  job.ranks[3].steps[20].peak_ns = 1'767'232'820'250'000'000;
  job.ranks[3].steps[20].peak_bytes += uint64_t{20} << 30;
  PeakParams by_rank;
  by_rank.by = PeakBy::kRank;
  v1::PeakReport peak;
  ToProto(FindPeaks(job, by_rank), &peak);
  const std::string text = RenderPeak(peak);
  EXPECT_TRUE(Has(text, "reached at")) << text;
  EXPECT_TRUE(Has(text, " 2026-01-01 02:00:20.250 ")) << text;
  // Without any moment kept (older rows), no such column.
  job.ranks[3].steps[20].peak_ns = 0;
  ToProto(FindPeaks(job, by_rank), &peak);
  EXPECT_FALSE(Has(RenderPeak(peak), "reached at")) << RenderPeak(peak);
}

// A rank still in its first step: its peak so far, no typical peak, and a line that says what
// 0 steps means.
TEST(RenderTest, PeakOfARankInItsFirstStepSaysItIsSoFar) {
  JobTimeline job = sim::Simulate(sim::HealthyJob()).timeline;
  job.ranks[3].steps.resize(1);
  job.ranks[3].MoveLastToInProgress();
  PeakParams by_rank;
  by_rank.by = PeakBy::kRank;
  v1::PeakReport peak;
  ToProto(FindPeaks(job, by_rank), &peak);
  const std::string text = RenderPeak(peak);
  EXPECT_TRUE(Has(text,
                  "(0 steps: seen only in the step in progress or cut short, its peak so far; "
                  "no typical one yet)\n"))
      << text;
  std::string rank3;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "3 ")) rank3 = std::string(line);
  }
  // rank, peak (two words), at step, typical peak, typical at step end, steps.
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(rank3, ' ', absl::SkipEmpty())),
            (std::vector<std::string>{"3", "26.3", "GiB", "0", "-", "-", "0"}))
      << text;
}

TEST(RenderTest, LiveAtOomPutsThePlantedTagOnTop) {
  sim::JobSpec spec = sim::OomJob();
  sim::SimulatedJob job = sim::Simulate(spec);
  uint32_t rank = job.oom->rank;
  RankLiveSet at = sim::LiveAt(spec, rank, job.oom->step, sim::Moment::kPeak);
  std::vector<RankLiveSet> others;
  for (uint32_t r = 0; r < spec.ranks; ++r) {
    if (r != rank) others.push_back(sim::LiveAt(spec, r, job.oom->step, sim::Moment::kPeak));
  }
  v1::LiveReport w;
  ToProto(DescribeLive("oom", at, others, {}, FindOom(job.timeline.ranks[rank])), &w);
  std::string text = RenderLive(w);
  Show(text);
  EXPECT_TRUE(Has(text, "its OOM"));
  // The first data row (after the title, summary, blank line and header) is the leak.
  size_t header = text.find("tag");
  size_t first_row = text.find('\n', header) + 1;
  EXPECT_EQ(text.compare(first_row, std::string(sim::kLeakTag).size(), sim::kLeakTag), 0) << text;
  // No other rank holds the leak's tag: no rank is named as its others' maximum of 0 B.
  const std::string leak_row = text.substr(first_row, text.find('\n', first_row) - first_row);
  EXPECT_FALSE(Has(leak_row, "(rank ")) << leak_row;
  EXPECT_TRUE(Has(text, " at step ")) << text;
  EXPECT_TRUE(Has(text, "since step")) << text;
  // The moment to the millisecond, as the tables print times: reads within one second (three
  // phases of an RL step) were all shown as the same second.
  w.set_at_ns(1'767'232'820'250'000'000);
  EXPECT_TRUE(Has(RenderLive(w), "(2026-01-01 02:00:20.250)")) << RenderLive(w);

  // Without step markers every step is 0: the moment is its time, and no "since step".
  w.set_no_step_markers(true);
  const std::string no_steps = RenderLive(w);
  EXPECT_FALSE(Has(no_steps, "step")) << no_steps;
  EXPECT_TRUE(Has(no_steps, sim::kLeakTag)) << no_steps;
  EXPECT_FALSE(Has(text, "attempt")) << text;

  // The OOM of an attempt a restart followed says so.
  w.set_no_step_markers(false);
  w.set_attempt(0);
  w.set_oom_before_restart(true);
  const std::string restarted = RenderLive(w);
  EXPECT_TRUE(Has(restarted, "rank " + std::to_string(rank) + " attempt 0 at step")) << restarted;
  EXPECT_TRUE(Has(restarted, "allocation failed (a restart followed it)")) << restarted;
  // An earlier attempt read at a moment before the restart is named, with how many there are.
  w.set_oom_before_restart(false);
  w.set_latest_attempt(1);
  const std::string earlier = RenderLive(w);
  EXPECT_TRUE(Has(earlier, "rank " + std::to_string(rank) + " attempt 0 (of 2) at step"))
      << earlier;
  w.set_latest_attempt(0);

  // What the failed allocation was for, and the other ranks that had ended before it.
  w.mutable_oom()->set_tag("fsdp:layers.5");
  w.mutable_oom()->set_source("libc10_cuda.so");
  w.set_others_ended_before(3);
  const std::string forensics = RenderLive(w);
  EXPECT_TRUE(Has(forensics, "allocation failed (tag fsdp:layers.5, from libc10_cuda.so)"))
      << forensics;
  EXPECT_TRUE(Has(forensics, "(3 of them had ended before this moment: read at their last event"))
      << forensics;

  // Read at a step some ranks never reached: said, not a comparison that vanished.
  w.set_others_ended_before(0);
  w.set_others_without_the_step(2);
  EXPECT_TRUE(Has(RenderLive(w), "; 2 other ranks have no step ")) << RenderLive(w);
  const uint32_t other_ranks = w.other_ranks();
  w.set_other_ranks(0);
  EXPECT_TRUE(Has(RenderLive(w), "; no other rank compared: 2 other ranks have no step "))
      << RenderLive(w);
  w.set_other_ranks(other_ranks);
  w.set_others_without_the_step(0);

  // The rank's last step, which its stream stopped inside: the moment is no step's end.
  w.set_at_step_cut_short(true);
  EXPECT_TRUE(Has(RenderLive(w), "; cut short: the rank's stream ended within the step)"))
      << RenderLive(w);
  w.set_at_step_cut_short(false);

  // Read at a time before some ranks began: they are said, not compared as holding nothing.
  w.set_others_not_begun(1);
  EXPECT_TRUE(Has(RenderLive(w), "; 1 other rank had not begun by then (no event at or before it)"))
      << RenderLive(w);
  w.set_other_ranks(0);
  w.set_others_not_begun(3);
  EXPECT_TRUE(Has(RenderLive(w), "; no other rank compared: 3 other ranks had not begun by then"))
      << RenderLive(w);
  w.set_other_ranks(other_ranks);
  w.set_others_not_begun(0);

  // A time asked for is the moment shown (every rank was read at it), with the rank's last
  // event before it: the header showed only that event's time.
  w.clear_oom();
  w.set_others_ended_before(0);
  w.set_asked_ns(1'767'232'820'300'000'000);
  const std::string asked = RenderLive(w);
  EXPECT_TRUE(Has(asked, " at 2026-01-01 02:00:20.300 (step ")) << asked;
  EXPECT_TRUE(Has(asked, "; its last event before it at 2026-01-01 02:00:20.250)")) << asked;
}

TEST(RenderTest, PeakAndHeadroomAndCompare) {
  v1::PeakReport p;
  ToProto(FindPeaks(sim::Simulate(sim::RlJob(false)).timeline), &p);
  std::string peak = RenderPeak(p);
  Show(peak);
  EXPECT_TRUE(Has(peak, "rollout"));
  EXPECT_TRUE(Has(peak, "actor_update"));
  // A phase that never closed within a step has no "at close" to show.
  v1::PeakEntry& entry = *p.mutable_entries(0);
  entry.set_open_at_end(entry.steps());
  const std::string open = RenderPeak(p);
  EXPECT_TRUE(Has(open, " - ")) << open;
  entry.set_open_at_end(entry.steps() - 1);
  EXPECT_FALSE(Has(RenderPeak(p), " - ")) << RenderPeak(p);

  v1::HeadroomReport h;
  ToProto(ForecastHeadroom(sim::Simulate(sim::LeakJob(3, 20, 200 * kMiB, 8, 150)).timeline), &h);
  std::string head = RenderHeadroom(h);
  Show(head);
  // The simulator's device holds 600 MiB outside traced allocations: the peak reaches the rest.
  EXPECT_TRUE(Has(head, "rank 3 reaches 80.0 GiB (79.4 GiB traced + 600 MiB outside) at step ~"))
      << head;
  // From when: "in ~3 min" read long after the job ended said nothing of it.
  EXPECT_TRUE(Has(head, "(3 min after 20")) << head;
  EXPECT_TRUE(Has(head, ", when its last step began, at ")) << head;

  v1::HeadroomReport flat;
  ToProto(ForecastHeadroom(sim::Simulate(sim::HealthyJob()).timeline), &flat);
  EXPECT_TRUE(Has(RenderHeadroom(flat), "no rank is on course"));
  // Not when no rank could be forecast at all: that read as all clear on a leaking job.
  HeadroomParams past_every_step;
  past_every_step.warmup_steps = 200;
  v1::HeadroomReport unread;
  ToProto(ForecastHeadroom(sim::Simulate(sim::LeakJob(3, 20, 200 * kMiB, 8, 150)).timeline,
                           past_every_step),
          &unread);
  EXPECT_TRUE(
      Has(RenderHeadroom(unread),
          ": no rank could be forecast: ranks 0-7 too short to forecast (fewer than 8 steps "
          "after --warmup 200)\n"))
      << RenderHeadroom(unread);
  EXPECT_FALSE(Has(RenderHeadroom(unread), "on course")) << RenderHeadroom(unread);
  // Of many ranks at or past the capacity, the headline names the first 8 (soonest first) and
  // counts the rest, which the table lists: 24 ranks printed 24 lines above it.
  v1::HeadroomReport crowded;
  crowded.set_ranks(24);
  for (uint32_t rank = 0; rank < 24; ++rank) {
    v1::RankHeadroom* e = crowded.add_entries();
    e->set_rank(rank);
    e->set_status(v1::HEADROOM_STATUS_AT_CAPACITY);
    e->set_capacity_bytes(10 * kGiB);
    e->set_last_peak_bytes(34 * kGiB);
  }
  const std::string crowded_text = RenderHeadroom(crowded);
  size_t headline_lines = 0;
  for (size_t at = crowded_text.find(" already peaks at "); at != std::string::npos;
       at = crowded_text.find(" already peaks at ", at + 1)) {
    ++headline_lines;
  }
  EXPECT_EQ(headline_lines, 8u) << crowded_text;
  EXPECT_TRUE(Has(crowded_text, "  rank 7 already peaks at 34.0 GiB")) << crowded_text;
  EXPECT_FALSE(Has(crowded_text, "  rank 8 already peaks")) << crowded_text;
  EXPECT_TRUE(Has(crowded_text, "  and 16 more ranks (the table below lists each)\n"))
      << crowded_text;

  // Of no capacity (an imported trace without deviceProperties), no headroom: "-", not 0 B.
  v1::HeadroomReport unknown;
  v1::RankHeadroom* entry_of_unknown = unknown.add_entries();
  entry_of_unknown->set_status(v1::HEADROOM_STATUS_NO_CAPACITY);
  entry_of_unknown->set_last_peak_bytes(uint64_t{1} << 30);
  const std::vector<std::string> unknown_rows = RowsStartingWith(RenderHeadroom(unknown), {"0 "});
  ASSERT_EQ(unknown_rows.size(), 1u) << RenderHeadroom(unknown);
  const std::string cells =
      absl::StrJoin(absl::StrSplit(unknown_rows[0], ' ', absl::SkipEmpty()), " ");
  EXPECT_TRUE(absl::StartsWith(cells, "0 no capacity - 0 B 1.00 GiB - ")) << cells;
  // Nor does a rank too short to fit show a measured-looking slope ("0 B/step").
  EXPECT_FALSE(Has(RenderHeadroom(unread), "B/step")) << RenderHeadroom(unread);
  // Nor one out of memory within its first few steps, too short to fit as well.
  v1::HeadroomReport early_oom;
  v1::RankHeadroom* oom = early_oom.add_entries();
  oom->set_status(v1::HEADROOM_STATUS_OUT_OF_MEMORY);
  oom->set_forecast_step(3);
  oom->set_trend_fitted(false);
  EXPECT_FALSE(Has(RenderHeadroom(early_oom), "B/step")) << RenderHeadroom(early_oom);
  oom->set_trend_fitted(true);
  EXPECT_TRUE(Has(RenderHeadroom(early_oom), "0 B/step")) << RenderHeadroom(early_oom);

  v1::CompareReport c;
  ToProto(CompareJobs(sim::Simulate(sim::LeakJob(5, 30)).timeline,
                      sim::Simulate(sim::HealthyJob()).timeline),
          &c);
  std::string cmp = RenderCompare(c);
  Show(cmp);
  EXPECT_TRUE(Has(cmp, "A: leak"));
  EXPECT_TRUE(Has(cmp, "changed"));
  EXPECT_FALSE(Has(cmp, "note")) << cmp;
  // A restarted job's column says which attempts it read, under the first line.
  c.mutable_b()->mutable_attempts()->set_attempts(2);
  const std::string restarted = RenderCompare(c);
  EXPECT_TRUE(Has(restarted,
                  " differences\nnote, B: read each rank's latest attempt (the job has "
                  "2)\n\n"))
      << restarted;
}

}  // namespace
}  // namespace memtrace::analysis
