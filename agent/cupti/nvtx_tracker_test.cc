#include "agent/cupti/nvtx_tracker.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "agent/cupti/testing/recording_sink.h"
#include "gtest/gtest.h"

namespace memtrace {
namespace cupti {
namespace {

class NvtxTrackerTest : public ::testing::Test {
 protected:
  NvtxTrackerTest()
      : tracker_(&sink_, *RangeClassifier::Create(RangeClassifierOptions()),
                 [this] { return now_.fetch_add(10); }) {}

  RecordingSink sink_;
  std::atomic<int64_t> now_{1000};
  NvtxTracker tracker_;
};

TEST_F(NvtxTrackerTest, StepRangeEmitsStepWithNumber) {
  tracker_.Push(0, "step 3");
  tracker_.Pop(0);
  tracker_.Push(0, "ProfilerStep#4");
  tracker_.Pop(0);
  std::vector<Event> steps = sink_.EventsOfKind(EventKind::kStep);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].aux, 3u);
  EXPECT_EQ(steps[1].aux, 4u);
  EXPECT_LT(steps[0].ts_ns, steps[1].ts_ns);
  EXPECT_EQ(tracker_.stats().steps, 2u);
}

TEST_F(NvtxTrackerTest, InnermostTagRangeNamesAllocationsAndStepsArePassedOver) {
  EXPECT_EQ(tracker_.CurrentTag(), 0u);
  tracker_.Push(0, "step 1");
  EXPECT_EQ(tracker_.CurrentTag(), 0u);  // a step range is not a tag
  tracker_.Push(0, "fsdp:layers.1");
  const uint32_t outer = tracker_.CurrentTag();
  EXPECT_EQ(sink_.Name(outer), "fsdp:layers.1");
  tracker_.Push(0, "leak:cache");
  const uint32_t inner = tracker_.CurrentTag();
  EXPECT_EQ(sink_.Name(inner), "leak:cache");
  tracker_.Push(0, "phase:rollout");
  EXPECT_EQ(tracker_.CurrentTag(), inner);  // nor is a phase
  tracker_.Pop(0);
  tracker_.Pop(0);
  EXPECT_EQ(tracker_.CurrentTag(), outer);
  tracker_.Pop(0);
  tracker_.Pop(0);
  EXPECT_EQ(tracker_.CurrentTag(), 0u);
  // The same name re-opened later gets the same id.
  tracker_.Push(0, "leak:cache");
  EXPECT_EQ(tracker_.CurrentTag(), inner);
  tracker_.Pop(0);
}

// A thread that exits with a range still open (a pop skipped on an error path): glibc gives the
// next thread the same std::thread::id, which inherited that range and tagged its allocations.
TEST_F(NvtxTrackerTest, ANewThreadDoesNotInheritTheRangesOfOneThatExited) {
  std::thread([&] { tracker_.Push(0, "leak:cache"); }).join();
  uint32_t inherited = 1;
  std::thread([&] { inherited = tracker_.CurrentTag(); }).join();
  EXPECT_EQ(inherited, 0u);
}

// Each such thread also kept its open ranges, up to 1024 names, for the life of the process.
TEST_F(NvtxTrackerTest, AThreadThatEndsWithPushRangesOpenLeavesNothingBehind) {
  for (int i = 0; i < 50; ++i) {
    std::thread([&] {
      tracker_.Push(0, "fsdp:layers.0");
      tracker_.Push(7, "leak:cache");
      EXPECT_EQ(tracker_.stats().threads_with_ranges, 1u);
    }).join();
  }
  EXPECT_EQ(tracker_.stats().threads_with_ranges, 0u);
  EXPECT_EQ(tracker_.stats().dropped_at_thread_exit, 100u);
}

// A phase pushed on a thread that ends without popping it (an exception past the pop, a worker
// thread torn down) ended then: without a PHASE_END the analyses saw it open to the rank's end.
TEST_F(NvtxTrackerTest, APhaseLeftOpenByAThreadThatEndsIsEndedThere) {
  std::thread([&] {
    tracker_.Push(0, "phase:rollout");
    tracker_.Push(0, "fsdp:layers.0");
    tracker_.Push(0, "phase:reward");
  }).join();
  const std::vector<Event> begins = sink_.EventsOfKind(EventKind::kPhaseBegin);
  const std::vector<Event> ends = sink_.EventsOfKind(EventKind::kPhaseEnd);
  ASSERT_EQ(begins.size(), 2u);
  ASSERT_EQ(ends.size(), 2u);
  // Innermost first, as the pops would have ended them, each after it began.
  EXPECT_EQ(sink_.Name(ends[0].tag_id), "reward");
  EXPECT_EQ(sink_.Name(ends[1].tag_id), "rollout");
  EXPECT_GT(ends[0].ts_ns, begins[1].ts_ns);
  EXPECT_GT(ends[1].ts_ns, ends[0].ts_ns);
  const NvtxStats stats = tracker_.stats();
  EXPECT_EQ(stats.dropped_at_thread_exit, 3u);
  EXPECT_EQ(stats.phases_ended_at_thread_exit, 2u);
  EXPECT_EQ(stats.threads_with_ranges, 0u);
}

// A phase popped before its thread ends gets one end, not a second at the thread's end; a phase
// started (start/end) on it is ended by whoever ends it, not by the thread ending.
TEST_F(NvtxTrackerTest, OnlyPhasesStillPushedWhenTheThreadEndsAreEndedThere) {
  std::thread([&] {
    tracker_.Push(0, "phase:rollout");
    tracker_.Pop(0);
    tracker_.Start(9, "phase:reward");
  }).join();
  EXPECT_EQ(sink_.EventsOfKind(EventKind::kPhaseEnd).size(), 1u);
  EXPECT_EQ(tracker_.stats().phases_ended_at_thread_exit, 0u);
  tracker_.End(9);
  EXPECT_EQ(sink_.EventsOfKind(EventKind::kPhaseEnd).size(), 2u);
}

// A start/end range may be ended by another thread: its starter ending does not drop it.
TEST_F(NvtxTrackerTest, AStartedRangeOutlivesTheThreadThatStartedIt) {
  std::thread([&] {
    tracker_.Push(0, "fsdp:layers.0");
    tracker_.Start(42, "phase:reward");
  }).join();
  EXPECT_EQ(tracker_.stats().threads_with_ranges, 1u);
  EXPECT_EQ(tracker_.stats().dropped_at_thread_exit, 1u);
  tracker_.End(42);
  EXPECT_EQ(tracker_.stats().ends_unknown_id, 0u);
  EXPECT_EQ(sink_.EventsOfKind(EventKind::kPhaseEnd).size(), 1u);
  EXPECT_EQ(tracker_.stats().threads_with_ranges, 0u);
}

// Intern() waits while `hold` is set: the tracker calls it holding its lock (CurrentTag).
class HoldingSink : public RecordingSink {
 public:
  uint32_t Intern(StringKind kind, std::string_view value) override {
    inside = true;
    while (hold) std::this_thread::yield();
    return RecordingSink::Intern(kind, value);
  }
  std::atomic<bool> hold{true}, inside{false};
};

// A child forked while another thread was inside the tracker (holding its lock) inherits the
// lock held, and the forking thread's end notice: run at the child's exit, it hung the child.
TEST(NvtxTrackerForkTest, AForkedChildExitsThoughAnotherThreadHeldTheTrackerAtTheFork) {
  HoldingSink sink;
  NvtxTracker tracker(&sink, *RangeClassifier::Create(RangeClassifierOptions()),
                      [] { return int64_t{1}; });
  tracker.Push(0, "fsdp:layers.0");  // this thread's notice is armed
  std::thread inside([&] {
    tracker.Push(0, "fsdp:layers.1");
    tracker.CurrentTag();  // holds the tracker's lock until `hold` is cleared
  });
  while (!sink.inside) std::this_thread::yield();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) std::exit(0);  // runs this thread's thread_local destructors
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 500 && done == 0; ++i) {
    done = waitpid(child, &status, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (done == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
  }
  sink.hold = false;
  inside.join();
  tracker.Pop(0);
  EXPECT_NE(done, 0) << "the forked child hung at exit";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST_F(NvtxTrackerTest, PhaseRangeEmitsBeginAndEndWithInternedName) {
  tracker_.Push(0, "actor_update");
  tracker_.Push(0, "fsdp:fwd");
  tracker_.Pop(0);
  tracker_.Pop(0);
  std::vector<Event> begins = sink_.EventsOfKind(EventKind::kPhaseBegin);
  std::vector<Event> ends = sink_.EventsOfKind(EventKind::kPhaseEnd);
  ASSERT_EQ(begins.size(), 1u);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(begins[0].tag_id, ends[0].tag_id);
  EXPECT_EQ(begins[0].tag_id, sink_.IdOf(StringKind::kPhase, "actor_update"));
  EXPECT_LT(begins[0].ts_ns, ends[0].ts_ns);
}

TEST_F(NvtxTrackerTest, PopWithoutPushIsCountedNotFatal) {
  tracker_.Pop(0);
  tracker_.Pop(7);
  tracker_.Push(0, "a");
  tracker_.Pop(5);  // other domain: nothing open there
  EXPECT_EQ(tracker_.stats().pops_without_push, 3u);
  EXPECT_EQ(sink_.Name(tracker_.CurrentTag()), "a");
  tracker_.Pop(0);
  EXPECT_EQ(tracker_.CurrentTag(), 0u);
}

TEST_F(NvtxTrackerTest, DomainsHaveSeparateStacks) {
  tracker_.Push(1, "domain-one");
  tracker_.Push(0, "default");
  tracker_.Pop(1);  // closes "domain-one" even though "default" is innermost
  EXPECT_EQ(sink_.Name(tracker_.CurrentTag()), "default");
  tracker_.Pop(0);
  EXPECT_EQ(tracker_.CurrentTag(), 0u);
  EXPECT_EQ(tracker_.stats().pops_without_push, 0u);
}

TEST_F(NvtxTrackerTest, StartEndRangeEndsFromAnotherThread) {
  tracker_.Start(42, "loader");
  tracker_.Start(43, "phase:reward");
  EXPECT_EQ(sink_.Name(tracker_.CurrentTag()), "loader");
  std::thread other([this] {
    EXPECT_EQ(tracker_.CurrentTag(), 0u);  // not open on this thread
    tracker_.End(42);
    tracker_.End(43);
    tracker_.End(99);
  });
  other.join();
  EXPECT_EQ(tracker_.CurrentTag(), 0u);
  EXPECT_EQ(tracker_.stats().ends_unknown_id, 1u);
  EXPECT_EQ(sink_.EventsOfKind(EventKind::kPhaseEnd).size(), 1u);
}

TEST_F(NvtxTrackerTest, ThreadsKeepIndependentStacks) {
  constexpr int kThreads = 8;
  constexpr int kIters = 200;
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string mine = "thread:" + std::to_string(t);
      for (int i = 0; i < kIters; ++i) {
        tracker_.Push(0, mine);
        tracker_.Push(0, mine + ":inner");
        if (sink_.Name(tracker_.CurrentTag()) != mine + ":inner") ++mismatches;
        tracker_.Pop(0);
        if (sink_.Name(tracker_.CurrentTag()) != mine) ++mismatches;
        tracker_.Pop(0);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  NvtxStats s = tracker_.stats();
  EXPECT_EQ(s.pushes, uint64_t{kThreads * kIters * 2});
  EXPECT_EQ(s.pops, s.pushes);
  EXPECT_EQ(s.pops_without_push, 0u);
}

TEST_F(NvtxTrackerTest, UnboundedPushesAreCappedAndPopsStayMatched) {
  for (int i = 0; i < 1100; ++i) tracker_.Push(0, "deep");
  tracker_.Push(0, "never kept");
  EXPECT_EQ(tracker_.stats().overflowed, 77u);
  EXPECT_EQ(sink_.Name(tracker_.CurrentTag()), "deep");
  for (int i = 0; i < 1101; ++i) tracker_.Pop(0);
  EXPECT_EQ(tracker_.CurrentTag(), 0u);
  EXPECT_EQ(tracker_.stats().pops_without_push, 0u);
}

TEST_F(NvtxTrackerTest, MarkWithStepNameEmitsStep) {
  tracker_.Mark("iteration 8");
  tracker_.Mark("checkpoint saved");
  std::vector<Event> steps = sink_.EventsOfKind(EventKind::kStep);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].aux, 8u);
}

}  // namespace
}  // namespace cupti
}  // namespace memtrace
