#include "collector/server/timeline_cache.h"

#include <cstdlib>
#include <memory>
#include <string>

#include "collector/server/simulated_job_store.h"
#include "gtest/gtest.h"
#include "proto/codec/batch_codec.h"
#include "tests/util/test_dirs.h"

namespace memtrace::collector {
namespace {

class TimelineCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EventStoreOptions options;
    options.dir =
        test_util::TmpPath(::testing::UnitTest::GetInstance()->current_test_info()->name());
    options.durability = Durability::kAsync;
    absl::StatusOr<std::unique_ptr<EventStore>> store = EventStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    sim::WorkloadOptions w;
    w.ranks = 3;
    w.steps = 10;
    w.layers = 2;
    ASSERT_TRUE(StoreSimulatedJob(*store_, "a", w).ok());
    ASSERT_TRUE(StoreSimulatedJob(*store_, "b", w).ok());
  }

  // Appends one more event (a step marker) to rank 0 of `job`.
  void Touch(const std::string& job, int64_t step) {
    v1::RankIdentity id;
    id.set_job_id(job);
    id.set_rank(0);
    absl::StatusOr<OpenedStream> opened = store_->OpenStream(id);
    ASSERT_TRUE(opened.ok());
    DecodedBatch batch;
    Event e;
    e.seq = opened->durable_seq + 1;
    e.ts_ns = 1'800'000'000'000'000'000;
    e.kind = EventKind::kStep;
    e.aux = static_cast<uint64_t>(step);
    batch.events.push_back(e);
    ASSERT_TRUE(store_->Append(opened->key, batch).ok());
    ASSERT_TRUE(store_->CloseStream(opened->key, true).ok());
  }

  std::unique_ptr<EventStore> store_;
};

TEST_F(TimelineCacheTest, ServesAnUnchangedJobFromTheCache) {
  TimelineCache cache;
  auto first = cache.Get(*store_, "a", v1::TIMELINE_AXIS_STEP);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = cache.Get(*store_, "a", v1::TIMELINE_AXIS_STEP);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ(cache.loads(), 1u);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ((*first)->ranks.size(), 3u);
}

TEST_F(TimelineCacheTest, AFullTimelineServesScalarQuestionsButNotTheOtherWayRound) {
  TimelineCache cache;
  auto scalars = cache.Get(*store_, "a", v1::TIMELINE_AXIS_STEP, RollupDetail::kScalars);
  ASSERT_TRUE(scalars.ok()) << scalars.status();
  for (const analysis::RankTimeline& r : (*scalars)->ranks) {
    for (const analysis::StepPoint& p : r.steps) EXPECT_TRUE(p.by_tag().empty());
  }
  auto full = cache.Get(*store_, "a", v1::TIMELINE_AXIS_STEP, RollupDetail::kFull);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(cache.loads(), 2u);
  EXPECT_FALSE((*full)->ranks[0].steps.back().by_tag().empty());
  // Same numbers either way.
  ASSERT_EQ((*full)->ranks.size(), (*scalars)->ranks.size());
  for (size_t r = 0; r < (*full)->ranks.size(); ++r) {
    const auto& a = (*full)->ranks[r];
    const auto& b = (*scalars)->ranks[r];
    ASSERT_EQ(a.steps.size(), b.steps.size());
    EXPECT_EQ(a.allocator, b.allocator);
    for (size_t i = 0; i < a.steps.size(); ++i) {
      EXPECT_EQ(a.steps[i].floor_bytes, b.steps[i].floor_bytes);
      EXPECT_EQ(a.steps[i].end_ns, b.steps[i].end_ns);
    }
  }
  auto again = cache.Get(*store_, "a", v1::TIMELINE_AXIS_STEP, RollupDetail::kScalars);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), full->get());
  EXPECT_EQ(cache.loads(), 2u);
}

// compare's buckets as stored (two jobs without markers put in one window) were read from
// RocksDB again on every call.
TEST_F(TimelineCacheTest, UnwindowedTimelinesAreCachedInEntriesOfTheirOwn) {
  TimelineCache cache;
  auto first = cache.GetUnwindowed(*store_, "a");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = cache.GetUnwindowed(*store_, "a");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ(cache.loads(), 1u);
  EXPECT_EQ(cache.hits(), 1u);
  // Not the timeline Get() answers with (windows chosen), nor answered by it.
  auto windowed = cache.Get(*store_, "a", v1::TIMELINE_AXIS_STEP);
  ASSERT_TRUE(windowed.ok());
  EXPECT_NE(windowed->get(), first->get());
  EXPECT_EQ(cache.loads(), 2u);
  EXPECT_EQ(cache.GetUnwindowed(*store_, "a")->get(), first->get());
  EXPECT_EQ(cache.hits(), 2u);
  // A job that changed is reloaded.
  Touch("a", 100);
  auto reloaded = cache.GetUnwindowed(*store_, "a");
  ASSERT_TRUE(reloaded.ok());
  EXPECT_NE(reloaded->get(), first->get());
  EXPECT_EQ(cache.loads(), 3u);
  EXPECT_EQ(cache.GetUnwindowed(*store_, "nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(TimelineCacheTest, StepMetricsAreCachedAndReloadedLikeTimelines) {
  TimelineCache cache;
  auto first = cache.GetStepMetrics(*store_, "a", v1::TIMELINE_AXIS_STEP);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ((*first)->ranks.size(), 3u);
  // A timeline of the same job is an entry of its own, and does not evict the metrics.
  ASSERT_TRUE(cache.Get(*store_, "a", v1::TIMELINE_AXIS_STEP).ok());
  auto second = cache.GetStepMetrics(*store_, "a", v1::TIMELINE_AXIS_STEP);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ(cache.loads(), 2u);
  EXPECT_EQ(cache.hits(), 1u);

  const size_t steps = (*first)->ranks[0].size();
  Touch("a", 1000);
  auto third = cache.GetStepMetrics(*store_, "a", v1::TIMELINE_AXIS_STEP);
  ASSERT_TRUE(third.ok());
  EXPECT_NE(first->get(), third->get());
  // Its stream ended on step 1000's marker: a row cut short, counted among its rows.
  EXPECT_EQ((*third)->ranks[0].row_count(), steps + 1);
  EXPECT_EQ((*third)->ranks[0].last_step(), 1000);
  EXPECT_EQ(cache.loads(), 3u);

  auto unknown = cache.GetStepMetrics(*store_, "nope", v1::TIMELINE_AXIS_STEP);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(TimelineCacheTest, ReloadsAJobThatStoredMoreEvents) {
  TimelineCache cache;
  auto before = cache.Get(*store_, "a", v1::TIMELINE_AXIS_STEP);
  ASSERT_TRUE(before.ok());
  const size_t steps = (*before)->ranks[0].steps.size();
  Touch("a", 100);
  auto after = cache.Get(*store_, "a", v1::TIMELINE_AXIS_STEP);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(cache.loads(), 2u);
  EXPECT_EQ((*after)->ranks[0].row_count(), steps + 1);
  // The old timeline stays valid for whoever still holds it.
  EXPECT_EQ((*before)->ranks[0].steps.size(), steps);
}

// A stream's agent going away stores nothing new, but its last row is then no longer in
// progress: the cached timeline, which left that row out of the steps, is reloaded.
TEST_F(TimelineCacheTest, ReloadsAJobWhoseAgentWentAway) {
  v1::RankIdentity id;
  id.set_job_id("a");
  id.set_rank(0);
  absl::StatusOr<OpenedStream> opened = store_->OpenStream(id);
  ASSERT_TRUE(opened.ok());
  TimelineCache cache;
  auto running = cache.Get(*store_, "a", v1::TIMELINE_AXIS_STEP);
  ASSERT_TRUE(running.ok()) << running.status();
  EXPECT_TRUE((*running)->ranks[0].in_progress.has_value());
  auto metrics = cache.GetStepMetrics(*store_, "a", v1::TIMELINE_AXIS_STEP);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_TRUE((*metrics)->ranks[0].in_progress.has_value());
  ASSERT_TRUE(store_->CloseStream(opened->key, true, opened->connection).ok());
  auto ended = cache.Get(*store_, "a", v1::TIMELINE_AXIS_STEP);
  ASSERT_TRUE(ended.ok());
  EXPECT_EQ(cache.loads(), 3u);
  EXPECT_FALSE((*ended)->ranks[0].in_progress.has_value());
  EXPECT_EQ((*ended)->ranks[0].steps.size(), (*running)->ranks[0].steps.size() + 1);
}

TEST_F(TimelineCacheTest, KeepsAxesApartAndEvictsTheLeastRecentlyUsed) {
  TimelineCache cache(/*max_jobs=*/2);
  ASSERT_TRUE(cache.Get(*store_, "a", v1::TIMELINE_AXIS_STEP).ok());
  auto time = cache.Get(*store_, "a", v1::TIMELINE_AXIS_TIME);
  ASSERT_TRUE(time.ok());
  EXPECT_TRUE((*time)->time_axis);
  EXPECT_EQ(cache.loads(), 2u);
  ASSERT_TRUE(cache.Get(*store_, "a", v1::TIMELINE_AXIS_STEP).ok());  // hit, now most recent
  ASSERT_TRUE(cache.Get(*store_, "b", v1::TIMELINE_AXIS_STEP).ok());  // evicts a/time
  EXPECT_EQ(cache.loads(), 3u);
  ASSERT_TRUE(cache.Get(*store_, "a", v1::TIMELINE_AXIS_STEP).ok());
  EXPECT_EQ(cache.loads(), 3u);
  ASSERT_TRUE(cache.Get(*store_, "a", v1::TIMELINE_AXIS_TIME).ok());
  EXPECT_EQ(cache.loads(), 4u);
}

TEST_F(TimelineCacheTest, UnknownJobIsNotFoundAndNotCached) {
  TimelineCache cache;
  auto missing = cache.Get(*store_, "nope", v1::TIMELINE_AXIS_STEP);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache.loads(), 0u);
}

}  // namespace
}  // namespace memtrace::collector
