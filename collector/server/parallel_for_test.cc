#include "collector/server/parallel_for.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace memtrace::collector {
namespace {

TEST(ParallelForTest, CallsEveryIndexExactlyOnce) {
  for (int threads : {0, 1, 2, 3, 8}) {
    std::vector<std::atomic<int>> calls(1000);
    ASSERT_TRUE(ParallelFor(calls.size(), threads, [&](size_t i) {
                  calls[i].fetch_add(1);
                  return absl::OkStatus();
                }).ok());
    for (size_t i = 0; i < calls.size(); ++i) {
      ASSERT_EQ(calls[i].load(), 1) << "index " << i << ", " << threads << " threads";
    }
  }
}

TEST(ParallelForTest, NothingToDoIsOk) {
  EXPECT_TRUE(ParallelFor(0, 4, [](size_t) { return absl::InternalError("called"); }).ok());
}

TEST(ParallelForTest, OneThreadRunsInOrderOnTheCaller) {
  std::vector<size_t> order;
  const std::thread::id caller = std::this_thread::get_id();
  bool elsewhere = false;
  ASSERT_TRUE(ParallelFor(50, 1, [&](size_t i) {
                order.push_back(i);
                elsewhere |= std::this_thread::get_id() != caller;
                return absl::OkStatus();
              }).ok());
  ASSERT_EQ(order.size(), 50u);
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], i);
  EXPECT_FALSE(elsewhere);
}

TEST(ParallelForTest, ReturnsTheLowestFailedIndexWhateverTheScheduling) {
  for (int round = 0; round < 50; ++round) {
    absl::Status s = ParallelFor(400, 4, [](size_t i) {
      if (i == 37 || i == 38 || i == 390) {
        return absl::NotFoundError(absl::StrCat("item ", i));
      }
      return absl::OkStatus();
    });
    ASSERT_EQ(s, absl::NotFoundError("item 37")) << "round " << round;
  }
}

TEST(ParallelForTest, StopsTakingItemsAfterAFailure) {
  std::atomic<int> calls{0};
  absl::Status s = ParallelFor(100000, 2, [&](size_t i) {
    calls.fetch_add(1);
    return i == 0 ? absl::InternalError("first") : absl::OkStatus();
  });
  EXPECT_EQ(s, absl::InternalError("first"));
  // The other thread may finish what it took and a few more before it sees the failure.
  EXPECT_LT(calls.load(), 100000);
}

TEST(ParallelForTest, ItemsRunConcurrently) {
  // Item 0 waits for item 1: it can finish only if another thread runs item 1 meanwhile.
  absl::Notification second_ran;
  absl::Status s = ParallelFor(2, 2, [&](size_t i) {
    if (i == 1) {
      second_ran.Notify();
      return absl::OkStatus();
    }
    return second_ran.WaitForNotificationWithTimeout(absl::Seconds(30))
               ? absl::OkStatus()
               : absl::DeadlineExceededError("item 1 never ran beside item 0");
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(ParallelForTest, DefaultThreadsAreBetweenOneAndEight) {
  EXPECT_GE(DefaultQueryThreads(), 1);
  EXPECT_LE(DefaultQueryThreads(), 8);
}

}  // namespace
}  // namespace memtrace::collector
