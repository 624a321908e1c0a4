#include "tools/bench/ingest_run.h"

#include <cstdlib>

#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"

namespace memtrace::bench {
namespace {

// A short run over real loopback gRPC into a real store: every recorded event is stored once,
// none is lost, and the rate counts only durable events.
TEST(IngestRunTest, EveryRecordedEventIsStoredAndTheRateIsPositive) {
  sim::WorkloadOptions w;
  w.ranks = 2;
  w.steps = 10;
  w.events_per_rank = 5000;
  absl::StatusOr<EventTemplate> t = PlayTemplate(w, 0);
  ASSERT_TRUE(t.ok()) << t.status();
  IngestOptions o;
  o.data_dir = test_util::TmpPath("ingest");
  o.streams = 3;
  o.warmup = absl::Milliseconds(200);
  o.measure = absl::Milliseconds(800);
  o.durability = collector::Durability::kAsync;
  o.queue_capacity = 1 << 14;
  o.window_events = 1 << 13;
  absl::StatusOr<IngestResult> r = RunIngest(o, {*t});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->events_in_window, 0u);
  EXPECT_GT(r->events_per_second, 0);
  EXPECT_EQ(r->events_lost, 0u);
  EXPECT_EQ(r->events_stored, r->events_recorded);
  EXPECT_GE(r->events_recorded, r->events_in_window);
  EXPECT_GT(r->disk_bytes, 0u);
}

TEST(IngestRunTest, NoTemplateIsAnError) {
  IngestOptions o;
  o.data_dir = test_util::TmpPath("none");
  EXPECT_FALSE(RunIngest(o, {}).ok());
}

}  // namespace
}  // namespace memtrace::bench
