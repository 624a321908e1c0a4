#include "query/analysis/live.h"

#include "gtest/gtest.h"
#include "query/analysis/sim/job_simulator.h"
#include "query/analysis/sim/scenarios.h"

namespace memtrace::analysis {
namespace {

struct OomCase {
  sim::JobSpec spec = sim::OomJob();
  sim::SimulatedJob job = sim::Simulate(spec);
};

TEST(LiveTest, LiveAtOomListsThePlantedTagFirst) {
  OomCase c;
  ASSERT_TRUE(c.job.oom.has_value());
  uint32_t rank = c.job.oom->rank;
  std::optional<OomMoment> oom = FindOom(c.job.timeline.ranks[rank]);
  ASSERT_TRUE(oom.has_value());
  EXPECT_EQ(oom->step, c.job.oom->step);
  EXPECT_EQ(oom->requested_bytes, 1 * kGiB);

  RankLiveSet at_oom = sim::LiveAt(c.spec, rank, oom->step, sim::Moment::kPeak);
  std::vector<RankLiveSet> others;
  for (uint32_t r = 0; r < c.spec.ranks; ++r) {
    if (r != rank) others.push_back(sim::LiveAt(c.spec, r, oom->step, sim::Moment::kPeak));
  }
  for (LiveOrder order : {LiveOrder::kBytes, LiveOrder::kExcess}) {
    LiveParams params;
    params.order = order;
    LiveReport report = DescribeLive("oom", at_oom, others, params, oom);
    ASSERT_FALSE(report.groups.empty());
    const LiveGroup& top = report.groups[0];
    EXPECT_EQ(top.tag, sim::kLeakTag);
    EXPECT_EQ(top.others_median_bytes, 0u);
    EXPECT_EQ(top.others_max_bytes, 0u);
    EXPECT_EQ(top.count, uint64_t(oom->step - 10 + 1));  // one allocation per step since 10
    EXPECT_EQ(top.oldest_step, 10);
    EXPECT_EQ(uint64_t(top.excess_bytes), top.bytes);
    EXPECT_EQ(report.other_ranks, 7u);
    EXPECT_EQ(top.others.size(), 7u);
    EXPECT_TRUE(report.oom.has_value());
    // The rank was full: what it held is its device minus the context.
    EXPECT_EQ(report.total_bytes, 80 * kGiB - 600 * kMiB);
    EXPECT_LT(report.others_median_total_bytes, 40 * kGiB);
  }
}

TEST(LiveTest, SharedGroupsCompareWithTheOtherRanks) {
  OomCase c;
  uint32_t rank = c.job.oom->rank;
  RankLiveSet at = sim::LiveAt(c.spec, rank, 50, sim::Moment::kEnd);
  std::vector<RankLiveSet> others = {sim::LiveAt(c.spec, 0, 50, sim::Moment::kEnd),
                                     sim::LiveAt(c.spec, 1, 50, sim::Moment::kEnd)};
  LiveReport report = DescribeLive("oom", at, others);
  const LiveGroup* params = nullptr;
  for (const LiveGroup& g : report.groups) {
    if (g.tag == "fsdp:params") params = &g;
  }
  ASSERT_NE(params, nullptr);
  EXPECT_EQ(params->bytes, 5 * kGiB);
  EXPECT_EQ(params->others_median_bytes, 5 * kGiB);
  EXPECT_EQ(params->excess_bytes, 0);
  EXPECT_EQ(params->count, 20u);
}

TEST(LiveTest, GroupsBySourceAndCutsToTopN) {
  OomCase c;
  RankLiveSet at = sim::LiveAt(c.spec, 0, 50, sim::Moment::kEnd);
  LiveParams params;
  params.by = LiveGroupBy::kSource;
  LiveReport report = DescribeLive("oom", at, {}, params);
  ASSERT_EQ(report.groups.size(), 2u);
  EXPECT_EQ(report.groups[0].source, "libtorch_cuda.so");
  EXPECT_EQ(report.groups[1].source, "libnccl.so.2");
  EXPECT_EQ(report.groups[1].bytes, 1 * kGiB);
  EXPECT_EQ(report.other_ranks, 0u);

  params.by = LiveGroupBy::kTagSource;
  params.top_n = 2;
  LiveReport top = DescribeLive("oom", at, {}, params);
  EXPECT_EQ(top.groups.size(), 2u);
  EXPECT_GT(top.groups_total, 2u);
  EXPECT_EQ(top.groups[0].tag, "optimizer:adam");
}

TEST(LiveTest, NoOomOnAHealthyRank) {
  sim::JobSpec spec = sim::HealthyJob();
  sim::SimulatedJob job = sim::Simulate(spec);
  EXPECT_FALSE(FindOom(job.timeline.ranks[0]).has_value());
}

}  // namespace
}  // namespace memtrace::analysis
