// Runs the fuzz target's checks in the normal build (no libFuzzer): every prefix of each seed
// (truncated protobufs), every single-byte change of each seed, and a few hand-made hostile
// inputs. A violated promise aborts the test.
#include <cstdint>
#include <string>

#include "gtest/gtest.h"
#include "proto/codec/fuzz/seed_batches.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int Feed(const std::string& bytes) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

TEST(BatchCodecFuzzerTest, EveryPrefixOfEverySeedKeepsThePromises) {
  for (const auto& [name, bytes] : memtrace::fuzz::SeedBatches()) {
    ASSERT_FALSE(bytes.empty()) << name;
    for (size_t n = 0; n <= bytes.size(); ++n) EXPECT_EQ(Feed(bytes.substr(0, n)), 0);
  }
}

TEST(BatchCodecFuzzerTest, EverySingleByteChangeKeepsThePromises) {
  for (const auto& [name, bytes] : memtrace::fuzz::SeedBatches()) {
    for (size_t i = 0; i < bytes.size(); ++i) {
      for (int v : {0x00, 0x01, 0x7f, 0x80, 0xff}) {
        std::string mutated = bytes;
        mutated[i] = static_cast<char>(v);
        EXPECT_EQ(Feed(mutated), 0);
      }
    }
  }
}

TEST(BatchCodecFuzzerTest, HostileShapesKeepThePromises) {
  // count = 2^32-1 with no columns; a length prefix of 2^31; a packed column claiming 10 GB.
  EXPECT_EQ(Feed(std::string("\x08\xff\xff\xff\xff\x0f", 6)), 0);
  EXPECT_EQ(Feed(std::string("\x22\x80\x80\x80\x80\x08", 6)), 0);
  EXPECT_EQ(Feed(std::string("\x2a\x80\x80\x80\x80\x28\x01", 7)), 0);
}

// Found by this fuzzer: with no seq_delta column the consecutive increment must not wrap
// (first_seq = UINT64_MAX and count 2 once decoded to seqs UINT64_MAX, 0 and was accepted).
TEST(BatchCodecFuzzerTest, SequenceWrapWithoutSeqDeltaIsRejected) {
  // first_seq = UINT64_MAX with two events: the second seq overflows.
  EXPECT_EQ(Feed(std::string("\x08\x02\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x22\x02\x01\x01",
                             17)),
            0);
}

}  // namespace
