#include "agent/cupti/record_order.h"

#include <atomic>
#include <vector>

#include "agent/cupti/testing/recording_sink.h"
#include "gtest/gtest.h"

namespace memtrace {
namespace cupti {
namespace {

Event Alloc(int64_t ts, uint64_t address) {
  Event e;
  e.kind = EventKind::kAlloc;
  e.ts_ns = ts;
  e.address = address;
  e.bytes = 1 << 20;
  return e;
}

Event Step(int64_t ts, int64_t step) {
  Event e;
  e.kind = EventKind::kStep;
  e.ts_ns = ts;
  e.aux = static_cast<uint64_t>(step);
  return e;
}

// "A@ts" for allocations, "S@ts" for steps: the order the downstream sink saw.
std::vector<std::string> Order(const RecordingSink& sink) {
  std::vector<std::string> out;
  for (const Event& e : sink.events()) {
    out.push_back(std::string(e.kind == EventKind::kStep ? "S@" : "A@") + std::to_string(e.ts_ns));
  }
  return out;
}

TEST(RecordOrderTest, AStepWaitsForTheFlushThatDeliversTheAllocationsMadeBeforeIt) {
  // The allocation at 100 was made before step 1 began (at 150) but reaches the agent after
  // it, in a CUPTI buffer; the collector must see it in step 0.
  RecordingSink sink;
  RecordOrder order(&sink, 16, nullptr);
  order.callbacks()->Record(Step(150, 1));
  EXPECT_TRUE(sink.events().empty());
  const uint64_t mark = order.FlushMark();  // the flush begins
  const Event late[] = {Alloc(100, 0xA)};
  order.records()->RecordMany(late);  // ... delivers the buffer
  EXPECT_EQ(Order(sink), std::vector<std::string>({"A@100"}));
  EXPECT_FALSE(order.ReleaseHeldBefore(mark));  // ... and is done
  EXPECT_EQ(Order(sink), std::vector<std::string>({"A@100", "S@150"}));
  EXPECT_EQ(order.stats().released_by_flush, 1u);
}

TEST(RecordOrderTest, EventsHeldAfterTheFlushBeganWaitForTheNextOne) {
  RecordingSink sink;
  RecordOrder order(&sink, 16, nullptr);
  order.callbacks()->Record(Step(150, 1));
  const uint64_t mark = order.FlushMark();
  order.callbacks()->Record(Step(250, 2));  // during the flush
  EXPECT_TRUE(order.ReleaseHeldBefore(mark));
  EXPECT_EQ(Order(sink), std::vector<std::string>({"S@150"}));
  EXPECT_FALSE(order.ReleaseHeldBefore(order.FlushMark()));
  EXPECT_EQ(Order(sink), std::vector<std::string>({"S@150", "S@250"}));
}

TEST(RecordOrderTest, AFlushReleasesByHoldOrderSoAClockSteppingBackCannotKeepEvents) {
  // CLOCK_REALTIME stepped back between the two: the second event's timestamp is older, yet it
  // was held later; a flush that began after both releases both.
  RecordingSink sink;
  RecordOrder order(&sink, 16, nullptr);
  order.callbacks()->Record(Step(5000, 1));
  order.callbacks()->Record(Step(100, 2));
  EXPECT_FALSE(order.ReleaseHeldBefore(order.FlushMark()));
  EXPECT_EQ(Order(sink), std::vector<std::string>({"S@5000", "S@100"}));
}

TEST(RecordOrderTest, OnOneClockALaterRecordReleasesTheStepsBeforeIt) {
  RecordingSink sink;
  RecordOrder order(&sink, 16, nullptr);
  order.set_records_share_clock(true);
  order.callbacks()->Record(Step(150, 1));
  order.callbacks()->Record(Step(350, 2));
  const Event buffer[] = {Alloc(100, 0xA), Alloc(200, 0xB), Alloc(300, 0xC), Alloc(400, 0xD)};
  order.records()->RecordMany(buffer);
  EXPECT_EQ(Order(sink),
            std::vector<std::string>({"A@100", "S@150", "A@200", "A@300", "S@350", "A@400"}));
  EXPECT_EQ(order.stats().released_by_record, 2u);
  EXPECT_EQ(order.stats().records_behind, 0u);
}

TEST(RecordOrderTest, OnUnknownClocksOnlyAFlushReleases) {
  RecordingSink sink;
  RecordOrder order(&sink, 16, nullptr);  // records_share_clock not set
  order.callbacks()->Record(Step(150, 1));
  const Event buffer[] = {Alloc(100, 0xA), Alloc(200, 0xB)};
  order.records()->RecordMany(buffer);
  EXPECT_EQ(Order(sink), std::vector<std::string>({"A@100", "A@200"}));
  order.ReleaseHeldBefore(order.FlushMark());
  EXPECT_EQ(Order(sink), std::vector<std::string>({"A@100", "A@200", "S@150"}));
}

TEST(RecordOrderTest, RecordsOlderThanAReleasedStepAreCounted) {
  RecordingSink sink;
  RecordOrder order(&sink, 16, nullptr);
  order.set_records_share_clock(true);
  order.callbacks()->Record(Step(150, 1));
  order.ReleaseHeldBefore(order.FlushMark());
  const Event late[] = {Alloc(100, 0xA), Alloc(170, 0xB)};
  order.records()->RecordMany(late);
  EXPECT_EQ(order.stats().records_behind, 1u);
  EXPECT_EQ(sink.events().size(), 3u);  // counted, never dropped
}

TEST(RecordOrderTest, AFullHoldLetsItsOldestGoEarlyAndLosesNothing) {
  RecordingSink sink;
  RecordOrder order(&sink, 2, nullptr);
  for (int i = 1; i <= 5; ++i) order.callbacks()->Record(Step(100 * i, i));
  EXPECT_EQ(Order(sink), std::vector<std::string>({"S@100", "S@200", "S@300"}));
  EXPECT_EQ(order.stats().released_when_full, 3u);
  EXPECT_EQ(order.stats().most_held, 2u);
  order.Close();
  EXPECT_EQ(sink.events().size(), 5u);
}

TEST(RecordOrderTest, AfterCloseEverythingPassesStraightThrough) {
  RecordingSink sink;
  RecordOrder order(&sink, 16, nullptr);
  order.callbacks()->Record(Step(150, 1));
  order.Close();
  order.callbacks()->Record(Step(250, 2));
  EXPECT_EQ(Order(sink), std::vector<std::string>({"S@150", "S@250"}));
}

TEST(RecordOrderTest, PokesTheFlusherWhenAnEventStartsWaiting) {
  RecordingSink sink;
  std::atomic<int> pokes{0};
  RecordOrder order(&sink, 16, [&pokes] { ++pokes; });
  order.callbacks()->Record(Step(150, 1));
  order.callbacks()->Record(Step(250, 2));  // already waiting behind the first: no second poke
  EXPECT_EQ(pokes.load(), 1);
  order.ReleaseHeldBefore(order.FlushMark());
  order.callbacks()->Record(Step(1150, 3));
  EXPECT_EQ(pokes.load(), 2);
}

TEST(RecordOrderTest, StringsAndLossesGoStraightThrough) {
  RecordingSink sink;
  RecordOrder order(&sink, 16, nullptr);
  const uint32_t id = order.callbacks()->Intern(StringKind::kTag, "fsdp:layers.0");
  EXPECT_EQ(order.records()->Intern(StringKind::kTag, "fsdp:layers.0"), id);
  order.records()->RecordLoss(kLossCuptiDropped, 7, 100);
  ASSERT_EQ(sink.events().size(), 1u);
  EXPECT_EQ(sink.events()[0].kind, EventKind::kLoss);
  EXPECT_EQ(sink.events()[0].aux, 7u);
}

}  // namespace
}  // namespace cupti
}  // namespace memtrace
