#include "tools/bench/event_template.h"

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"

namespace memtrace::bench {
namespace {

sim::WorkloadOptions Small() {
  sim::WorkloadOptions o;
  o.ranks = 4;
  o.steps = 20;
  o.events_per_rank = 4000;
  return o;
}

TEST(EventTemplateTest, TemplateHoldsTheSimulatedRankWithItsSteps) {
  absl::StatusOr<EventTemplate> t = PlayTemplate(Small(), 1);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_GT(t->events.size(), 2000u);
  EXPECT_EQ(t->steps, 20);
  EXPECT_GT(t->span_ns, 0);
  EXPECT_FALSE(t->strings.empty());
  EXPECT_FALSE(PlayTemplate(Small(), 9).ok());
}

// Across laps time and step numbers only grow, and every free matches a live allocation of its
// own lap: the replayed stream is as consistent as the simulated one.
TEST(EventTemplateTest, LapsKeepTimeStepsAndAllocationsConsistent) {
  absl::StatusOr<EventTemplate> t = PlayTemplate(Small(), 0);
  ASSERT_TRUE(t.ok());
  LapReplayer replayer(&*t);
  std::vector<Event> events(t->events.size() * 3 + 17);
  replayer.Fill(absl::MakeSpan(events).subspan(0, 1000));
  replayer.Fill(absl::MakeSpan(events).subspan(1000));
  EXPECT_EQ(replayer.laps_completed(), 3u);
  int64_t last_ts = events[0].ts_ns;
  uint64_t last_step = 0;
  int steps = 0;
  absl::flat_hash_map<uint64_t, uint64_t> live;
  for (const Event& e : events) {
    EXPECT_GE(e.ts_ns, last_ts);
    last_ts = e.ts_ns;
    if (e.kind == EventKind::kStep) {
      if (steps++ > 0) {
        EXPECT_EQ(e.aux, last_step + 1);
      }
      last_step = e.aux;
    }
    if (e.kind == EventKind::kAlloc) {
      EXPECT_TRUE(live.emplace(e.address, e.bytes).second);
    }
    if (e.kind == EventKind::kFree) {
      ASSERT_EQ(live.count(e.address), 1u) << "free of an address not live";
      EXPECT_EQ(live[e.address], e.bytes);
      live.erase(e.address);
    }
  }
  EXPECT_EQ(steps, 3 * 20);
}

}  // namespace
}  // namespace memtrace::bench
