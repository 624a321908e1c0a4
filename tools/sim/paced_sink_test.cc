#include "tools/sim/paced_sink.h"

#include <memory>

#include "absl/time/clock.h"
#include "agent/stream/fake_collector.h"
#include "gtest/gtest.h"

namespace memtrace::sim {
namespace {

TEST(SimulatedQueueCapacityTest, AgentDefaultForFewRanksAndAboutOneGibibyteTogetherForMany) {
  const size_t agent_default = TransportOptions().queue_capacity;
  EXPECT_EQ(SimulatedQueueCapacity(1), agent_default);
  EXPECT_EQ(SimulatedQueueCapacity(8), agent_default);
  for (int ranks : {64, 512}) {
    const size_t capacity = SimulatedQueueCapacity(ranks);
    EXPECT_LE(capacity, agent_default) << ranks;
    EXPECT_LE(capacity * sizeof(Event) * ranks, uint64_t{1} << 30) << ranks;
    EXPECT_GE(capacity, size_t{1} << 14) << ranks;
  }
  // 512 ranks at the agent's default queued 36 GiB, allocated up front: the run was killed.
  EXPECT_LT(SimulatedQueueCapacity(512), agent_default / 8);
  // Past 1024 ranks each keeps 16 Ki events (1.1 MiB), enough for four batches in flight.
  EXPECT_EQ(SimulatedQueueCapacity(1024), size_t{1} << 14);
  EXPECT_EQ(SimulatedQueueCapacity(1 << 20), size_t{1} << 14);
}

TEST(SimulatedBatchEventsTest, TwoBatchesFitInHalfTheQueue) {
  EXPECT_EQ(SimulatedBatchEvents(TransportOptions().queue_capacity), kDefaultMaxBatchEvents);
  EXPECT_EQ(SimulatedBatchEvents(size_t{1} << 14), size_t{1} << 12);
  EXPECT_EQ(SimulatedBatchEvents(2), 1u);
}

class PacedSinkTest : public ::testing::Test {
 protected:
  static constexpr size_t kQueue = 4096;
  static constexpr int kEvents = 40000;

  void SetUp() override {
    ASSERT_TRUE(collector_.Start().ok());
    TransportOptions options;
    options.collector_address = collector_.address();
    options.identity.set_job_id("paced-sink-test");
    options.identity.set_rank(0);
    options.log_failures = false;
    options.queue_capacity = kQueue;
    options.max_batch_events = SimulatedBatchEvents(kQueue);
    options.max_batch_delay = absl::Milliseconds(5);
    absl::StatusOr<std::unique_ptr<Transport>> transport = Transport::Start(std::move(options));
    ASSERT_TRUE(transport.ok()) << transport.status();
    transport_ = std::move(*transport);
  }

  // Plays kEvents allocations into `sink`; returns how long it took.
  absl::Duration Play(PacedSink& sink) {
    const absl::Time start = absl::Now();
    Event e;
    e.kind = EventKind::kAlloc;
    e.bytes = 4096;
    for (int i = 0; i < kEvents; ++i) {
      e.ts_ns = 1'000'000 + i;
      e.address = 0x1000 + 4096 * static_cast<uint64_t>(i);
      sink.Record(e);
    }
    return absl::Now() - start;
  }

  FakeCollector collector_;
  std::unique_ptr<Transport> transport_;
};

TEST_F(PacedSinkTest, HoldsThePlayerBackWhileTheCollectorKeepsUp) {
  PacedSink sink(*transport_, kQueue, /*speed=*/0, absl::Seconds(30));
  Play(sink);
  EXPECT_FALSE(sink.gave_up_waiting());
  ASSERT_TRUE(transport_->Shutdown(absl::Seconds(30)).ok());
  const TransportStats stats = transport_->stats();
  EXPECT_EQ(stats.events_lost, 0u);  // 10x the queue went through it, none dropped
  EXPECT_EQ(stats.durable_seq, static_cast<uint64_t>(kEvents));
}

TEST_F(PacedSinkTest, WaitsForAStalledCollectorOncePerRunNotOncePerCheck) {
  // The collector stores but never acknowledges: the backlog never shrinks. Holding the player
  // max_wait for each 1024 events took 37 x 200 ms here (and hours for a real run).
  collector_.HoldAcks(true);
  PacedSink sink(*transport_, kQueue, /*speed=*/0, absl::Milliseconds(200));
  const absl::Duration took = Play(sink);
  EXPECT_TRUE(sink.gave_up_waiting());
  EXPECT_GE(took, absl::Milliseconds(200));
  EXPECT_LT(took, absl::Seconds(2));
  // After that, what the queue could not take is dropped and counted, and what it took is
  // delivered once the collector answers again: every event is one or the other.
  collector_.HoldAcks(false);
  ASSERT_TRUE(transport_->Shutdown(absl::Seconds(30)).ok());
  const TransportStats stats = transport_->stats();
  EXPECT_EQ(stats.durable_seq, stats.last_seq);
  EXPECT_EQ(stats.events_recorded, static_cast<uint64_t>(kEvents));
  EXPECT_EQ(stats.events_lost, stats.events_lost_queue_full);
  // Sequence numbers go to the events kept and to a loss marker after each run of drops.
  EXPECT_GE(stats.last_seq + stats.events_lost, static_cast<uint64_t>(kEvents));
}

}  // namespace
}  // namespace memtrace::sim
