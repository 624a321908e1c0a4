#include "query/analysis/report_proto.h"

#include <cmath>

#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "query/analysis/sim/job_simulator.h"
#include "query/analysis/sim/scenarios.h"

namespace memtrace::analysis {
namespace {

TEST(ReportProtoTest, UnsetParamsKeepTheDefaults) {
  DivergenceParams d = FromProto(v1::DivergenceParams());
  DivergenceParams want;
  EXPECT_EQ(d.persistence_steps, want.persistence_steps);
  EXPECT_EQ(d.min_excess_bytes, want.min_excess_bytes);
  EXPECT_EQ(d.warmup_steps, want.warmup_steps);
  EXPECT_TRUE(d.relative_to_baseline);
  EXPECT_FALSE(d.attempt.has_value());
  EXPECT_EQ(FromProto(v1::GrowthParams()).max_pairs, GrowthParams().max_pairs);
  EXPECT_EQ(FromProto(v1::LeakParams()).min_boundaries, LeakParams().min_boundaries);
  EXPECT_EQ(FromProto(v1::LiveParams()).top_n, LiveParams().top_n);
  EXPECT_EQ(FromProto(v1::PeakParams()).by, PeakBy::kPhase);
  EXPECT_FALSE(FromProto(v1::HeadroomParams()).capacity_bytes.has_value());
}

TEST(ReportProtoTest, SetParamsOverrideAndZeroIsAValue) {
  v1::DivergenceParams w;
  w.set_warmup_steps(0);  // zero warm-up is expressible
  w.set_metric(v1::ANALYSIS_METRIC_END);
  w.set_absolute(true);
  w.set_attempt(2);
  DivergenceParams d = FromProto(w);
  EXPECT_EQ(d.warmup_steps, 0u);
  EXPECT_EQ(d.metric, Metric::kEnd);
  EXPECT_FALSE(d.relative_to_baseline);
  EXPECT_EQ(d.attempt, 2u);

  v1::GrowthParams g;
  g.set_by(v1::GROWTH_BY_SOURCE_RANK);
  g.set_window_steps(40);
  EXPECT_EQ(FromProto(g).by, GrowthBy::kSourceRank);
  EXPECT_EQ(FromProto(g).window_steps, 40u);

  v1::HeadroomParams h;
  h.set_capacity_bytes(40 * kGiB);
  EXPECT_EQ(FromProto(h).capacity_bytes, 40 * kGiB);

  v1::CompareParams c;
  c.mutable_growth()->set_by(v1::GROWTH_BY_RANK);
  c.set_min_change_fraction(0.1);
  CompareParams cp = FromProto(c);
  EXPECT_EQ(cp.growth.by, GrowthBy::kRank);
  EXPECT_DOUBLE_EQ(cp.min_change_fraction, 0.1);
}

TEST(ReportProtoTest, ParamsRoundTrip) {
  LeakParams p;
  p.min_spike_bytes = 3 * kGiB;
  p.attempt = 1;
  v1::LeakParams w;
  ToProto(p, &w);
  LeakParams back = FromProto(w);
  EXPECT_EQ(back.min_spike_bytes, 3 * kGiB);
  EXPECT_EQ(back.attempt, 1u);
  EXPECT_EQ(back.top_n, p.top_n);
}

TEST(ReportProtoTest, DivergenceReportCarriesTheAnswer) {
  JobTimeline job = sim::Simulate(sim::LeakJob(5, 30)).timeline;
  DivergenceReport plain = FindDivergence(job);
  v1::DivergenceReport wire;
  ToProto(plain, &wire);
  EXPECT_EQ(wire.job_id(), "leak");
  EXPECT_EQ(wire.status(), v1::DIVERGENCE_STATUS_DIVERGED);
  ASSERT_EQ(wire.diverged_size(), 1);
  EXPECT_EQ(wire.diverged(0).rank(), 5u);
  EXPECT_EQ(wire.diverged(0).onset_step(), plain.diverged[0].onset_step);
  EXPECT_EQ(wire.diverged(0).excess_bytes(), plain.diverged[0].excess_bytes);
  EXPECT_EQ(wire.diverged(0).host(), "node-0");
  EXPECT_EQ(wire.params().persistence_steps(), 5u);
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(wire, &json).ok());
  EXPECT_NE(json.find("\"onsetStep\""), std::string::npos);
}

TEST(ReportProtoTest, EveryReportConverts) {
  sim::JobSpec spec = sim::OomJob();
  sim::SimulatedJob job = sim::Simulate(spec);
  uint32_t rank = job.oom->rank;

  v1::GrowthReport g;
  ToProto(FindGrowth(job.timeline), &g);
  ASSERT_EQ(g.groups_size(), 1);
  EXPECT_EQ(g.groups(0).name(), sim::kLeakTag);
  EXPECT_FALSE(g.groups(0).has_rank());
  EXPECT_EQ(g.groups(0).scope(), v1::GROWTH_SCOPE_SOME_RANKS);

  std::vector<RankLiveSet> live = {sim::LiveAt(spec, rank, job.oom->step, sim::Moment::kPeak)};
  v1::LeakReport l;
  ToProto(FindLeaks(job.timeline, live), &l);
  EXPECT_EQ(l.leaking_ranks(), 1u);
  ASSERT_GT(l.candidates_size(), 0);
  EXPECT_EQ(l.candidates(0).tag(), sim::kLeakTag);
  EXPECT_EQ(l.curves(rank).curve(), v1::CURVE_CLASS_LEAK);

  std::vector<RankLiveSet> others;
  for (uint32_t r = 0; r < spec.ranks; ++r) {
    if (r != rank) others.push_back(sim::LiveAt(spec, r, job.oom->step, sim::Moment::kPeak));
  }
  v1::LiveReport lv;
  ToProto(DescribeLive("oom", live[0], others, {}, FindOom(job.timeline.ranks[rank])), &lv);
  EXPECT_TRUE(lv.has_oom());
  EXPECT_EQ(lv.oom().requested_bytes(), 1 * kGiB);
  EXPECT_EQ(lv.groups(0).tag(), sim::kLeakTag);
  EXPECT_EQ(lv.groups(0).others_size(), 7);

  v1::HeadroomReport h;
  ToProto(ForecastHeadroom(job.timeline), &h);
  EXPECT_EQ(h.entries(0).status(), v1::HEADROOM_STATUS_OUT_OF_MEMORY);

  v1::PeakReport p;
  PeakParams by_rank;
  by_rank.by = PeakBy::kRank;
  ToProto(FindPeaks(job.timeline, by_rank), &p);
  EXPECT_EQ(p.by(), v1::PEAK_BY_RANK);
  EXPECT_EQ(p.summaries(0).max_rank(), rank);

  v1::CompareReport c;
  ToProto(CompareJobs(job.timeline, sim::Simulate(sim::HealthyJob()).timeline), &c);
  EXPECT_EQ(c.job_a(), "oom");
  EXPECT_EQ(c.a().leaks().leaking_ranks(), 1u);
  EXPECT_GT(c.items_size(), 3);
  EXPECT_TRUE(c.items(0).changed());
}

TEST(ReportProtoTest, InfiniteZSurvivesJson) {
  DivergenceReport r;
  r.job_id = "j";
  r.status = DivergenceStatus::kDiverged;
  RankDivergence d;
  d.robust_z = INFINITY;
  r.diverged.push_back(d);
  v1::DivergenceReport wire;
  ToProto(r, &wire);
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(wire, &json).ok());
  EXPECT_NE(json.find("Infinity"), std::string::npos) << json;
}

}  // namespace
}  // namespace memtrace::analysis
