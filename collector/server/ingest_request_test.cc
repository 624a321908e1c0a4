#include "collector/server/ingest_request.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/codec/batch_wire.h"

namespace memtrace::collector {
namespace {

grpc::ByteBuffer Buffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// Two slices, as gRPC delivers a message that arrived in pieces.
grpc::ByteBuffer SplitBuffer(const std::string& bytes) {
  grpc::Slice parts[2] = {grpc::Slice(bytes.substr(0, bytes.size() / 2)),
                          grpc::Slice(bytes.substr(bytes.size() / 2))};
  return grpc::ByteBuffer(parts, 2);
}

std::vector<Event> Events(int n) {
  std::vector<Event> events(n);
  for (int i = 0; i < n; ++i) {
    events[i].seq = 1 + i;
    events[i].ts_ns = 1000 + i;
    events[i].kind = i % 2 ? EventKind::kFree : EventKind::kAlloc;
    events[i].address = 0x1000 * (1 + i / 2);
    events[i].bytes = 4096;
  }
  return events;
}

TEST(IngestMessageTest, ReadsABatchAsProtobufWouldAndDecodesIt) {
  v1::IngestRequest request;
  const AgentCounterValues counters{3, 0, 0, 0, 0};
  EncodeBatch(Events(100), {{1, StringKind::kTag, "t"}}, counters, request.mutable_batch());
  const std::string bytes = request.SerializeAsString();
  for (const grpc::ByteBuffer& buffer : {Buffer(bytes), SplitBuffer(bytes)}) {
    IngestMessage m;
    ASSERT_TRUE(m.Read(buffer));
    ASSERT_EQ(m.body(), IngestMessage::Body::kBatch);
    DecodedBatch d;
    absl::Status s = m.DecodeBatch(BatchLimits(), &d);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(d.events, Events(100));
    EXPECT_EQ(d.strings.size(), 1u);
    EXPECT_EQ(d.counters.events_recorded, 3u);
  }
}

TEST(IngestMessageTest, ReadsAHello) {
  v1::IngestRequest request;
  request.mutable_hello()->mutable_identity()->set_job_id("j");
  IngestMessage m;
  ASSERT_TRUE(m.Read(Buffer(request.SerializeAsString())));
  EXPECT_EQ(m.body(), IngestMessage::Body::kHello);
  EXPECT_EQ(m.hello().identity().job_id(), "j");
}

TEST(IngestMessageTest, OtherShapesGoThroughProtobuf) {
  // A Hello followed by a batch: the oneof keeps the last one.
  v1::IngestRequest hello;
  hello.mutable_hello()->mutable_identity()->set_job_id("j");
  v1::IngestRequest batch;
  EncodeBatch(Events(4), {}, {}, batch.mutable_batch());
  IngestMessage m;
  ASSERT_TRUE(m.Read(Buffer(hello.SerializeAsString() + batch.SerializeAsString())));
  ASSERT_EQ(m.body(), IngestMessage::Body::kBatch);
  DecodedBatch d;
  absl::Status st = m.DecodeBatch(BatchLimits(), &d);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(d.events, Events(4));
  // Nothing but an unknown field: a message with no body.
  std::string unknown;
  AppendVarint(9 << 3 | 0, &unknown);
  AppendVarint(1, &unknown);
  ASSERT_TRUE(m.Read(Buffer(unknown)));
  EXPECT_EQ(m.body(), IngestMessage::Body::kNone);
  // The empty message.
  ASSERT_TRUE(m.Read(Buffer("")));
  EXPECT_EQ(m.body(), IngestMessage::Body::kNone);
}

TEST(IngestMessageTest, GarbageIsNotAnIngestRequestAndABadBatchSaysSo) {
  IngestMessage m;
  EXPECT_FALSE(m.Read(Buffer("\xff\xff\xff")));
  v1::IngestRequest hello;
  hello.mutable_hello()->mutable_identity()->set_job_id("j");
  const std::string h = hello.SerializeAsString();
  EXPECT_FALSE(m.Read(Buffer(h.substr(0, h.size() - 1))));  // truncated
  // A well-framed batch field whose bytes are not an EventBatch: read, then refused on decode.
  std::string framed;
  AppendVarint(2 << 3 | 2, &framed);
  AppendVarint(2, &framed);
  framed += "\x0f\x0f";
  ASSERT_TRUE(m.Read(Buffer(framed)));
  ASSERT_EQ(m.body(), IngestMessage::Body::kBatch);
  DecodedBatch d;
  EXPECT_FALSE(m.DecodeBatch(BatchLimits(), &d).ok());
  EXPECT_FALSE(m.batch_parses());
  // A batch that parses but breaks a rule: refused with the rule, and it does parse.
  v1::IngestRequest bad;
  EncodeBatch(Events(4), {}, {}, bad.mutable_batch());
  bad.mutable_batch()->set_kind(2, 99);
  ASSERT_TRUE(m.Read(Buffer(bad.SerializeAsString())));
  EXPECT_EQ(m.DecodeBatch(BatchLimits(), &d).message(), "event 2 has unknown kind 99");
  EXPECT_TRUE(m.batch_parses());
}

}  // namespace
}  // namespace memtrace::collector
