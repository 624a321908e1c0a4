#include "tools/bench/agent_memory.h"

#include "gtest/gtest.h"

namespace memtrace::bench {
namespace {

// Small bounds so the test is quick: the unacked store overflows, the loss is counted, and the
// resident memory stays within the configured bounds plus gRPC's own.
TEST(AgentMemoryTest, BothBoundsAreHitAndMemoryStaysNearThem) {
  absl::StatusOr<std::unique_ptr<SilentCollector>> collector = SilentCollector::Start();
  ASSERT_TRUE(collector.ok()) << collector.status();
  TransportOptions o;
  o.queue_capacity = 1 << 16;
  o.max_unacked_bytes = 4 << 20;
  absl::StatusOr<AgentMemoryResult> r =
      MeasureAgentMemory((*collector)->address(), o, absl::Milliseconds(300), absl::Seconds(20));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->lost_spool_full, 0u);
  EXPECT_GT((*collector)->batches_received(), 0u);
  EXPECT_LE(r->unacked_bytes, o.max_unacked_bytes + (1 << 20));  // + one batch
  const uint64_t bound = r->queue_capacity * r->event_bytes + r->max_unacked_bytes;
  EXPECT_LT(r->rss_peak - r->rss_before, bound + (48u << 20));
  EXPECT_GT(r->anon_peak, r->anon_before + r->queue_capacity * r->event_bytes / 2);
}

TEST(AgentMemoryTest, ResultLineRoundTrips) {
  AgentMemoryResult r;
  r.queue_capacity = 7;
  r.rss_peak = 123456789;
  r.lost_spool_full = 3;
  r.seconds = 1.5;
  absl::StatusOr<AgentMemoryResult> back = ParseResult("noise\n" + FormatResult(r) + "\nmore");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->queue_capacity, 7u);
  EXPECT_EQ(back->rss_peak, 123456789u);
  EXPECT_EQ(back->lost_spool_full, 3u);
  EXPECT_DOUBLE_EQ(back->seconds, 1.5);
  EXPECT_FALSE(ParseResult("nothing").ok());
}

}  // namespace
}  // namespace memtrace::bench
