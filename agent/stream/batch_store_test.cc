#include "agent/stream/batch_store.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/memtrace/v1/events.pb.h"

namespace memtrace {
namespace {

SealedBatch Batch(uint64_t first, uint64_t last, size_t bytes) {
  SealedBatch b;
  b.first_seq = first;
  b.last_seq = last;
  b.events = last - first + 1;
  v1::EventBatch proto;
  proto.set_count(static_cast<uint32_t>(last - first + 1));
  proto.set_first_seq(first);
  proto.set_base_ts_ns(static_cast<int64_t>(bytes));  // something to tell batches apart
  std::string s;
  proto.SerializeToString(&s);
  s.resize(std::max(s.size(), bytes));  // padding past the message is never parsed here
  b.bytes = std::make_shared<std::string>(s);
  return b;
}

TEST(MemoryBatchStoreTest, AcknowledgeForgetsCoveredBatchesOnly) {
  MemoryBatchStore store(1 << 20);
  std::vector<SealedBatch> dropped;
  store.Append(Batch(1, 10, 100), &dropped);
  store.Append(Batch(11, 20, 100), &dropped);
  store.Append(Batch(21, 30, 100), &dropped);
  EXPECT_EQ(store.bytes(), 300u);
  store.Acknowledge(15);  // inside the second batch: it stays
  EXPECT_EQ(store.batches(), 2u);
  EXPECT_EQ(store.NextAfter(0)->first_seq, 11u);
  store.Acknowledge(30);
  EXPECT_EQ(store.batches(), 0u);
  EXPECT_EQ(store.bytes(), 0u);
  EXPECT_TRUE(dropped.empty());
}

TEST(MemoryBatchStoreTest, NextAfterFindsTheOldestBatchEndingAboveSeq) {
  MemoryBatchStore store(1 << 20);
  std::vector<SealedBatch> dropped;
  store.Append(Batch(1, 10, 10), &dropped);
  store.Append(Batch(11, 20, 10), &dropped);
  EXPECT_EQ(store.NextAfter(0)->first_seq, 1u);
  EXPECT_EQ(store.NextAfter(9)->first_seq, 1u);
  EXPECT_EQ(store.NextAfter(10)->first_seq, 11u);
  EXPECT_FALSE(store.NextAfter(20).has_value());
}

TEST(MemoryBatchStoreTest, BytesAfterCountsTheBatchesBehindASeq) {
  MemoryBatchStore store(1 << 20);
  std::vector<SealedBatch> dropped;
  store.Append(Batch(1, 10, 10), &dropped);
  store.Append(Batch(11, 20, 20), &dropped);
  store.Append(Batch(21, 30, 40), &dropped);
  EXPECT_EQ(store.BytesAfter(0), 70u);
  EXPECT_EQ(store.BytesAfter(10), 60u);
  EXPECT_EQ(store.BytesAfter(20), 40u);
  EXPECT_EQ(store.BytesAfter(30), 0u);
}

TEST(MemoryBatchStoreTest, DropsTheOldestBeyondTheBoundButKeepsTheNewest) {
  MemoryBatchStore store(250);
  std::vector<SealedBatch> dropped;
  store.Append(Batch(1, 10, 100), &dropped);
  store.Append(Batch(11, 20, 100), &dropped);
  store.Append(Batch(21, 30, 100), &dropped);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].first_seq, 1u);
  EXPECT_EQ(store.bytes(), 200u);
  dropped.clear();
  store.Append(Batch(31, 40, 1000), &dropped);  // alone beyond the bound: kept anyway
  EXPECT_EQ(dropped.size(), 2u);
  EXPECT_EQ(store.batches(), 1u);
  EXPECT_EQ(store.NextAfter(0)->first_seq, 31u);
}

TEST(MemoryBatchStoreTest, AddStringsToOldestRewritesItsBytes) {
  MemoryBatchStore store(1 << 20);
  std::vector<SealedBatch> dropped;
  store.Append(Batch(1, 10, 0), &dropped);
  store.Append(Batch(11, 20, 0), &dropped);
  const uint64_t before = store.bytes();
  store.AddStringsToOldest({StringDef{7, StringKind::kTag, "fsdp:layers.3"}});
  EXPECT_GT(store.bytes(), before);
  std::optional<SealedBatch> oldest = store.NextAfter(0);
  ASSERT_TRUE(oldest.has_value());
  EXPECT_TRUE(oldest->has_strings);
  v1::EventBatch proto;
  ASSERT_TRUE(proto.ParseFromString(*oldest->bytes));
  ASSERT_EQ(proto.strings_size(), 1);
  EXPECT_EQ(proto.strings(0).id(), 7u);
  EXPECT_EQ(proto.strings(0).value(), "fsdp:layers.3");
  EXPECT_EQ(proto.first_seq(), 1u);
  v1::EventBatch second;
  ASSERT_TRUE(second.ParseFromString(*store.NextAfter(10)->bytes));
  EXPECT_EQ(second.strings_size(), 0);
}

}  // namespace
}  // namespace memtrace
