#include "query/analysis/rollup_convert.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "query/analysis/growth.h"
#include "query/analysis/live.h"

namespace memtrace::analysis {
namespace {

void AddString(v1::RankRollups* r, uint32_t id, v1::StringKind kind, const std::string& value) {
  v1::StringEntry* e = r->add_strings();
  e->set_id(id);
  e->set_kind(kind);
  e->set_value(value);
}

// Two ranks whose string tables number the same names differently.
v1::GetRollupsResponse TwoRanks() {
  v1::GetRollupsResponse resp;
  resp.set_bucket_ns(0);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    v1::RankRollups* r = resp.add_ranks();
    r->set_rank(rank);
    r->mutable_identity()->set_host(rank == 0 ? "node-a" : "node-b");
    r->mutable_identity()->set_device_index(int32_t(rank));
    uint32_t tag = rank == 0 ? 1 : 7;
    uint32_t src = rank == 0 ? 2 : 3;
    AddString(r, tag, v1::STRING_KIND_TAG, "fsdp:params");
    AddString(r, src, v1::STRING_KIND_SOURCE, "libnccl.so.2");
    for (int64_t s : {2, 0, 1}) {  // stored out of order
      v1::StepRollup* p = r->add_steps();
      p->set_step(s);
      p->set_floor_bytes(100 + s);
      p->set_end_bytes(200 + s);
      v1::GroupBytes* g = p->add_by_tag();
      g->set_id(tag);
      g->set_live_bytes(50 + s);
      g->set_peak_bytes(60 + s);
      v1::GroupBytes* so = p->add_by_source();
      so->set_id(src);
      so->set_live_bytes(5);
      v1::GroupBytes* ph = p->add_by_phase();
      ph->set_id(99);  // missing from the string table
      ph->set_peak_bytes(70);
      v1::GroupBytes* k = p->add_by_memory_kind();
      k->set_id(rank == 0 ? 3 : 101);
      k->set_live_bytes(200 + s);
      p->set_device_total(80ull << 30);
      p->set_ooms(s == 2 ? 1 : 0);
    }
  }
  return resp;
}

TEST(RollupConvertTest, ResolvesPerRankIdsToOneJobWideName) {
  absl::StatusOr<JobTimeline> job = TimelineFromRollups("j", TwoRanks());
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->ranks.size(), 2u);
  NameId params = *job->names.Find("fsdp:params");
  for (const RankTimeline& r : job->ranks) {
    ASSERT_EQ(r.steps.size(), 3u);
    EXPECT_EQ(r.steps[0].step, 0);
    EXPECT_EQ(r.steps[2].step, 2);
    EXPECT_EQ(r.steps[1].floor_bytes, 101u);
    EXPECT_EQ(r.steps[1].by_tag()[0].name, params);
    EXPECT_EQ(r.steps[1].by_tag()[0].live_bytes, 51u);
    EXPECT_EQ(r.steps[1].by_tag()[0].peak_bytes, 61u);
    EXPECT_EQ(job->names.Name(r.steps[1].by_source()[0].name), "libnccl.so.2");
    EXPECT_EQ(job->names.Name(r.steps[1].by_phase()[0].name), "phase#99");
    EXPECT_EQ(r.steps[2].ooms, 1u);
    EXPECT_EQ(r.steps[0].device_total, 80ull << 30);
  }
  EXPECT_EQ(job->ranks[0].host, "node-a");
  EXPECT_EQ(job->ranks[1].device_index, 1);
  EXPECT_EQ(job->ranks[0].allocator, "segments");
  EXPECT_EQ(job->ranks[1].allocator, "vmm");
}

TEST(RollupConvertTest, ConvertedTimelineFeedsTheAnalyses) {
  absl::StatusOr<JobTimeline> job = TimelineFromRollups("j", TwoRanks());
  ASSERT_TRUE(job.ok());
  GrowthParams p;
  p.warmup_steps = 0;
  p.min_points = 2;
  GrowthReport report = FindGrowth(*job, p);
  EXPECT_EQ(report.groups_examined, 2u);  // one tag on each of 2 ranks
  EXPECT_TRUE(report.groups.empty());     // 1 byte per step is below the significance floor
}

TEST(RollupConvertTest, RejectsDuplicateRanksAndSteps) {
  v1::GetRollupsResponse dup = TwoRanks();
  *dup.add_ranks() = dup.ranks(0);
  absl::StatusOr<JobTimeline> a = TimelineFromRollups("j", dup);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("rank 0 attempt 0 appears twice"), std::string::npos);

  v1::GetRollupsResponse steps = TwoRanks();
  *steps.mutable_ranks(1)->add_steps() = steps.ranks(1).steps(0);
  absl::StatusOr<JobTimeline> b = TimelineFromRollups("j", steps);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("rank 1 attempt 0 has step 2 twice"), std::string::npos);
}

absl::StatusOr<JobStepMetrics> MetricsFromRollups(const v1::GetRollupsResponse& rollups,
                                                  v1::TimelineAxis axis = v1::TIMELINE_AXIS_STEP) {
  StepMetricsBuilder builder("j", axis, rollups.bucket_ns());
  for (const v1::RankRollups& rank : rollups.ranks()) {
    if (absl::Status s = builder.StartRank(rank); !s.ok()) return s;
    for (const v1::StepRollup& row : rank.steps()) builder.AddRow(row);
  }
  return std::move(builder).Finish();
}

TEST(RollupConvertTest, StepMetricsAreTheTimelinesColumns) {
  v1::GetRollupsResponse rollups = TwoRanks();  // rows out of order: sorted as the timeline's
  rollups.mutable_ranks(1)->mutable_steps(0)->set_start_ns(77);
  rollups.mutable_ranks(0)->mutable_steps(1)->set_peak_bytes(999);
  absl::StatusOr<JobStepMetrics> metrics = MetricsFromRollups(rollups);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  absl::StatusOr<JobTimeline> timeline = TimelineFromRollups("j", rollups);
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  const JobStepMetrics want = StepMetricsOf(*timeline);
  ASSERT_EQ(metrics->ranks.size(), want.ranks.size());
  for (size_t i = 0; i < want.ranks.size(); ++i) {
    const RankStepMetrics& got = metrics->ranks[i];
    EXPECT_EQ(got.rank, want.ranks[i].rank);
    EXPECT_EQ(got.host, want.ranks[i].host);
    EXPECT_EQ(got.step, want.ranks[i].step);
    EXPECT_EQ(got.start_ns, want.ranks[i].start_ns);
    EXPECT_EQ(got.floor_bytes, want.ranks[i].floor_bytes);
    EXPECT_EQ(got.end_bytes, want.ranks[i].end_bytes);
    EXPECT_EQ(got.peak_bytes, want.ranks[i].peak_bytes);
  }
  EXPECT_EQ(metrics->ranks[1].step, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(metrics->ranks[1].start_ns[2], 77);  // step 2 was stored first
  EXPECT_EQ(metrics->ranks[0].peak_bytes[0], 999u);
}

TEST(RollupConvertTest, StepMetricsRejectWhatTheTimelineRejects) {
  v1::GetRollupsResponse dup = TwoRanks();
  *dup.add_ranks() = dup.ranks(0);
  absl::StatusOr<JobStepMetrics> a = MetricsFromRollups(dup);
  EXPECT_EQ(a.status(), TimelineFromRollups("j", dup).status());

  v1::GetRollupsResponse steps = TwoRanks();
  *steps.mutable_ranks(1)->add_steps() = steps.ranks(1).steps(0);
  absl::StatusOr<JobStepMetrics> b = MetricsFromRollups(steps);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.status(), TimelineFromRollups("j", steps).status());
}

// An ended stream's last row that it stopped well inside (a job an OOM ended) is read as a row in
// progress, cut short: its end is where the process stopped, which the analyses compared as a
// step's end. Both builders agree; a running rank's row is in progress, not cut short; time
// buckets are never read so.
TEST(RollupConvertTest, ALastRowItsStreamStoppedInsideIsCutShort) {
  // `clock_back`: the rank's clock went back across step 4's marker (the collector counts
  // time_backwards): step 3 ends after step 4's end, which is still the last row's.
  const auto job = [](int64_t last_row_ns, bool running, bool clock_back = false) {
    v1::GetRollupsResponse resp;
    v1::RankRollups* r = resp.add_ranks();
    r->set_last_row_in_progress(running);
    for (int64_t s = 4; s >= 0; --s) {  // stored out of order: the builders sort
      v1::StepRollup* p = r->add_steps();
      p->set_step(s);
      p->set_start_ns(s * 1000);
      p->set_end_ns(s < 4 ? (s + 1) * 1000 : 4000 + last_row_ns);
      if (clock_back && s == 3) p->set_end_ns(4900);
      p->set_end_bytes(s < 4 ? 100 : 900);
      p->set_ooms(s == 4);
    }
    return resp;
  };
  struct Case {
    int64_t last_row_ns;
    bool running;
    v1::TimelineAxis axis;
    bool in_progress, cut_short;
    bool clock_back = false;
  };
  for (const Case& c : std::vector<Case>{{27, false, v1::TIMELINE_AXIS_STEP, true, true},
                                         {900, false, v1::TIMELINE_AXIS_STEP, false, false},
                                         {27, true, v1::TIMELINE_AXIS_STEP, true, false},
                                         {27, false, v1::TIMELINE_AXIS_TIME, false, false},
                                         {27, false, v1::TIMELINE_AXIS_STEP, true, true, true}}) {
    SCOPED_TRACE(::testing::Message() << c.last_row_ns << " ns, running " << c.running << ", axis "
                                      << c.axis << ", clock back " << c.clock_back);
    absl::StatusOr<JobTimeline> timeline =
        TimelineFromRollups("j", job(c.last_row_ns, c.running, c.clock_back), c.axis);
    ASSERT_TRUE(timeline.ok()) << timeline.status();
    const RankTimeline& rank = timeline->ranks[0];
    EXPECT_EQ(rank.in_progress.has_value(), c.in_progress);
    EXPECT_EQ(rank.cut_short, c.cut_short);
    EXPECT_EQ(rank.row_count(), 5u) << "still a row: its OOM and peak count";
    ASSERT_TRUE(FindOom(rank).has_value());
    EXPECT_EQ(FindOom(rank)->step, 4);
    absl::StatusOr<JobStepMetrics> metrics =
        MetricsFromRollups(job(c.last_row_ns, c.running, c.clock_back), c.axis);
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    EXPECT_EQ(metrics->ranks[0].in_progress.has_value(), c.in_progress);
    EXPECT_EQ(metrics->ranks[0].cut_short, c.cut_short);
    EXPECT_EQ(StepMetricsOf(*timeline).ranks[0].cut_short, c.cut_short);
  }
}

TEST(RollupConvertTest, TimeAxisIsRecorded) {
  v1::GetRollupsResponse resp = TwoRanks();
  resp.set_bucket_ns(1'000'000'000);
  absl::StatusOr<JobTimeline> job = TimelineFromRollups("j", resp, v1::TIMELINE_AXIS_TIME);
  ASSERT_TRUE(job.ok());
  EXPECT_TRUE(job->time_axis);
  EXPECT_EQ(job->bucket_ns, 1'000'000'000);
}

TEST(RollupConvertTest, LiveSetResolvesNamesAndSkipsHostMemory) {
  v1::LiveAtResponse live;
  live.set_rank(3);
  live.set_attempt(1);
  live.set_step(98);
  live.set_ts_ns(12345);
  v1::StringEntry* e = live.add_strings();
  e->set_id(4);
  e->set_value("leak:cached_outputs");
  v1::LiveAllocation* a = live.add_allocations();
  a->set_tag_id(4);
  a->set_source_id(9);
  a->set_bytes(1 << 20);
  a->set_step(40);
  a->set_memory_kind(3);
  v1::LiveAllocation* pinned = live.add_allocations();
  pinned->set_bytes(1 << 30);
  pinned->set_memory_kind(2);
  RankLiveSet set = LiveSetFromProto(live);
  EXPECT_EQ(set.rank, 3u);
  EXPECT_EQ(set.attempt, 1u);
  EXPECT_EQ(set.at_step, 98);
  EXPECT_EQ(set.at_ns, 12345);
  ASSERT_EQ(set.allocations.size(), 1u);
  EXPECT_EQ(set.allocations[0].tag, "leak:cached_outputs");
  EXPECT_EQ(set.allocations[0].source, "source#9");
  EXPECT_EQ(set.allocations[0].step_allocated, 40);
  EXPECT_EQ(LiveSetFromProto(live, /*include_host=*/true).allocations.size(), 2u);
}

}  // namespace
}  // namespace memtrace::analysis
