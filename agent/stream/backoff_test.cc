#include "agent/stream/backoff.h"

#include "gtest/gtest.h"

namespace memtrace {
namespace {

TEST(BackoffTest, DoublesUpToTheMaxWithJitterBetweenHalfAndFull) {
  Backoff b(absl::Milliseconds(100), absl::Milliseconds(800));
  absl::Duration nominal = absl::Milliseconds(100);
  for (int i = 0; i < 8; ++i) {
    absl::Duration wait = b.Next();
    EXPECT_GE(wait, nominal / 2) << i;
    EXPECT_LE(wait, nominal) << i;
    nominal = std::min(nominal * 2, absl::Milliseconds(800));
  }
}

TEST(BackoffTest, ResetStartsOverFromInitial) {
  Backoff b(absl::Milliseconds(10), absl::Seconds(5));
  for (int i = 0; i < 10; ++i) b.Next();
  b.Reset();
  EXPECT_LE(b.Next(), absl::Milliseconds(10));
}

TEST(BackoffTest, JitterSpreadsWaits) {
  Backoff a(absl::Seconds(1), absl::Seconds(1));
  absl::Duration first = a.Next();
  bool differs = false;
  for (int i = 0; i < 20 && !differs; ++i) differs = a.Next() != first;
  EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace memtrace
