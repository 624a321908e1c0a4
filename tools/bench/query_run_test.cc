#include "tools/bench/query_run.h"

#include <cstdlib>

#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"
#include "tools/bench/job_loader.h"

namespace memtrace::bench {
namespace {

// A small job with a planted leak on rank 2: each question is answered (the leak found) and
// timed cold and warm through a real collector.
TEST(QueryRunTest, EveryQuestionIsAnsweredAndTimedOnAPlantedLeak) {
  const std::string dir = test_util::TmpPath("q");
  {
    collector::EventStoreOptions o;
    o.dir = dir;
    auto store = collector::EventStore::Open(o);
    ASSERT_TRUE(store.ok()) << store.status();
    sim::WorkloadOptions w;
    w.ranks = 6;
    w.steps = 60;
    w.events_per_rank = 6000;
    w.leak_rank = 2;
    w.leak_from_step = 20;
    ASSERT_TRUE(LoadSimulatedJob(**store, "job", w).ok());
  }
  absl::StatusOr<int64_t> at = StepStartNs(dir, "job", 2, 40);
  ASSERT_TRUE(at.ok()) << at.status();
  QueryPlan plan;
  plan.data_dir = dir;
  plan.job_id = "job";
  plan.live_rank = 2;
  plan.live_at_ns = *at;
  plan.warm_repeats = 2;
  absl::StatusOr<std::vector<QuestionTiming>> t = TimeQuestions(plan);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 4u);
  EXPECT_EQ((*t)[0].answer.rfind("rank 2 from step", 0), 0u) << (*t)[0].answer;
  EXPECT_NE((*t)[1].answer.find("leak:cache"), std::string::npos) << (*t)[1].answer;
  EXPECT_NE((*t)[2].answer.find("leaking rank(s) 2"), std::string::npos) << (*t)[2].answer;
  EXPECT_NE((*t)[3].answer.find("top tag"), std::string::npos) << (*t)[3].answer;
  EXPECT_NE((*t)[3].answer.find("next to 5 other ranks"), std::string::npos) << (*t)[3].answer;
  for (const QuestionTiming& q : *t) {
    EXPECT_GT(q.cold_ms, 0);
    EXPECT_GT(q.warm_ms, 0);
    EXPECT_GT(q.response_bytes, 0u);
    if (q.question != Question::kLive) {
      EXPECT_GT(q.load_ms, 0);
      EXPECT_GT(q.analysis_ms, 0);
    }
  }
  EXPECT_FALSE(StepStartNs(dir, "job", 2, 999).ok());
}

}  // namespace
}  // namespace memtrace::bench
