#include "proto/codec/batch_wire.h"

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "proto/codec/batch_codec.h"
#include "proto/memtrace/v1/events.pb.h"

namespace memtrace {
namespace {

// What the collector did before batch_wire: protobuf's parser, then DecodeBatch.
absl::StatusOr<DecodedBatch> Reference(const std::string& bytes, const BatchLimits& limits = {}) {
  v1::EventBatch batch;
  if (!batch.ParseFromString(bytes)) {
    return absl::InvalidArgumentError("not a valid memtrace.v1.EventBatch");
  }
  return DecodeBatch(batch, limits);
}

// Same result or the same error (for unparseable bytes: both say so).
void ExpectSameAsReference(const std::string& bytes, const BatchLimits& limits = {}) {
  absl::StatusOr<DecodedBatch> want = Reference(bytes, limits);
  absl::StatusOr<DecodedBatch> got = DecodeBatchWire(bytes, limits);
  ASSERT_EQ(got.ok(), want.ok()) << (got.ok() ? want.status() : got.status());
  if (!want.ok()) {
    EXPECT_EQ(got.status().code(), want.status().code());
    if (absl::StartsWith(want.status().message(), "not a valid")) {
      EXPECT_TRUE(absl::StartsWith(got.status().message(), "not a valid"))
          << got.status().message();
    } else {
      EXPECT_EQ(got.status().message(), want.status().message());
    }
    return;
  }
  EXPECT_EQ(got->events, want->events);
  EXPECT_EQ(got->strings, want->strings);
  EXPECT_EQ(got->counters.events_recorded, want->counters.events_recorded);
  EXPECT_EQ(got->counters.cupti_records_dropped, want->counters.cupti_records_dropped);
  EXPECT_EQ(got->clock, want->clock);
  EXPECT_EQ(got->time_horizon_ns, want->time_horizon_ns);
}

std::vector<Event> RandomEvents(std::mt19937_64& rng, int n, bool gaps) {
  std::vector<Event> events(n);
  uint64_t seq = 1 + rng() % 1000;
  int64_t ts = static_cast<int64_t>(rng() % (uint64_t{1} << 62)) - (int64_t{1} << 61);
  for (Event& e : events) {
    e.seq = seq;
    seq += gaps ? 1 + rng() % 3 : 1;
    e.ts_ns = ts;
    ts += static_cast<int64_t>(rng() % 2'000'000) - 1000;  // sometimes backwards
    e.kind = static_cast<EventKind>(1 + rng() % kMaxEventKind);
    e.address = rng() % 4 == 0 ? 0 : 0x7f0000000000 + (rng() % (1 << 30));
    e.bytes = rng() % 3 == 0 ? 0 : rng() >> (rng() % 64);
    e.aux = rng() % 5 == 0 ? rng() : 0;
    e.tag_id = rng() % 300;
    e.source_id = rng() % 2 == 0 ? 0 : rng() % 20;
    e.device = rng() % 8;
    e.stream = rng() % 2 == 0 ? 0 : static_cast<uint32_t>(rng());
    e.memory_kind = rng() % 4 == 0 ? 101 : 3;
  }
  return events;
}

std::vector<StringDef> SomeStrings() {
  return {{1, StringKind::kTag, "fsdp:layers.3"},
          {2, StringKind::kSource, "libnccl.so.2"},
          {3, StringKind::kPhase, ""},
          {4, StringKind::kTag, std::string(300, 'x')}};
}

std::string ViaProtobuf(absl::Span<const Event> events, absl::Span<const StringDef> strings,
                        const AgentCounterValues& counters) {
  v1::EventBatch batch;
  EncodeBatch(events, strings, counters, &batch);
  return batch.SerializeAsString();
}

TEST(BatchWireTest, WritesTheBytesProtobufWrites) {
  std::mt19937_64 rng(7);
  const AgentCounterValues counters{123, 4, 0, 2, 99};
  for (int round = 0; round < 200; ++round) {
    const int n = round < 3 ? round : 1 + static_cast<int>(rng() % 5000);
    const std::vector<Event> events = RandomEvents(rng, n, round % 2 == 1);
    const std::vector<StringDef> strings =
        round % 3 == 0 ? SomeStrings() : std::vector<StringDef>{};
    std::string wire;
    AppendBatchWire(events, strings, &counters, nullptr, &wire);
    ASSERT_EQ(wire, ViaProtobuf(events, strings, counters)) << "round " << round << " n " << n;
  }
}

TEST(BatchWireTest, WritesDefaultColumnsAsProtobufDoes) {
  // All-zero optional columns, consecutive sequence numbers, zero timestamps: only kind,
  // ts_delta and the header are written.
  std::vector<Event> events(100);
  for (size_t i = 0; i < events.size(); ++i) {
    events[i].seq = 1 + i;
    events[i].kind = EventKind::kStep;
  }
  const AgentCounterValues zero;
  std::string wire;
  AppendBatchWire(events, {}, &zero, nullptr, &wire);
  EXPECT_EQ(wire, ViaProtobuf(events, {}, zero));
}

TEST(BatchWireTest, CountersAndClockAppendedLaterEqualOneMessage) {
  std::mt19937_64 rng(3);
  const std::vector<Event> events = RandomEvents(rng, 1000, true);
  const AgentCounterValues counters{5, 6, 7, 8, 9};
  const ClockEstimate clock{-3'600'000'000'123, 45'000};
  std::string sealed;
  AppendBatchWire(events, SomeStrings(), nullptr, nullptr, &sealed);
  AppendCountersField(counters, &sealed);
  AppendClockField(clock, &sealed);

  v1::EventBatch expected;
  EncodeBatch(events, SomeStrings(), counters, &expected);
  expected.mutable_clock()->set_offset_ns(clock.offset_ns);
  expected.mutable_clock()->set_round_trip_ns(clock.round_trip_ns);
  EXPECT_EQ(sealed, expected.SerializeAsString());

  absl::StatusOr<DecodedBatch> decoded = DecodeBatchWire(sealed);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->events, events);
  EXPECT_EQ(decoded->strings, SomeStrings());
  EXPECT_EQ(decoded->counters.spool_bytes, 7u);
  ASSERT_TRUE(decoded->clock.has_value());
  EXPECT_EQ(*decoded->clock, clock);
}

TEST(BatchWireTest, DecodesWhatProtobufDecodes) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 100; ++round) {
    const std::vector<Event> events =
        RandomEvents(rng, 1 + static_cast<int>(rng() % 3000), round % 2 == 0);
    const AgentCounterValues counters{1, 2, 3, 4, 5};
    ExpectSameAsReference(ViaProtobuf(events, SomeStrings(), counters));
  }
}

// Shapes protobuf accepts that no memtrace writer produces go to protobuf itself.
TEST(BatchWireTest, NonCanonicalEncodingsDecodeAsProtobufDecodesThem) {
  std::mt19937_64 rng(5);
  const std::vector<Event> events = RandomEvents(rng, 50, true);
  const std::string canonical = ViaProtobuf(events, SomeStrings(), {1, 2, 3, 4, 5});
  v1::EventBatch batch;
  ASSERT_TRUE(batch.ParseFromString(canonical));

  // Unpacked columns: one varint field per value.
  {
    std::string unpacked;
    AppendVarint(1 << 3 | 0, &unpacked);
    AppendVarint(batch.count(), &unpacked);
    AppendVarint(2 << 3 | 0, &unpacked);
    AppendVarint(batch.first_seq(), &unpacked);
    for (uint32_t k : batch.kind()) {
      AppendVarint(4 << 3 | 0, &unpacked);
      AppendVarint(k, &unpacked);
    }
    for (uint64_t d : batch.seq_delta()) {
      AppendVarint(5 << 3 | 0, &unpacked);
      AppendVarint(d, &unpacked);
    }
    ExpectSameAsReference(unpacked);
  }
  // The same column twice (protobuf concatenates), fields in reverse order, unknown fields,
  // counters twice (merged), the count given twice (last wins).
  {
    v1::EventBatch first_half = batch;
    first_half.clear_strings();
    std::string twice = canonical + canonical;
    ExpectSameAsReference(twice);
    std::string reversed;
    v1::EventBatch parts[3];
    parts[0].mutable_counters()->set_events_lost(9);
    parts[1].mutable_kind()->CopyFrom(batch.kind());
    parts[1].mutable_ts_delta()->CopyFrom(batch.ts_delta());
    parts[2].set_count(batch.count());
    parts[2].set_first_seq(batch.first_seq());
    for (const v1::EventBatch& p : parts) reversed += p.SerializeAsString();
    ExpectSameAsReference(reversed);
    std::string unknown = canonical;
    AppendVarint(99 << 3 | 0, &unknown);
    AppendVarint(12345, &unknown);
    AppendVarint(100 << 3 | 2, &unknown);
    AppendVarint(3, &unknown);
    unknown += "abc";
    AppendVarint(101 << 3 | 5, &unknown);
    unknown += "abcd";
    AppendVarint(102 << 3 | 1, &unknown);
    unknown += "abcdefgh";
    ExpectSameAsReference(unknown);
    std::string counters_twice = canonical;
    AppendCountersField({0, 77, 0, 0, 0}, &counters_twice);
    ExpectSameAsReference(counters_twice);
    std::string count_twice = canonical;
    AppendVarint(1 << 3 | 0, &count_twice);
    AppendVarint(3, &count_twice);
    ExpectSameAsReference(count_twice);
  }
}

TEST(BatchWireTest, EveryTruncationAndByteChangeDecodesAsProtobufDecodes) {
  std::mt19937_64 rng(13);
  const std::vector<Event> events = RandomEvents(rng, 40, true);
  std::string bytes;
  const AgentCounterValues counters{1, 2, 3, 4, 5};
  const ClockEstimate clock{-12345, 678};
  AppendBatchWire(events, SomeStrings(), &counters, &clock, &bytes);
  for (size_t n = 0; n <= bytes.size(); ++n) ExpectSameAsReference(bytes.substr(0, n));
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int v : {0x00, 0x01, 0x7f, 0x80, 0xff}) {
      std::string mutated = bytes;
      mutated[i] = static_cast<char>(v);
      ExpectSameAsReference(mutated);
      BatchLimits tight;
      tight.max_events = 8;
      tight.max_strings = 2;
      tight.max_string_bytes = 8;
      ExpectSameAsReference(mutated, tight);
    }
  }
}

TEST(BatchWireTest, OverlongVarintsAreRefusedLikeProtobufRefusesThem) {
  // An 11-byte varint in a column, a 6-byte length, a 6-byte tag.
  std::string column;
  AppendVarint(1 << 3 | 0, &column);
  AppendVarint(1, &column);
  AppendVarint(2 << 3 | 0, &column);
  AppendVarint(1, &column);
  AppendVarint(4 << 3 | 2, &column);
  AppendVarint(11, &column);
  column += std::string(10, '\x81') + '\x01';
  ExpectSameAsReference(column);
  std::string length;
  AppendVarint(100 << 3 | 2, &length);
  length += std::string("\x83\x80\x80\x80\x80\x00", 6) + "abc";
  ExpectSameAsReference(length);
  std::string tag = std::string("\x88\x80\x80\x80\x80\x00", 6);
  AppendVarint(1, &tag);
  ExpectSameAsReference(tag);
  // A 10-byte varint whose last byte carries bits past 64: protobuf drops them.
  std::string high;
  AppendVarint(2 << 3 | 0, &high);
  high += std::string(9, '\xff') + '\x7f';
  ExpectSameAsReference(high);
}

// The columns are counted and read eight bytes at a time: varints of every length from 1 to 11
// bytes, canonical or padded with continuation bytes, starting at every offset of a word and
// ending near the column's end, must decode as protobuf decodes them (or be refused as it
// refuses them).
TEST(BatchWireTest, VarintsOfEveryLengthAtEveryOffsetDecodeAsProtobufDecodesThem) {
  std::mt19937_64 rng(29);
  auto random_varint = [&](int length, std::string* out) {
    for (int i = 0; i + 1 < length; ++i) out->push_back(static_cast<char>(0x80 | (rng() & 0x7f)));
    out->push_back(static_cast<char>(rng() & 0x7f));
  };
  for (int trial = 0; trial < 3000; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 24);
    std::string ts_column, bytes_column;
    for (int i = 0; i < n; ++i) {
      // Mostly valid lengths; now and then one too long.
      random_varint(rng() % 200 == 0 ? 11 : 1 + static_cast<int>(rng() % 10), &ts_column);
      random_varint(1 + static_cast<int>(rng() % 10), &bytes_column);
    }
    // Now and then a column one value short or long of the count.
    if (rng() % 20 == 0) random_varint(1 + static_cast<int>(rng() % 3), &bytes_column);
    std::string batch;
    AppendVarint(1 << 3 | 0, &batch);  // count
    AppendVarint(static_cast<uint64_t>(n), &batch);
    AppendVarint(2 << 3 | 0, &batch);  // first_seq
    AppendVarint(1, &batch);
    AppendVarint(4 << 3 | 2, &batch);  // kind: all allocations
    AppendVarint(static_cast<uint64_t>(n), &batch);
    batch += std::string(static_cast<size_t>(n), '\x01');
    AppendVarint(6 << 3 | 2, &batch);  // ts_delta
    AppendVarint(ts_column.size(), &batch);
    batch += ts_column;
    AppendVarint(8 << 3 | 2, &batch);  // bytes
    AppendVarint(bytes_column.size(), &batch);
    batch += bytes_column;
    ASSERT_NO_FATAL_FAILURE(ExpectSameAsReference(batch)) << "trial " << trial;
  }
}

TEST(BatchWireTest, ClockEstimatesAreValidated) {
  std::string bytes;
  std::vector<Event> events(1);
  events[0].seq = 1;
  events[0].kind = EventKind::kAlloc;
  const ClockEstimate negative_rtt{5, -1};
  AppendBatchWire(events, {}, nullptr, &negative_rtt, &bytes);
  absl::StatusOr<DecodedBatch> d = DecodeBatchWire(bytes);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("negative round trip"), std::string::npos);
  ExpectSameAsReference(bytes);
  bytes.clear();
  const ClockEstimate huge{int64_t{1} << 62, 10};
  AppendBatchWire(events, {}, nullptr, &huge, &bytes);
  ExpectSameAsReference(bytes);
  EXPECT_FALSE(DecodeBatchWire(bytes).ok());
}

TEST(BatchWireTest, EventsOnlyKeepsTheBatchesBytesAndReplacesItsSideFields) {
  std::mt19937_64 rng(21);
  const std::vector<Event> events = RandomEvents(rng, 3000, true);
  const AgentCounterValues counters{1, 2, 3, 4, 5};
  const ClockEstimate sent_clock{-42, 7};
  std::string received;
  AppendBatchWire(events, SomeStrings(), &counters, &sent_clock, &received);
  const ClockEstimate applied{-40, 9};
  // With the clock the collector applied, and without one.
  for (const ClockEstimate* clock : {&applied, static_cast<const ClockEstimate*>(nullptr)}) {
    std::string kept;
    ASSERT_TRUE(AppendEventsOnly(received, clock, &kept));
    std::string encoded;
    AppendBatchWire(events, {}, nullptr, clock, &encoded);
    EXPECT_EQ(kept, encoded) << (clock != nullptr ? "with" : "without") << " a clock";
  }
  // Not the canonical shape (a column split in two): the caller encodes instead.
  std::string odd = received + received;
  std::string untouched = "x";
  EXPECT_FALSE(AppendEventsOnly(odd, nullptr, &untouched));
  EXPECT_EQ(untouched, "x");
  EXPECT_FALSE(AppendEventsOnly("\xff", nullptr, &untouched));
}

// Column by column, the error reported must still be the one the row-by-row validator finds
// first: the lowest event index, and at one index kind, then sequence, then timestamp.
TEST(BatchWireTest, TheFirstInvalidEventIsReportedWhicheverColumnItIsIn) {
  std::mt19937_64 rng(3);
  const std::vector<Event> events = RandomEvents(rng, 20, true);
  v1::EventBatch base;
  EncodeBatch(events, {}, {}, &base);
  struct Case {
    const char* name;
    std::function<void(v1::EventBatch&)> spoil;
    const char* want;
  };
  const std::vector<Case> cases = {
      {"kind at 9, timestamp at 4",
       [](v1::EventBatch& b) {
         b.set_kind(9, 77);
         b.set_ts_delta(4, INT64_MAX);
         b.set_base_ts_ns(1);
       },
       "timestamp overflow at event 4"},
      {"kind and repeated seq at 6",
       [](v1::EventBatch& b) {
         b.set_kind(6, 0);
         b.set_seq_delta(6, 0);
       },
       "event 6 has unknown kind 0"},
      {"repeated seq at 3, kind at 7",
       [](v1::EventBatch& b) {
         b.set_seq_delta(3, 0);
         b.set_kind(7, 99);
       },
       "sequence numbers not increasing within batch: event 3 repeats seq"},
      {"seq overflow at 2, timestamp at 2",
       [](v1::EventBatch& b) {
         b.set_seq_delta(2, UINT64_MAX);
         b.set_ts_delta(2, INT64_MAX);
         b.set_base_ts_ns(1);
       },
       "sequence number overflow at event 2"},
  };
  for (const Case& c : cases) {
    v1::EventBatch b = base;
    c.spoil(b);
    const std::string bytes = b.SerializeAsString();
    absl::StatusOr<DecodedBatch> got = DecodeBatchWire(bytes);
    ASSERT_FALSE(got.ok()) << c.name;
    EXPECT_TRUE(absl::StartsWith(got.status().message(), c.want))
        << c.name << ": " << got.status().message();
    ExpectSameAsReference(bytes);
  }
}

// The prefix is the whole decode cut before the first event past the cutoff, by sequence number
// or by timestamp (which may go backwards: the first one past it ends the prefix).
TEST(BatchWireTest, APrefixIsTheWholeDecodeCutAtTheFirstEventPastTheCutoff) {
  std::mt19937_64 rng(17);
  for (int round = 0; round < 60; ++round) {
    const std::vector<Event> events =
        RandomEvents(rng, 1 + static_cast<int>(rng() % 2000), round % 2 == 0);
    std::string bytes = ViaProtobuf(events, SomeStrings(), {1, 2, 3, 4, 5});
    if (round % 3 == 0) {  // an unknown field: protobuf decodes it, then it is cut
      AppendVarint(99 << 3 | 0, &bytes);
      AppendVarint(7, &bytes);
    }
    absl::StatusOr<DecodedBatch> whole = DecodeBatchWire(bytes);
    ASSERT_TRUE(whole.ok()) << whole.status();
    const Event& pivot = events[rng() % events.size()];
    DecodeCutoff cutoff;
    if (round % 5 == 4) {
      // the default cutoff: every event
    } else if (round % 2 == 0) {
      cutoff.last_seq = pivot.seq - (rng() % 2);  // sometimes between two events' seqs
    } else {
      cutoff.max_ts_ns = pivot.ts_ns;
    }
    std::vector<Event> want;
    for (const Event& e : whole->events) {
      if (e.seq > cutoff.last_seq || e.ts_ns > cutoff.max_ts_ns) break;
      want.push_back(e);
    }
    DecodedBatch got;
    bool stopped = false;
    ASSERT_TRUE(DecodeBatchWirePrefix(bytes, BatchLimits(), cutoff, &got, &stopped).ok())
        << round;
    EXPECT_EQ(got.events, want) << round;
    EXPECT_EQ(stopped, want.size() < events.size()) << round;
    EXPECT_EQ(got.strings, whole->strings);
    EXPECT_EQ(got.counters.events_lost, whole->counters.events_lost);
    EXPECT_EQ(got.clock, whole->clock);
  }
}

TEST(BatchWireTest, TheStoresTimeHorizonIsReadAsProtobufReadsItAndAnAgentsIsNotKept) {
  std::mt19937_64 rng(23);
  const std::vector<Event> events = RandomEvents(rng, 200, true);
  const ClockEstimate clock{-42, 7};
  std::string block;
  AppendBatchWire(events, {}, nullptr, &clock, &block);
  EXPECT_EQ(DecodeBatchWire(block)->time_horizon_ns, kNoTimeHorizon);
  std::string with_horizon = block;
  AppendTimeHorizonField(int64_t{1} << 62, &with_horizon);
  EXPECT_EQ(DecodeBatchWire(with_horizon)->time_horizon_ns, int64_t{1} << 62);
  ExpectSameAsReference(with_horizon);
  // Twice: the last one, as protobuf reads a scalar; and a negative one.
  std::string twice = with_horizon;
  AppendTimeHorizonField(-5, &twice);
  EXPECT_EQ(DecodeBatchWire(twice)->time_horizon_ns, -5);
  ExpectSameAsReference(twice);
  // None is written as none.
  std::string none = block;
  AppendTimeHorizonField(kNoTimeHorizon, &none);
  EXPECT_EQ(none, block);
  // What an agent sends in the field is not the store's: the store's block drops it.
  std::string kept;
  ASSERT_TRUE(AppendEventsOnly(with_horizon, &clock, &kept));
  EXPECT_EQ(kept, block);
}

TEST(BatchWireTest, APrefixDoesNotStopAtATimestampPastTheHorizon) {
  std::vector<Event> events;
  for (uint64_t seq = 1; seq <= 10; ++seq) {
    Event e;
    e.seq = seq;
    e.kind = EventKind::kAlloc;
    e.ts_ns = static_cast<int64_t>(seq) * 1000;
    events.push_back(e);
  }
  events[4].ts_ns = 1'000'000;  // past the horizon below: no time
  std::string bytes;
  AppendBatchWire(events, {}, nullptr, nullptr, &bytes);
  DecodeCutoff cutoff;
  cutoff.max_ts_ns = 7000;
  DecodedBatch got;
  bool stopped = false;
  ASSERT_TRUE(DecodeBatchWirePrefix(bytes, BatchLimits(), cutoff, &got, &stopped).ok());
  EXPECT_EQ(got.events.size(), 4u) << "without a horizon, every timestamp is a time";
  AppendTimeHorizonField(500'000, &bytes);
  ASSERT_TRUE(DecodeBatchWirePrefix(bytes, BatchLimits(), cutoff, &got, &stopped).ok());
  EXPECT_EQ(got.events.size(), 7u);
  EXPECT_TRUE(stopped);
  EXPECT_EQ(got.time_horizon_ns, 500'000);
}

TEST(BatchWireTest, APrefixReportsAnInvalidEventBeforeTheCutoffAndNeedNotReadPastIt) {
  std::mt19937_64 rng(19);
  const std::vector<Event> events = RandomEvents(rng, 40, false);
  v1::EventBatch b;
  EncodeBatch(events, {}, {}, &b);
  b.set_kind(30, 99);
  const std::string bytes = b.SerializeAsString();
  DecodedBatch got;
  bool stopped = false;
  DecodeCutoff before;
  before.last_seq = events[28].seq;  // event 29 ends the prefix; event 30 is not read
  ASSERT_TRUE(DecodeBatchWirePrefix(bytes, BatchLimits(), before, &got, &stopped).ok());
  EXPECT_TRUE(stopped);
  EXPECT_EQ(got.events, std::vector<Event>(events.begin(), events.begin() + 29));
  DecodeCutoff after;
  after.last_seq = events[31].seq;
  absl::Status s = DecodeBatchWirePrefix(bytes, BatchLimits(), after, &got, &stopped);
  EXPECT_EQ(s.message(), "event 30 has unknown kind 99");
}

}  // namespace
}  // namespace memtrace
