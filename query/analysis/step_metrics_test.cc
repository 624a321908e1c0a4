#include "query/analysis/step_metrics.h"

#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace memtrace::analysis {
namespace {

RankTimeline Rank(uint32_t rank, uint32_t attempt, std::vector<int64_t> steps) {
  RankTimeline r;
  r.rank = rank;
  r.attempt = attempt;
  r.host = "node-" + std::to_string(rank);
  for (int64_t s : steps) {
    StepPoint p;
    p.step = s;
    p.start_ns = 1000 * s + rank;
    p.floor_bytes = 10 * s + 1;
    p.end_bytes = 10 * s + 2;
    p.peak_bytes = 10 * s + 3;
    p.allocs = 7;  // not a column
    r.steps.push_back(p);
  }
  return r;
}

TEST(StepMetricsTest, ColumnsHoldEachPointsComparedNumbers) {
  JobTimeline job;
  job.job_id = "j";
  job.time_axis = true;
  job.bucket_ns = 5;
  job.ranks.push_back(Rank(3, 1, {4, 9}));
  JobStepMetrics m = StepMetricsOf(job);
  EXPECT_EQ(m.job_id, "j");
  EXPECT_TRUE(m.time_axis);
  EXPECT_EQ(m.bucket_ns, 5);
  ASSERT_EQ(m.ranks.size(), 1u);
  const RankStepMetrics& r = m.ranks[0];
  EXPECT_EQ(r.rank, 3u);
  EXPECT_EQ(r.attempt, 1u);
  EXPECT_EQ(r.host, "node-3");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r.step, (std::vector<int64_t>{4, 9}));
  EXPECT_EQ(r.start_ns, (std::vector<int64_t>{4003, 9003}));
  for (size_t i = 0; i < r.size(); ++i) {
    for (Metric metric : {Metric::kFloor, Metric::kEnd, Metric::kPeak}) {
      EXPECT_EQ(r.Value(i, metric), MetricValue(job.ranks[0].steps[i], metric));
    }
  }
}

TEST(StepMetricsTest, SelectsAndGridsAsTheTimelineDoes) {
  JobTimeline job;
  job.ranks.push_back(Rank(1, 0, {2, 3, 5}));
  job.ranks.push_back(Rank(0, 0, {0, 1, 2, 3}));
  job.ranks.push_back(Rank(1, 1, {2, 3, 5, 6}));
  const JobStepMetrics m = StepMetricsOf(job);
  for (std::optional<uint32_t> attempt : {std::optional<uint32_t>(), std::optional<uint32_t>(0)}) {
    std::vector<const RankTimeline*> by_timeline = SelectRanks(job, attempt);
    std::vector<const RankStepMetrics*> by_columns = SelectRanks(m, attempt);
    ASSERT_EQ(by_timeline.size(), by_columns.size());
    for (size_t i = 0; i < by_timeline.size(); ++i) {
      EXPECT_EQ(by_timeline[i]->rank, by_columns[i]->rank);
      EXPECT_EQ(by_timeline[i]->attempt, by_columns[i]->attempt);
    }
    StepGrid a = BuildStepGrid(by_timeline);
    StepGrid b = BuildStepGrid(by_columns);
    EXPECT_EQ(a.steps, b.steps);
    EXPECT_EQ(a.index, b.index);
  }
  // Latest attempts: rank 1's second run brings step 6.
  EXPECT_EQ(BuildStepGrid(SelectRanks(m)).steps, (std::vector<int64_t>{0, 1, 2, 3, 5, 6}));
}

}  // namespace
}  // namespace memtrace::analysis
