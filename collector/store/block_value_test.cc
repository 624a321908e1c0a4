#include "collector/store/block_value.h"

#include <string>

#include "gtest/gtest.h"

namespace memtrace::collector {
namespace {

TEST(BlockValueTest, CompressedBlocksComeBackAsTheirBytes) {
  std::string batch;
  for (int i = 0; i < 5000; ++i) batch += static_cast<char>(8 + i % 7);  // columnar-like
  std::string compressed;
  const std::string stored(CompressBlock(batch, &compressed));
  EXPECT_EQ(stored[0], '\0');
  EXPECT_LT(stored.size(), batch.size() / 4);
  std::string scratch;
  absl::StatusOr<absl::string_view> back = BlockBatchBytes(stored, &scratch);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, batch);
  // The empty batch too.
  back = BlockBatchBytes(CompressBlock("", &compressed), &scratch);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, "");
}

// One scratch for blocks of every size, as the store uses it: each value is the block's alone,
// whatever a larger block before it left in the scratch.
TEST(BlockValueTest, AScratchReusedForBlocksOfAnySizeGivesEachItsOwnValue) {
  std::string compressed;
  std::string scratch;
  for (int n : {70000, 10, 0, 5000, 200000, 3}) {
    std::string batch;
    for (int i = 0; i < n; ++i) batch += static_cast<char>((i * 7919) % 251);
    const absl::string_view stored = CompressBlock(batch, &compressed);
    std::string fresh;
    EXPECT_EQ(stored, CompressBlock(batch, &fresh)) << n;  // the same bytes as a new scratch
    absl::StatusOr<absl::string_view> back = BlockBatchBytes(stored, &scratch);
    ASSERT_TRUE(back.ok()) << n << ": " << back.status();
    EXPECT_EQ(*back, batch) << n;
  }
}

TEST(BlockValueTest, BlocksStoredUncompressedByOlderCollectorsReadAsTheyAre) {
  const std::string legacy = "\x08\x03\x10\x01 and the rest of an EventBatch";
  std::string scratch;
  absl::StatusOr<absl::string_view> back = BlockBatchBytes(legacy, &scratch);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, legacy);
  EXPECT_EQ(back->data(), legacy.data());  // no copy
}

TEST(BlockValueTest, DamagedValuesAreDataLoss) {
  std::string batch(3000, 'x');
  std::string compressed;
  const std::string stored(CompressBlock(batch, &compressed));
  std::string scratch;
  for (size_t cut : {size_t{1}, size_t{2}, stored.size() / 2, stored.size() - 1}) {
    EXPECT_EQ(BlockBatchBytes(stored.substr(0, cut), &scratch).status().code(),
              absl::StatusCode::kDataLoss)
        << cut;
  }
  std::string flipped = stored;
  flipped[1] = '\x01';  // claims 1 byte
  EXPECT_EQ(BlockBatchBytes(flipped, &scratch).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(BlockBatchBytes(std::string("\0\xff\xff\xff\xff\x7f", 6), &scratch).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace memtrace::collector
