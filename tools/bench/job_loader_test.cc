#include "tools/bench/job_loader.h"

#include <cstdlib>

#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"

namespace memtrace::bench {
namespace {

TEST(JobLoaderTest, EveryRankIsStoredCompleteWithAllItsEvents) {
  collector::EventStoreOptions o;
  o.dir = test_util::TmpPath("job");
  absl::StatusOr<std::unique_ptr<collector::EventStore>> store = collector::EventStore::Open(o);
  ASSERT_TRUE(store.ok()) << store.status();
  sim::WorkloadOptions w;
  w.ranks = 5;
  w.steps = 30;
  w.events_per_rank = 3000;
  w.leak_rank = 2;
  w.leak_from_step = 10;
  absl::StatusOr<LoadedJob> job = LoadSimulatedJob(**store, "j", w, 2, 500);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->ranks, 5);
  absl::StatusOr<std::vector<v1::RankSummary>> ranks = (*store)->ListRanks("j");
  ASSERT_TRUE(ranks.ok());
  ASSERT_EQ(ranks->size(), 5u);
  uint64_t stored = 0;
  for (const v1::RankSummary& r : *ranks) {
    EXPECT_TRUE(r.complete());
    EXPECT_EQ(r.durable_seq(), r.events_stored());
    EXPECT_GE(r.current_step(), 29);
    stored += r.events_stored();
  }
  EXPECT_EQ(stored, job->events);
  EXPECT_GT(job->events, 5u * 2000);
}

TEST(JobLoaderTest, InvalidWorkloadIsRejectedBeforeAnythingIsStored) {
  collector::EventStoreOptions o;
  o.dir = test_util::TmpPath("bad");
  auto store = collector::EventStore::Open(o);
  ASSERT_TRUE(store.ok());
  sim::WorkloadOptions w;
  w.ranks = 0;
  EXPECT_FALSE(LoadSimulatedJob(**store, "j", w).ok());
  EXPECT_FALSE((*store)->ListRanks("j").ok());
}

}  // namespace
}  // namespace memtrace::bench
