#include "proto/codec/batch_codec.h"

#include <vector>

#include "gtest/gtest.h"

namespace memtrace {
namespace {

std::vector<Event> SampleEvents() {
  std::vector<Event> events;
  uint64_t seq = 1;
  for (int i = 0; i < 100; ++i) {
    Event a;
    a.seq = seq++;
    a.ts_ns = 1'700'000'000'000'000'000 + i * 1000;
    a.kind = EventKind::kAlloc;
    a.address = 0x7f0000000000ull + i * 0x200000;
    a.bytes = 2 << 20;
    a.tag_id = i % 3;
    a.device = 1;
    a.memory_kind = kMemoryDevice;
    events.push_back(a);
    Event f = a;
    f.seq = seq++;
    f.kind = EventKind::kFree;
    f.ts_ns -= 10;  // timestamps may go backwards between records
    events.push_back(f);
  }
  return events;
}

TEST(BatchCodecTest, RoundTripsEventsStringsAndCounters) {
  std::vector<Event> events = SampleEvents();
  std::vector<StringDef> strings = {{1, StringKind::kTag, "fsdp:layers.0"},
                                    {2, StringKind::kSource, "libnccl.so.2"}};
  AgentCounterValues counters{200, 3, 4096, 1, 7};
  v1::EventBatch wire;
  EncodeBatch(events, strings, counters, &wire);
  absl::StatusOr<DecodedBatch> decoded = DecodeBatch(wire);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->events, events);
  EXPECT_EQ(decoded->strings, strings);
  EXPECT_EQ(decoded->counters.events_lost, 3u);
  EXPECT_EQ(decoded->counters.cupti_records_dropped, 7u);
}

TEST(BatchCodecTest, EncodesCompactlyAndOmitsDefaultColumns) {
  std::vector<Event> events = SampleEvents();
  v1::EventBatch wire;
  EncodeBatch(events, {}, {}, &wire);
  EXPECT_TRUE(wire.seq_delta().empty()) << "consecutive seqs need no column";
  EXPECT_TRUE(wire.aux().empty());
  EXPECT_TRUE(wire.stream().empty());
  // 200 events of 64 bytes in memory; on the wire about 12 bytes each (2 MiB sizes and
  // 2 MiB address strides dominate).
  EXPECT_LT(wire.ByteSizeLong(), 200u * 13);
}

TEST(BatchCodecTest, KeepsGapsInSequenceNumbers) {
  std::vector<Event> events = SampleEvents();
  events.resize(4);
  events[2].seq = 10;
  events[3].seq = 11;
  v1::EventBatch wire;
  EncodeBatch(events, {}, {}, &wire);
  absl::StatusOr<DecodedBatch> decoded = DecodeBatch(wire);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->events[2].seq, 10u);
  EXPECT_EQ(decoded->events[3].seq, 11u);
}

TEST(BatchCodecTest, RejectsNonMonotonicSequence) {
  v1::EventBatch wire;
  EncodeBatch(SampleEvents(), {}, {}, &wire);
  wire.clear_seq_delta();
  for (uint32_t i = 0; i < wire.count(); ++i) wire.add_seq_delta(i == 5 ? 0 : (i == 0 ? 0 : 1));
  absl::StatusOr<DecodedBatch> decoded = DecodeBatch(wire);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(decoded.status().message().find("not increasing"), std::string::npos);
}

TEST(BatchCodecTest, RejectsColumnLengthMismatch) {
  v1::EventBatch wire;
  EncodeBatch(SampleEvents(), {}, {}, &wire);
  wire.mutable_bytes()->RemoveLast();
  EXPECT_EQ(DecodeBatch(wire).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BatchCodecTest, RejectsUnknownKindZeroSeqAndBadStrings) {
  v1::EventBatch wire;
  EncodeBatch(SampleEvents(), {}, {}, &wire);
  v1::EventBatch bad_kind = wire;
  bad_kind.set_kind(3, 99);
  EXPECT_EQ(DecodeBatch(bad_kind).status().code(), absl::StatusCode::kInvalidArgument);
  v1::EventBatch zero_seq = wire;
  zero_seq.set_first_seq(0);
  EXPECT_EQ(DecodeBatch(zero_seq).status().code(), absl::StatusCode::kInvalidArgument);
  v1::EventBatch bad_string = wire;
  bad_string.add_strings()->set_id(0);
  EXPECT_EQ(DecodeBatch(bad_string).status().code(), absl::StatusCode::kInvalidArgument);
  v1::EventBatch long_string = wire;
  v1::StringEntry* s = long_string.add_strings();
  s->set_id(1);
  s->set_kind(v1::STRING_KIND_TAG);
  s->set_value(std::string(65536, 'x'));
  EXPECT_EQ(DecodeBatch(long_string).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BatchCodecTest, RejectsOversizedBatch) {
  v1::EventBatch wire;
  EncodeBatch(SampleEvents(), {}, {}, &wire);
  BatchLimits limits;
  limits.max_events = 10;
  EXPECT_EQ(DecodeBatch(wire, limits).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(BatchCodecTest, RejectsTimestampOverflow) {
  v1::EventBatch wire;
  EncodeBatch(SampleEvents(), {}, {}, &wire);
  wire.set_base_ts_ns(INT64_MAX - 5);
  EXPECT_EQ(DecodeBatch(wire).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace memtrace
