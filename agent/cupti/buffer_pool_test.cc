#include "agent/cupti/buffer_pool.h"

#include <cstdint>
#include <cstring>
#include <set>

#include "gtest/gtest.h"

namespace memtrace {
namespace cupti {
namespace {

TEST(BufferPoolTest, HandsOutAlignedBuffersUpToTheBound) {
  BufferPool pool(1001, 3);
  EXPECT_EQ(pool.buffer_bytes(), 1008u);
  std::set<uint8_t*> seen;
  for (int i = 0; i < 3; ++i) {
    uint8_t* b = pool.Acquire();
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 8, 0u);
    std::memset(b, 0xab, pool.buffer_bytes());  // the whole buffer is writable
    seen.insert(b);
  }
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(pool.Acquire(), nullptr);
  BufferPoolStats s = pool.stats();
  EXPECT_EQ(s.declined, 1u);
  EXPECT_EQ(s.outstanding, 3u);
  EXPECT_EQ(s.allocated, 3u);
}

TEST(BufferPoolTest, ReleasedBuffersAreReusedNotReallocated) {
  BufferPool pool(64, 2);
  uint8_t* a = pool.Acquire();
  ASSERT_TRUE(pool.Release(a));
  uint8_t* b = pool.Acquire();
  EXPECT_EQ(a, b);
  EXPECT_EQ(pool.stats().allocated, 1u);
}

TEST(BufferPoolTest, ForeignAndDoubleReleasesAreRefused) {
  BufferPool pool(64, 2);
  alignas(8) uint8_t theirs[64];
  EXPECT_FALSE(pool.Owns(theirs));
  EXPECT_FALSE(pool.Release(theirs));
  EXPECT_FALSE(pool.Release(nullptr));
  uint8_t* a = pool.Acquire();
  EXPECT_TRUE(pool.Owns(a));
  EXPECT_TRUE(pool.Release(a));
  EXPECT_FALSE(pool.Owns(a));
  EXPECT_FALSE(pool.Release(a));
  EXPECT_EQ(pool.stats().foreign, 3u);
  EXPECT_EQ(pool.stats().outstanding, 0u);
}

}  // namespace
}  // namespace cupti
}  // namespace memtrace
