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
  store.Append(Batch(1, 10, 100), 0, &dropped);
  store.Append(Batch(11, 20, 100), 0, &dropped);
  store.Append(Batch(21, 30, 100), 0, &dropped);
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
  store.Append(Batch(1, 10, 10), 0, &dropped);
  store.Append(Batch(11, 20, 10), 0, &dropped);
  EXPECT_EQ(store.NextAfter(0)->first_seq, 1u);
  EXPECT_EQ(store.NextAfter(9)->first_seq, 1u);
  EXPECT_EQ(store.NextAfter(10)->first_seq, 11u);
  EXPECT_FALSE(store.NextAfter(20).has_value());
}

TEST(MemoryBatchStoreTest, BytesAfterCountsTheBatchesBehindASeq) {
  MemoryBatchStore store(1 << 20);
  std::vector<SealedBatch> dropped;
  store.Append(Batch(1, 10, 10), 0, &dropped);
  store.Append(Batch(11, 20, 20), 0, &dropped);
  store.Append(Batch(21, 30, 40), 0, &dropped);
  EXPECT_EQ(store.BytesAfter(0), 70u);
  EXPECT_EQ(store.BytesAfter(10), 60u);
  EXPECT_EQ(store.BytesAfter(20), 40u);
  EXPECT_EQ(store.BytesAfter(30), 0u);
}

TEST(MemoryBatchStoreTest, DropsTheOldestBeyondTheBoundButKeepsTheNewest) {
  MemoryBatchStore store(250);
  std::vector<SealedBatch> dropped;
  store.Append(Batch(1, 10, 100), 0, &dropped);
  store.Append(Batch(11, 20, 100), 0, &dropped);
  store.Append(Batch(21, 30, 100), 0, &dropped);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].first_seq, 1u);
  EXPECT_EQ(store.bytes(), 200u);
  dropped.clear();
  store.Append(Batch(31, 40, 1000), 0, &dropped);  // alone beyond the bound: kept anyway
  EXPECT_EQ(dropped.size(), 2u);
  EXPECT_EQ(store.batches(), 1u);
  EXPECT_EQ(store.NextAfter(0)->first_seq, 31u);
}

TEST(MemoryBatchStoreTest, AddStringsAfterRewritesTheFirstBatchAfterTheSeq) {
  MemoryBatchStore store(1 << 20);
  std::vector<SealedBatch> dropped;
  store.Append(Batch(1, 10, 0), 0, &dropped);
  store.Append(Batch(11, 20, 0), 0, &dropped);
  const uint64_t before = store.bytes();
  store.AddStringsAfter(0, {StringDef{7, StringKind::kTag, "fsdp:layers.3"}});
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

TEST(MemoryBatchStoreTest, BatchesThatMayBeStoredAlreadyAreDroppedLast) {
  // Batches 1-10 and 11-20 are on the wire (keep_through 20): the bound drops 21-30 and 31-40
  // first, then, with nothing else left, the oldest.
  MemoryBatchStore store(300);
  std::vector<SealedBatch> dropped;
  for (uint64_t i = 0; i < 3; ++i) store.Append(Batch(1 + 10 * i, 10 + 10 * i, 100), 20, &dropped);
  EXPECT_TRUE(dropped.empty());
  store.Append(Batch(31, 40, 100), 20, &dropped);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].first_seq, 21u);
  store.Append(Batch(41, 50, 100), 20, &dropped);
  ASSERT_EQ(dropped.size(), 2u);
  EXPECT_EQ(dropped[1].first_seq, 31u);
  store.Append(Batch(51, 60, 200), 20, &dropped);  // only the two on the wire are left to drop
  ASSERT_EQ(dropped.size(), 4u);
  EXPECT_EQ(dropped[2].first_seq, 41u);
  EXPECT_EQ(dropped[3].first_seq, 1u);
  EXPECT_EQ(store.NextAfter(0)->first_seq, 11u);
  EXPECT_EQ(store.NextAfter(20)->first_seq, 51u);
  EXPECT_EQ(store.bytes(), 300u);
}

TEST(MemoryBatchStoreTest, AddStringsAfterSkipsTheBatchesBeforeTheSeq) {
  MemoryBatchStore store(1 << 20);
  std::vector<SealedBatch> dropped;
  for (uint64_t i = 0; i < 3; ++i) store.Append(Batch(1 + 10 * i, 10 + 10 * i, 0), 0, &dropped);
  store.AddStringsAfter(15, {StringDef{7, StringKind::kTag, "fsdp:layers.3"}});
  v1::EventBatch first, third;
  ASSERT_TRUE(first.ParseFromString(*store.NextAfter(0)->bytes));
  ASSERT_TRUE(third.ParseFromString(*store.NextAfter(20)->bytes));
  EXPECT_EQ(first.strings_size(), 0);
  ASSERT_EQ(third.strings_size(), 1);
  EXPECT_EQ(third.strings(0).id(), 7u);
  EXPECT_FALSE(store.NextAfter(10)->has_strings);
  store.AddStringsAfter(30, {StringDef{8, StringKind::kTag, "none after 30"}});  // no-op
  EXPECT_EQ(store.batches(), 3u);
}

TEST(WithStringDefsTest, AddsEachIdOnceAndNoneTheBatchAlreadyDefines) {
  v1::EventBatch proto;
  proto.set_first_seq(1);
  v1::StringEntry* own = proto.add_strings();
  own->set_id(3);
  own->set_value("fsdp:layers.0");
  const std::string bytes = proto.SerializeAsString();
  const std::vector<StringDef> defs = {{3, StringKind::kTag, "fsdp:layers.0"},
                                       {7, StringKind::kTag, "optimizer.state"},
                                       {7, StringKind::kTag, "optimizer.state"}};
  std::shared_ptr<std::string> out = WithStringDefs(bytes, defs);
  ASSERT_NE(out, nullptr);
  v1::EventBatch merged;
  ASSERT_TRUE(merged.ParseFromString(*out));
  ASSERT_EQ(merged.strings_size(), 2);
  EXPECT_EQ(merged.strings(0).id(), 3u);
  EXPECT_EQ(merged.strings(1).id(), 7u);
  EXPECT_EQ(merged.strings(1).value(), "optimizer.state");
  // Nothing new: nothing to rewrite.
  EXPECT_EQ(WithStringDefs(*out, defs), nullptr);
  EXPECT_EQ(WithStringDefs("\xff not a batch", defs), nullptr);
}

TEST(WithStringDefsTest, StopsAtTheCollectorsPerBatchBound) {
  std::vector<StringDef> defs;
  for (uint32_t id = 1; id <= kMaxStringsPerBatch + 100; ++id) {
    defs.push_back({id, StringKind::kTag, "tag"});
  }
  std::shared_ptr<std::string> out = WithStringDefs(v1::EventBatch().SerializeAsString(), defs);
  ASSERT_NE(out, nullptr);
  v1::EventBatch merged;
  ASSERT_TRUE(merged.ParseFromString(*out));
  EXPECT_EQ(merged.strings_size(), static_cast<int>(kMaxStringsPerBatch));
}

TEST(WithStringDefsTest, StopsAtTheAgentsBoundOnStringBytes) {
  // Long sources (MEMTRACE_STACKS=1 stacks of up to 4000 B): 300 of them are 1.2 MB.
  std::vector<StringDef> defs;
  for (uint32_t id = 1; id <= 300; ++id) {
    defs.push_back({id, StringKind::kSource, std::string(4000, 'a' + id % 26)});
  }
  std::shared_ptr<std::string> out = WithStringDefs(v1::EventBatch().SerializeAsString(), defs);
  ASSERT_NE(out, nullptr);
  v1::EventBatch merged;
  ASSERT_TRUE(merged.ParseFromString(*out));
  size_t bytes = 0;
  for (const v1::StringEntry& e : merged.strings()) bytes += e.value().size();
  EXPECT_LE(bytes, kMaxStringBytesPerBatch);
  EXPECT_EQ(merged.strings_size(), static_cast<int>(kMaxStringBytesPerBatch / 4000));
}

TEST(MemoryBatchStoreTest, TheOldestBatchInheritsEachDroppedDefinitionOnce) {
  // As the Transport does in an outage: every new batch carries the definition again, every
  // dropped batch passes its definitions to the oldest kept one.
  MemoryBatchStore store(3 * Batch(1, 10, 0).bytes->size());
  const StringDef tag{7, StringKind::kTag, "optimizer.state"};
  std::vector<SealedBatch> dropped;
  for (uint64_t i = 0; i < 6000; ++i) {
    SealedBatch b = Batch(1 + 10 * i, 10 + 10 * i, 0);
    v1::EventBatch proto;
    ASSERT_TRUE(proto.ParseFromString(*b.bytes));
    v1::StringEntry* entry = proto.add_strings();
    entry->set_id(tag.id);
    entry->set_value(tag.value);
    b.bytes = std::make_shared<std::string>(proto.SerializeAsString());
    b.has_strings = true;
    dropped.clear();
    store.Append(std::move(b), 0, &dropped);
    std::vector<StringDef> inherited;
    uint64_t first_dropped_end = UINT64_MAX;
    for (const SealedBatch& d : dropped) {
      first_dropped_end = std::min(first_dropped_end, d.last_seq);
      v1::EventBatch gone;
      ASSERT_TRUE(gone.ParseFromString(*d.bytes));
      for (const v1::StringEntry& s : gone.strings()) {
        inherited.push_back({s.id(), StringKind::kTag, s.value()});
      }
    }
    store.AddStringsAfter(first_dropped_end, inherited);
  }
  v1::EventBatch oldest;
  ASSERT_TRUE(oldest.ParseFromString(*store.NextAfter(0)->bytes));
  EXPECT_EQ(oldest.strings_size(), 1);
}

}  // namespace
}  // namespace memtrace
