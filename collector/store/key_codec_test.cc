#include "collector/store/key_codec.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace memtrace::collector {
namespace {

TEST(KeyCodecTest, BlockKeyRoundTripsAndIsTwentyBytes) {
  const StreamKey s{7, 3, 2};
  const std::string key = BlockKey(s, 0x0102030405060708ull);
  ASSERT_EQ(key.size(), kBlockKeyBytes);
  absl::StatusOr<BlockKeyParts> parts = DecodeBlockKey(key);
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(parts->stream, s);
  EXPECT_EQ(parts->first_seq, 0x0102030405060708ull);
  // Big-endian: the job number comes first, most significant byte first.
  EXPECT_EQ(key.substr(0, 4), std::string("\0\0\0\x07", 4));
}

TEST(KeyCodecTest, BlockKeysOfOneStreamSortBySequence) {
  const StreamKey s{1, 2, 0};
  std::vector<uint64_t> seqs = {1, 255, 256, 65536, 1ull << 40, 3};
  std::vector<std::string> keys;
  for (uint64_t q : seqs) keys.push_back(BlockKey(s, q));
  std::sort(keys.begin(), keys.end());
  std::sort(seqs.begin(), seqs.end());
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(DecodeBlockKey(keys[i])->first_seq, seqs[i]);
}

TEST(KeyCodecTest, StreamsSortByJobThenRankThenAttempt) {
  std::vector<StreamKey> streams = {{2, 0, 0}, {1, 256, 0}, {1, 1, 5}, {1, 1, 0}, {0, 9, 9}};
  std::vector<std::string> keys;
  for (const StreamKey& s : streams) keys.push_back(BlockKey(s, 1));
  std::sort(keys.begin(), keys.end());
  std::sort(streams.begin(), streams.end());
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(DecodeBlockKey(keys[i])->stream, streams[i]);
}

TEST(KeyCodecTest, RollupKeysOrderNegativeBeforePositive) {
  const StreamKey s{1, 0, 0};
  std::vector<int64_t> values = {5, -1, 0, std::numeric_limits<int64_t>::min(),
                                 std::numeric_limits<int64_t>::max(), -300, 1};
  std::vector<std::string> keys;
  for (int64_t v : values) keys.push_back(RollupKey(s, RollupAxis::kTime, v));
  std::sort(keys.begin(), keys.end());
  std::sort(values.begin(), values.end());
  for (size_t i = 0; i < keys.size(); ++i) {
    absl::StatusOr<RollupKeyParts> parts = DecodeRollupKey(keys[i]);
    ASSERT_TRUE(parts.ok()) << parts.status();
    EXPECT_EQ(parts->key, values[i]);
    EXPECT_EQ(parts->axis, RollupAxis::kTime);
    EXPECT_EQ(parts->stream, s);
  }
}

TEST(KeyCodecTest, RollupAxesAreSeparateRanges) {
  const StreamKey s{1, 0, 0};
  // Every step row sorts before every time row, so a prefix scan of one axis never sees the other.
  EXPECT_LT(RollupKey(s, RollupAxis::kStep, std::numeric_limits<int64_t>::max()),
            RollupKey(s, RollupAxis::kTime, std::numeric_limits<int64_t>::min()));
  EXPECT_EQ(RollupKey(s, RollupAxis::kStep, 4).substr(0, 13), RollupPrefix(s, RollupAxis::kStep));
}

TEST(KeyCodecTest, DecodersRejectWrongLengths) {
  const std::string block = BlockKey({1, 2, 3}, 4);
  EXPECT_EQ(DecodeBlockKey(block.substr(0, 19)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(DecodeBlockKey(block + "x").ok());
  EXPECT_FALSE(DecodeBlockKey("").ok());
  EXPECT_FALSE(DecodeRollupKey(block).ok());
  EXPECT_FALSE(DecodeCheckpointKey(block.substr(1)).ok());
  EXPECT_FALSE(DecodeU32("abc").ok());
  EXPECT_FALSE(DecodeU64("abcdefg").ok());
  EXPECT_FALSE(DecodeOrderedI64("").ok());
  EXPECT_FALSE(DecodeStreamMetaKey(StreamMetaKey({1, 2, 3}) + "z").ok());
  EXPECT_FALSE(DecodeStringMetaKey(StringMetaPrefix({1, 2, 3})).ok());
  EXPECT_FALSE(DecodeJobMetaKey("J").ok());
}

TEST(KeyCodecTest, RollupDecoderRejectsUnknownAxis) {
  std::string key = RollupKey({1, 1, 1}, RollupAxis::kStep, 3);
  key[12] = 7;
  absl::StatusOr<RollupKeyParts> parts = DecodeRollupKey(key);
  EXPECT_EQ(parts.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parts.status().message().find("axis 7"), std::string::npos) << parts.status();
}

TEST(KeyCodecTest, MetaDecodersRejectAnotherTag) {
  std::string key = StreamMetaKey({1, 2, 3});
  key[0] = 'S';
  EXPECT_FALSE(DecodeStreamMetaKey(key).ok());
  EXPECT_FALSE(DecodeJobMetaKey(StreamMetaKey({1, 2, 3})).ok());
}

TEST(KeyCodecTest, MetaKeysRoundTrip) {
  const StreamKey s{9, 1000000, 4};
  EXPECT_EQ(*DecodeStreamMetaKey(StreamMetaKey(s)), s);
  EXPECT_EQ(StreamMetaKey(s).substr(0, 5), StreamMetaPrefix(9));
  absl::StatusOr<StringMetaKeyParts> str = DecodeStringMetaKey(StringMetaKey(s, 77));
  ASSERT_TRUE(str.ok()) << str.status();
  EXPECT_EQ(str->stream, s);
  EXPECT_EQ(str->string_id, 77u);
  EXPECT_EQ(*DecodeJobMetaKey(JobMetaKey("train-7b")), "train-7b");
  absl::StatusOr<CheckpointKeyParts> ts = DecodeCheckpointTsKey(CheckpointTsKey(s, 12345));
  ASSERT_TRUE(ts.ok()) << ts.status();
  EXPECT_EQ(ts->stream, s);
  EXPECT_EQ(ts->seq, 12345u);
  EXPECT_EQ(DecodeCheckpointKey(CheckpointKey(s, 8))->seq, 8u);
}

TEST(KeyCodecTest, SyntheticRankKeysDistinguishHostDevicePidAndStart) {
  const std::string a = SyntheticRankKey(1, "node-a", 0, 100, 0);
  EXPECT_NE(a, SyntheticRankKey(1, "node-b", 0, 100, 0));
  EXPECT_NE(a, SyntheticRankKey(1, "node-a", 1, 100, 0));
  EXPECT_NE(a, SyntheticRankKey(1, "node-a", 0, 101, 0));
  EXPECT_NE(a, SyntheticRankKey(2, "node-a", 0, 100, 0));
  EXPECT_NE(SyntheticRankKey(1, "", -1, 0, 0), SyntheticRankKey(1, "", 0, 0, 0));
  // A process started later with the same pid is another worker; without a start (an older
  // agent) the key is the one such agents always had.
  EXPECT_NE(SyntheticRankKey(1, "node-a", 0, 100, 5), SyntheticRankKey(1, "node-a", 0, 100, 6));
  EXPECT_NE(a, SyntheticRankKey(1, "node-a", 0, 100, 5));
  EXPECT_EQ(a.substr(0, 1), "H");
  // Not ambiguous with an older agent's key whose host begins with a start's bytes: the two
  // formats would produce the same bytes here if they shared a tag.
  EXPECT_NE(SyntheticRankKey(1, "node-a", 0, 100, 0x6e6f64652d612121),
            SyntheticRankKey(1, std::string("node-a!!") + "node-a", 0, 100, 0));
}

TEST(KeyCodecTest, ScalarsRoundTrip) {
  for (uint64_t v : {0ull, 1ull, 0xffffffffffffffffull, 0x8000000000000000ull}) {
    std::string b;
    PutU64(&b, v);
    EXPECT_EQ(*DecodeU64(b), v);
  }
  for (int64_t v : {std::numeric_limits<int64_t>::min(), int64_t{-1}, int64_t{0},
                    std::numeric_limits<int64_t>::max()}) {
    std::string b;
    PutOrderedI64(&b, v);
    EXPECT_EQ(*DecodeOrderedI64(b), v);
  }
}

}  // namespace
}  // namespace memtrace::collector
