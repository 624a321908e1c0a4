// EventReader over a real loopback collector: every stored event comes back in order, and one
// stamped past its batch's time horizon at the time the rollups take it at.
#include "query/export/event_reader.h"

#include <chrono>
#include <utility>
#include <vector>

#include "collector/server/server_test_util.h"
#include "gtest/gtest.h"
#include "proto/codec/batch_codec.h"

namespace memtrace::exporter {
namespace {

using collector::testing::Events;
using collector::testing::kBaseTs;

int64_t Ts(uint64_t seq) { return kBaseTs + static_cast<int64_t>(seq) * 1'000'000; }

// Events first..first+count-1 of testing::Events, with `seq`'s timestamp set to `ts_ns`.
v1::IngestRequest BatchWith(uint64_t first, uint64_t count, uint64_t seq, int64_t ts_ns) {
  std::vector<Event> events = Events(first, count);
  for (Event& e : events) {
    if (e.seq == seq) e.ts_ns = ts_ns;
  }
  v1::IngestRequest r;
  AgentCounterValues counters;
  counters.events_recorded = first + count - 1;
  EncodeBatch(events, {{1, StringKind::kTag, "model.layers"}}, counters, r.mutable_batch());
  return r;
}

TEST(EventReaderTest, AnEventStampedPastItsHorizonComesAtTheTimeOfTheOneBefore) {
  std::unique_ptr<collector::CollectorServer> server =
      collector::testing::StartCollector("event_reader_future");
  ASSERT_NE(server, nullptr);
  constexpr int64_t kYear2200 = int64_t{7'258'118'400} * 1'000'000'000;
  {
    auto ingest = v1::Ingest::NewStub(collector::testing::Connect(*server));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto stream = ingest->Stream(&ctx);
    v1::IngestAck ack;
    ASSERT_TRUE(stream->Write(
                    collector::testing::HelloRequest(collector::testing::Identity("future", 0))) &&
                stream->Read(&ack));
    // Event 11 opens the second block: what it is held at comes from the block before.
    ASSERT_TRUE(stream->Write(BatchWith(1, 10, 0, 0)) && stream->Read(&ack));
    ASSERT_TRUE(stream->Write(BatchWith(11, 10, 11, kYear2200)) && stream->Read(&ack));
    ASSERT_TRUE(stream->Write(BatchWith(21, 10, 25, kYear2200)) && stream->Read(&ack));
    stream->WritesDone();
    ASSERT_TRUE(stream->Finish().ok());
  }
  absl::StatusOr<EventReader> reader = EventReader::Create(server->address(), absl::Seconds(10));
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<std::pair<uint64_t, int64_t>> seen;
  absl::Status read = reader->ForEach(
      "future", 0, 0, [&seen](const Event& e) { seen.emplace_back(e.seq, e.ts_ns); });
  ASSERT_TRUE(read.ok()) << read;
  ASSERT_EQ(seen.size(), 30u);
  for (size_t i = 0; i < seen.size(); ++i) {
    const uint64_t seq = i + 1;
    EXPECT_EQ(seen[i].first, seq);
    const int64_t expected = seq == 11 ? Ts(10) : seq == 25 ? Ts(24) : Ts(seq);
    EXPECT_EQ(seen[i].second, expected) << "seq " << seq;
  }
}

}  // namespace
}  // namespace memtrace::exporter
