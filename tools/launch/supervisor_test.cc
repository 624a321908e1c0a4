#include "tools/launch/supervisor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tools/launch/child_process.h"

namespace memtrace::launch {
namespace {

pid_t Start(const ScopedSignalBlock& signals, const std::string& script) {
  SpawnOptions options;
  options.argv = {"sh", "-c", script};
  options.signal_mask = signals.original_mask();
  absl::StatusOr<pid_t> pid = Spawn(options);
  EXPECT_TRUE(pid.ok()) << pid.status();
  return pid.ok() ? *pid : -1;
}

TEST(SuperviseJobTest, ReturnsTheJobsExitStatus) {
  ScopedSignalBlock signals;
  int status = SuperviseJob(Start(signals, "exit 3"), signals, {});
  EXPECT_EQ(ExitCodeOf(status), 3);
}

TEST(SuperviseJobTest, SigtermSentToUsIsPassedOnToTheJob) {
  ScopedSignalBlock signals;
  pid_t job = Start(signals, "sleep 30");
  std::atomic<int> forwarded{0};
  SuperviseOptions options;
  options.on_forward = [&](int sig, pid_t from) {
    EXPECT_EQ(from, getpid());
    forwarded = sig;
  };
  // Sent the way `kill` or a scheduler would: by a process, to our pid.
  std::thread sender([] {
    absl::SleepFor(absl::Milliseconds(200));
    kill(getpid(), SIGTERM);
  });
  absl::Time start = absl::Now();
  int status = SuperviseJob(job, signals, options);
  sender.join();
  EXPECT_EQ(ExitCodeOf(status), 128 + SIGTERM);
  EXPECT_EQ(forwarded.load(), SIGTERM);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(SuperviseJobTest, JobHandlingTheSignalKeepsItsOwnExitCode) {
  ScopedSignalBlock signals;
  pid_t job = Start(signals, "trap 'exit 7' INT; while :; do sleep 0.05; done");
  std::thread sender([] {
    absl::SleepFor(absl::Milliseconds(300));
    kill(getpid(), SIGINT);
  });
  int status = SuperviseJob(job, signals, {});
  sender.join();
  EXPECT_EQ(ExitCodeOf(status), 7);
}

TEST(SuperviseJobTest, TicksWhileTheJobRuns) {
  ScopedSignalBlock signals;
  pid_t job = Start(signals, "sleep 0.5");
  int ticks = 0;
  SuperviseOptions options;
  options.tick = absl::Milliseconds(50);
  options.on_tick = [&] { ++ticks; };
  SuperviseJob(job, signals, options);
  EXPECT_GE(ticks, 3);
}

TEST(ScopedSignalBlockTest, AStopSignalThatArrivedWhileBlockedIsTakenOnce) {
  ScopedSignalBlock block;
  EXPECT_EQ(block.TakeStopRequest(), std::nullopt);
  ASSERT_EQ(raise(SIGINT), 0);  // Ctrl-C while the local collector starts
  EXPECT_EQ(block.TakeStopRequest(), SIGINT);
  EXPECT_EQ(block.TakeStopRequest(), std::nullopt);
  ASSERT_EQ(raise(SIGUSR1), 0);  // passed on to a job, not a stop
  EXPECT_EQ(block.TakeStopRequest(), std::nullopt);
}

TEST(ScopedSignalBlockTest, PendingSignalsAreDiscardedNotDeliveredOnRelease) {
  {
    ScopedSignalBlock signals;
    kill(getpid(), SIGTERM);  // would end this test process if it were delivered
  }
  SUCCEED();
}

}  // namespace
}  // namespace memtrace::launch
