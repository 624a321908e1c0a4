#include "query/analysis/timeline.h"

#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"

namespace memtrace::analysis {
namespace {

TEST(NameTableTest, InternsOnceAndReservesZeroForEmpty) {
  NameTable t;
  EXPECT_EQ(t.Intern(""), 0u);
  NameId a = t.Intern("fsdp:params");
  EXPECT_EQ(t.Intern("fsdp:params"), a);
  EXPECT_NE(t.Intern("libnccl.so.2"), a);
  EXPECT_EQ(t.Name(a), "fsdp:params");
  EXPECT_EQ(t.Name(999), "");
  EXPECT_EQ(t.Find("nope"), std::nullopt);
  EXPECT_EQ(t.Find("fsdp:params"), a);
}

bool Same(absl::Span<const GroupBytes> a, std::vector<GroupBytes> b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].open != b[i].open || a[i].live_bytes != b[i].live_bytes ||
        a[i].peak_bytes != b[i].peak_bytes) {
      return false;
    }
  }
  return true;
}

TEST(StepGroupsTest, KeepsThreeListsApartThroughCopiesAndMoves) {
  const std::vector<GroupBytes> tags = {{1, false, false, 10, 11}, {2, false, false, 20, 21}};
  const std::vector<GroupBytes> sources = {};
  const std::vector<GroupBytes> phases = {{3, true, false, 30, 31}};
  StepGroups g(tags, sources, phases);
  EXPECT_TRUE(Same(g.tags(), tags));
  EXPECT_TRUE(Same(g.sources(), sources));
  EXPECT_TRUE(Same(g.phases(), phases));

  StepGroups copy = g;
  g.mutable_tags()[1].live_bytes = 99;  // the copy has its own block
  EXPECT_TRUE(Same(copy.tags(), tags));
  EXPECT_EQ(g.tags()[1].live_bytes, 99u);

  StepGroups moved = std::move(copy);
  EXPECT_TRUE(Same(moved.phases(), phases));
  copy = moved;  // assigning to a moved-from value works
  EXPECT_TRUE(Same(copy.tags(), tags));
  copy = copy;  // and to itself
  EXPECT_TRUE(Same(copy.phases(), phases));

  StepGroups none({}, {}, {});
  EXPECT_TRUE(none.tags().empty() && none.sources().empty() && none.phases().empty());
  EXPECT_TRUE(StepGroups().phases().empty());
}

TEST(StepGroupsTest, AStepPointKeepsItsListsInOnePointer) {
  // Why StepGroups exists: a point of a 1024-rank job's 200 k is this big.
  EXPECT_EQ(sizeof(StepGroups), sizeof(void*));
  StepPoint p;
  p.groups = StepGroups({{5, false, false, 1, 2}}, {}, {});
  ASSERT_NE(FindGroup(p.by_tag(), 5), nullptr);
  EXPECT_EQ(FindGroup(p.by_tag(), 5)->peak_bytes, 2u);
  EXPECT_EQ(FindGroup(p.by_source(), 5), nullptr);
}

RankTimeline Rank(uint32_t rank, uint32_t attempt, std::vector<int64_t> steps) {
  RankTimeline r;
  r.rank = rank;
  r.attempt = attempt;
  for (int64_t s : steps) {
    StepPoint p;
    p.step = s;
    r.steps.push_back(p);
  }
  return r;
}

TEST(SelectRanksTest, TakesEachRanksLatestAttemptOrdered) {
  JobTimeline job;
  job.ranks.push_back(Rank(2, 0, {0}));
  job.ranks.push_back(Rank(0, 1, {0}));
  job.ranks.push_back(Rank(0, 0, {0}));
  std::vector<const RankTimeline*> ranks = SelectRanks(job);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0]->rank, 0u);
  EXPECT_EQ(ranks[0]->attempt, 1u);
  EXPECT_EQ(ranks[1]->rank, 2u);
  std::vector<const RankTimeline*> first = SelectRanks(job, 0);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0]->attempt, 0u);
}

TEST(StepGridTest, UnitesRaggedStepRanges) {
  JobTimeline job;
  job.ranks.push_back(Rank(0, 0, {0, 1, 2, 3}));
  job.ranks.push_back(Rank(1, 0, {2, 3, 5}));
  std::vector<const RankTimeline*> ranks = SelectRanks(job);
  StepGrid grid = BuildStepGrid(ranks);
  EXPECT_EQ(grid.steps, (std::vector<int64_t>{0, 1, 2, 3, 5}));
  EXPECT_EQ(grid.index[0], (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(grid.index[1], (std::vector<uint32_t>{2, 3, 4}));
}

TEST(MetricTest, PicksTheNamedField) {
  StepPoint p;
  p.floor_bytes = 1;
  p.end_bytes = 2;
  p.peak_bytes = 3;
  EXPECT_EQ(MetricValue(p, Metric::kFloor), 1u);
  EXPECT_EQ(MetricValue(p, Metric::kEnd), 2u);
  EXPECT_EQ(MetricValue(p, Metric::kPeak), 3u);
  EXPECT_EQ(MetricName(Metric::kFloor), "floor");
}

// A one-step trace has step markers; a job recorded without them has only step 0 per rank.
TEST(TimelineTest, HasStepMarkersTellsOneMarkedStepFromNone) {
  JobTimeline job;
  job.ranks.resize(2);
  for (RankTimeline& r : job.ranks) r.steps.resize(1);
  EXPECT_FALSE(HasStepMarkers(job));
  job.ranks[1].steps[0].step = 6;
  EXPECT_TRUE(HasStepMarkers(job));
  job.ranks[1].steps[0].step = 0;
  job.ranks[0].steps.resize(2);
  job.ranks[0].steps[1].step = 1;
  EXPECT_TRUE(HasStepMarkers(job));
}

TEST(EndedWithinItsLastStepTest, IsLessThanHalfTheMedianStepIn) {
  // Steps of 1 s (one of 3 s: the median is robust to it).
  const std::vector<int64_t> starts = {0, 1000, 4000, 5000, 6000};
  EXPECT_TRUE(EndedWithinItsLastStep(starts, 6000 + 27));  // 27 ms in: an OOM ended the job
  EXPECT_TRUE(EndedWithinItsLastStep(starts, 6000 + 499));
  EXPECT_FALSE(EndedWithinItsLastStep(starts, 6000 + 500));  // half a step: taken as whole
  EXPECT_FALSE(EndedWithinItsLastStep(starts, 6000 + 990));  // a job that finished
  // Too few steps before it to know their length; steps of no length.
  EXPECT_FALSE(EndedWithinItsLastStep({0, 1000, 2000}, 2001));
  EXPECT_FALSE(EndedWithinItsLastStep({5, 5, 5, 5}, 5));
  // Only the latest 64 steps count: a job whose steps grew 10x long reads its recent ones.
  std::vector<int64_t> grew;
  for (int64_t i = 0; i < 200; ++i) grew.push_back(i < 100 ? i * 100 : 10'000 + (i - 100) * 1000);
  EXPECT_TRUE(EndedWithinItsLastStep(grew, grew.back() + 400));
  EXPECT_FALSE(EndedWithinItsLastStep(grew, grew.back() + 600));
}

}  // namespace
}  // namespace memtrace::analysis
