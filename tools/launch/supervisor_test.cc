#include "tools/launch/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"
#include "tools/launch/child_process.h"

namespace memtrace::launch {
namespace {

pid_t Start(const ScopedSignalBlock& signals, const std::string& script,
            JobGroup group = JobGroup::kShared) {
  SpawnOptions options;
  options.argv = {"sh", "-c", script};
  options.signal_mask = signals.original_mask();
  options.new_process_group = group == JobGroup::kOwn;
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

// Queues `sig` the way the kernel sends a terminal's Ctrl-C: si_code SI_KERNEL, which a
// thread may only forge for itself, so this runs in the thread that then supervises.
void QueueAsTheTerminal(int sig) {
  siginfo_t info = {};
  info.si_signo = sig;
  info.si_code = SI_KERNEL;
  ASSERT_EQ(syscall(SYS_rt_sigqueueinfo, getpid(), sig, &info), 0) << strerror(errno);
}

bool WaitForFile(const std::string& path) {
  for (int i = 0; i < 400; ++i) {
    if (access(path.c_str(), F_OK) == 0) return true;
    absl::SleepFor(absl::Milliseconds(25));
  }
  return false;
}

// Ends with 0 after about 1 s, with 7 on SIGINT; creates `ready` once it handles SIGINT.
std::string JobExitingOnSigint(const std::string& ready) {
  return absl::StrCat("trap 'exit 7' INT; touch ", ready,
                      "; i=0; while [ $i -lt 20 ]; do sleep 0.05; i=$((i+1)); done; exit 0");
}

TEST(SuperviseJobTest, ATerminalSignalIsNotPassedOnToAJobInOurGroup) {
  const std::string ready = test_util::UniqueDir("supervise") + "/ready";
  ScopedSignalBlock signals;
  pid_t job = Start(signals, JobExitingOnSigint(ready));
  ASSERT_TRUE(WaitForFile(ready));
  // The kernel gave the job its own copy (here: none, so the job runs to its end).
  QueueAsTheTerminal(SIGINT);
  std::atomic<int> forwarded{0};
  SuperviseOptions options;
  options.on_forward = [&](int sig, pid_t) { forwarded = sig; };
  int status = SuperviseJob(job, signals, options);
  EXPECT_EQ(ExitCodeOf(status), 0);
  EXPECT_EQ(forwarded.load(), 0);
}

TEST(SuperviseJobTest, AJobInItsOwnGroupGetsATerminalSignalToo) {
  const std::string ready = test_util::UniqueDir("supervise") + "/ready";
  ScopedSignalBlock signals;
  pid_t job = Start(signals, JobExitingOnSigint(ready), JobGroup::kOwn);
  ASSERT_TRUE(WaitForFile(ready));
  // Whatever reaches memtrace's group is passed on, sent by the kernel too (si_code
  // SI_KERNEL): the job hears none of it otherwise.
  QueueAsTheTerminal(SIGINT);
  std::atomic<int> forwarded{0};
  SuperviseOptions options;
  options.job_group = JobGroup::kOwn;
  options.on_forward = [&](int sig, pid_t) { forwarded = sig; };
  int status = SuperviseJob(job, signals, options);
  EXPECT_EQ(ExitCodeOf(status), 7);
  EXPECT_EQ(forwarded.load(), SIGINT);
}

// Queues `sig` as sent by process `from` (kill(2) records the sender's pid), to ourselves.
void QueueAsSentBy(int sig, pid_t from) {
  siginfo_t info = {};
  info.si_signo = sig;
  info.si_code = SI_USER;
  info.si_pid = from;
  ASSERT_EQ(syscall(SYS_rt_sigqueueinfo, getpid(), sig, &info), 0) << strerror(errno);
}

TEST(SuperviseJobTest, AShellsHangupToOurGroupIsNotPassedOnAgain) {
  const std::string ready = test_util::UniqueDir("supervise") + "/ready";
  ScopedSignalBlock signals;
  pid_t job = Start(signals, absl::StrCat("trap 'exit 9' HUP; ", JobExitingOnSigint(ready)));
  ASSERT_TRUE(WaitForFile(ready));
  constexpr pid_t kShell = 4242;
  // The terminal closed: the shell sent SIGHUP to the group, and the job got its own copy
  // (here: none, so it runs to its end). A SIGHUP from anyone else is passed on.
  QueueAsSentBy(SIGHUP, kShell);
  std::vector<int> forwarded;
  SuperviseOptions options;
  options.hangup_senders = {kShell};
  options.on_forward = [&](int sig, pid_t) { forwarded.push_back(sig); };
  EXPECT_EQ(ExitCodeOf(SuperviseJob(job, signals, options)), 0);
  EXPECT_TRUE(forwarded.empty());

  job = Start(signals, absl::StrCat("trap 'exit 9' HUP; ", JobExitingOnSigint(ready + "2")));
  ASSERT_TRUE(WaitForFile(ready + "2"));
  QueueAsSentBy(SIGHUP, kShell + 1);
  EXPECT_EQ(ExitCodeOf(SuperviseJob(job, signals, options)), 9);
  EXPECT_EQ(forwarded, std::vector<int>{SIGHUP});
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Gone, or a zombie nobody reaped yet.
bool Ended(pid_t pid) {
  std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  if (stat.empty()) return true;
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && stat.substr(paren + 2, 1) == "Z";
}

TEST(SuperviseJobTest, AJobInItsOwnGroupGetsTheSignalInItsWholeGroup) {
  // A launcher's worker (torchrun's) shares its group and expects what the group gets.
  const std::string worker_pid_file = test_util::UniqueDir("supervise") + "/worker.pid";
  ScopedSignalBlock signals;
  pid_t job = Start(signals,
                    absl::StrCat("sleep 30 & echo $! >", worker_pid_file, ".tmp; mv ",
                                 worker_pid_file, ".tmp ", worker_pid_file, "; wait"),
                    JobGroup::kOwn);
  SuperviseOptions options;
  options.job_group = JobGroup::kOwn;
  std::thread sender([&] {
    for (int i = 0; i < 200 && ReadFile(worker_pid_file).empty(); ++i) {
      absl::SleepFor(absl::Milliseconds(25));
    }
    kill(getpid(), SIGTERM);
  });
  int status = SuperviseJob(job, signals, options);
  sender.join();
  EXPECT_EQ(ExitCodeOf(status), 128 + SIGTERM);
  const pid_t worker = std::atoi(ReadFile(worker_pid_file).c_str());
  ASSERT_GT(worker, 0);
  bool ended = Ended(worker);
  for (int i = 0; i < 100 && !ended; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
    ended = Ended(worker);
  }
  EXPECT_TRUE(ended) << "the job's worker " << worker << " did not get the SIGTERM";
  if (!ended) kill(worker, SIGKILL);
}

// A new pseudo-terminal's follower side, made the calling session leader's controlling terminal.
// Its foreground group is then the leader's.
bool TakeNewTerminal() {
  int leader = posix_openpt(O_RDWR | O_NOCTTY);
  if (leader < 0 || grantpt(leader) != 0 || unlockpt(leader) != 0) return false;
  char name[128];
  if (ptsname_r(leader, name, sizeof(name)) != 0) return false;
  int follower = open(name, O_RDWR | O_NOCTTY);
  return follower >= 0 && ioctl(follower, TIOCSCTTY, 0) == 0;
}

enum class Place {
  kNoTerminal,
  kTerminalForeground,
  // A group of its own in the background, as a shell starts a job with `&`.
  kTerminalBackgroundLeader,
  // A background group its parent leads, as under a subshell started with `&`.
  kTerminalBackgroundFollower,
};

// ChooseJobGroup's answer in a process placed `where`, in a session of its own (exit code 1:
// kShared, 2: kOwn, 3: the set-up failed).
int ChooseJobGroupIn(Place where) {
  pid_t pid = fork();
  if (pid == 0) {
    if (setsid() < 0) _exit(3);
    if (where != Place::kNoTerminal && !TakeNewTerminal()) _exit(3);
    // The session leader is in the foreground; a process of another group of its session is not.
    if (where == Place::kTerminalBackgroundLeader || where == Place::kTerminalBackgroundFollower) {
      if (fork() != 0) {
        int status = 0;
        wait(&status);
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 3);
      }
      if (setpgid(0, 0) != 0) _exit(3);
      if (where == Place::kTerminalBackgroundFollower && fork() != 0) {
        int status = 0;
        wait(&status);
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 3);
      }
    }
    _exit(ChooseJobGroup() == JobGroup::kShared ? 1 : 2);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ChooseJobGroupTest, SharedInTheForegroundOfTheControllingTerminal) {
  // Whatever stdin, stdout and stderr are: here none of them is that terminal.
  EXPECT_EQ(ChooseJobGroupIn(Place::kTerminalForeground), 1);
}

TEST(ChooseJobGroupTest, OwnWithoutAControllingTerminal) {
  // Under a batch scheduler, setsid, a container.
  EXPECT_EQ(ChooseJobGroupIn(Place::kNoTerminal), 2);
}

TEST(ChooseJobGroupTest, SharedInTheBackgroundOfTheControllingTerminal) {
  // Started with `&`, as the leader of its group or under a subshell or a wrapper that leads
  // it: `fg` gives the terminal to this group, which must hold the job too.
  EXPECT_EQ(ChooseJobGroupIn(Place::kTerminalBackgroundLeader), 1);
  EXPECT_EQ(ChooseJobGroupIn(Place::kTerminalBackgroundFollower), 1);
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
