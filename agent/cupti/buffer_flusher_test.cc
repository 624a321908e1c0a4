#include "agent/cupti/buffer_flusher.h"

#include <atomic>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace memtrace {
namespace cupti {
namespace {

bool WaitFor(const std::function<bool()>& done, absl::Duration timeout = absl::Seconds(5)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST(BufferFlusherTest, APokeFlushesAtOnceAndPassesTheMarkTakenBeforeIt) {
  std::atomic<int> flushes{0};
  std::atomic<uint64_t> passed{0};
  std::atomic<uint64_t> mark{1000};
  BufferFlusherOptions o;
  o.period = absl::ZeroDuration();  // only when poked
  BufferFlusher flusher(
      o,
      [&] {
        ++flushes;
        mark += 10;
      },
      [&](uint64_t m) {
        passed = m;
        return false;
      },
      [&] { return mark.load(); });
  flusher.Start();
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(flushes.load(), 0);
  flusher.Poke();
  ASSERT_TRUE(WaitFor([&] { return flusher.flushes() == 1; }));
  EXPECT_EQ(flushes.load(), 1);
  EXPECT_EQ(passed.load(), 1000u);  // taken before the flush, not after
  flusher.Stop();
}

TEST(BufferFlusherTest, FlushesEveryPeriodWithoutPokes) {
  std::atomic<int> flushes{0};
  BufferFlusherOptions o;
  o.period = absl::Milliseconds(5);
  BufferFlusher flusher(
      o, [&] { ++flushes; }, [](uint64_t) { return false; }, [] { return uint64_t{0}; });
  flusher.Start();
  EXPECT_TRUE(WaitFor([&] { return flushes.load() >= 3; }));
  flusher.Stop();
}

TEST(BufferFlusherTest, FlushesAgainWhileEventsAreStillHeld) {
  std::atomic<int> flushes{0};
  BufferFlusherOptions o;
  o.period = absl::ZeroDuration();
  o.min_gap = absl::ZeroDuration();
  // Held events remain after the first two flushes.
  BufferFlusher flusher(
      o, [&] { ++flushes; }, [&](uint64_t) { return flushes.load() < 3; },
      [] { return uint64_t{0}; });
  flusher.Start();
  flusher.Poke();
  ASSERT_TRUE(WaitFor([&] { return flusher.flushes() == 3; }));
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(flushes.load(), 3);
  flusher.Stop();
}

TEST(BufferFlusherTest, StopEndsTheThreadPromptlyAndIsIdempotent) {
  BufferFlusherOptions o;
  o.period = absl::Hours(1);
  BufferFlusher flusher(
      o, [] {}, [](uint64_t) { return false; }, [] { return uint64_t{0}; });
  flusher.Start();
  const absl::Time t0 = absl::Now();
  flusher.Stop();
  flusher.Stop();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(1));
}

}  // namespace
}  // namespace cupti
}  // namespace memtrace
