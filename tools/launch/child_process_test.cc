#include "tools/launch/child_process.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"

namespace memtrace::launch {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

sigset_t EmptyMask() {
  sigset_t mask;
  sigemptyset(&mask);
  return mask;
}

int Wait(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(ResolveCommandTest, FindsProgramsOnPathLikeAShell) {
  absl::StatusOr<std::string> sh = ResolveCommand("sh", "/nonexistent:/bin:/usr/bin");
  ASSERT_TRUE(sh.ok()) << sh.status();
  EXPECT_EQ(*sh, "/bin/sh");
}

TEST(ResolveCommandTest, MissingCommandIsNotFoundAndExits127) {
  absl::StatusOr<std::string> r = ResolveCommand("no-such-command-xyz", "/bin:/usr/bin");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "command not found: no-such-command-xyz");
  EXPECT_EQ(ExitCodeForStartFailure(r.status()), 127);
  EXPECT_FALSE(ResolveCommand("/no/such/file", "").ok());
}

TEST(ResolveCommandTest, NonExecutableFileIsPermissionDeniedAndExits126) {
  std::string dir = test_util::UniqueDir("child");
  std::string file = dir + "/plain";
  std::ofstream(file) << "data";
  chmod(file.c_str(), 0644);
  absl::StatusOr<std::string> r = ResolveCommand(file, "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ExitCodeForStartFailure(r.status()), 126);
  EXPECT_EQ(ResolveCommand("plain", dir).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(ResolveCommand(dir, "").ok());  // a directory is not a command
}

TEST(SpawnTest, ChildSeesAddedAndReplacedVariablesAndInheritsTheRest) {
  std::string out = test_util::UniqueDir("child") + "/out";
  setenv("MEMTRACE_SPAWN_TEST_KEEP", "kept", 1);
  setenv("MEMTRACE_SPAWN_TEST_REPLACE", "old", 1);
  SpawnOptions options;
  options.argv = {"sh", "-c",
                  "echo \"$MEMTRACE_SPAWN_TEST_KEEP $MEMTRACE_SPAWN_TEST_REPLACE "
                  "$MEMTRACE_SPAWN_TEST_NEW\""};
  options.env = {{"MEMTRACE_SPAWN_TEST_REPLACE", "new"}, {"MEMTRACE_SPAWN_TEST_NEW", "added"}};
  options.signal_mask = EmptyMask();
  options.output_path = out;
  absl::StatusOr<pid_t> pid = Spawn(options);
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_EQ(ExitCodeOf(Wait(*pid)), 0);
  EXPECT_EQ(ReadFile(out), "kept new added\n");
}

TEST(SpawnTest, ExitCodeAndSignalDeathMapLikeAShell) {
  SpawnOptions options;
  options.signal_mask = EmptyMask();
  options.argv = {"sh", "-c", "exit 3"};
  int status = Wait(*Spawn(options));
  EXPECT_EQ(ExitCodeOf(status), 3);
  EXPECT_EQ(DescribeWaitStatus(status), "exited with code 3");
  options.argv = {"sh", "-c", "kill -TERM $$"};
  status = Wait(*Spawn(options));
  EXPECT_EQ(ExitCodeOf(status), 128 + SIGTERM);
  EXPECT_NE(DescribeWaitStatus(status).find("killed by signal 15"), std::string::npos);
}

TEST(SpawnTest, ChildStartsWithTheGivenSignalMask) {
  sigset_t blocked;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGTERM);
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, &blocked, &old);
  SpawnOptions options;
  options.signal_mask = EmptyMask();  // unblocked in the child although blocked here
  options.argv = {"sh", "-c", "kill -TERM $$; sleep 5"};
  int status = Wait(*Spawn(options));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  EXPECT_EQ(ExitCodeOf(status), 128 + SIGTERM);
}

TEST(SpawnTest, NewProcessGroupIsItsOwn) {
  std::string out = test_util::UniqueDir("child") + "/pgid";
  SpawnOptions options;
  options.signal_mask = EmptyMask();
  options.new_process_group = true;
  options.output_path = out;
  options.argv = {"sh", "-c", "ps -o pgid= -p $$"};
  absl::StatusOr<pid_t> pid = Spawn(options);
  ASSERT_TRUE(pid.ok());
  Wait(*pid);
  EXPECT_EQ(std::stoi(ReadFile(out)), *pid);
}

// How many of `spawns` children started in groups of their own die of a SIGUSR1 that another
// thread sends to the caller's group all along, while the caller blocks it (as memtrace run
// blocks what it passes on). Run in a process of its own group, so that the signal reaches
// nothing else.
int ChildrenKilledBySignalsToTheCallersGroup(int spawns) {
  pid_t helper = fork();
  if (helper == 0) {
    setpgid(0, 0);
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, nullptr);  // before the sender, which inherits it
    std::atomic<bool> done{false};
    std::thread sender([&] {
      while (!done) kill(0, SIGUSR1);
    });
    int killed = 0;
    for (int i = 0; i < spawns; ++i) {
      SpawnOptions options;
      options.signal_mask = EmptyMask();
      options.new_process_group = true;
      options.argv = {"true"};
      absl::StatusOr<pid_t> pid = Spawn(options);
      if (!pid.ok()) _exit(255);
      int status = Wait(*pid);
      if (WIFSIGNALED(status) && WTERMSIG(status) == SIGUSR1) ++killed;
    }
    done = true;
    sender.join();
    _exit(std::min(killed, 254));
  }
  int status = Wait(helper);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(SpawnTest, ASignalToTheCallersGroupDuringSpawnDoesNotReachTheNewGroup) {
  // Between fork and setpgid the child is still in the caller's group; the caller takes its own
  // copy, so the child's would be a second one (delivered at exec, when the mask is lifted).
  EXPECT_EQ(ChildrenKilledBySignalsToTheCallersGroup(200), 0);
}

TEST(SpawnTest, ExecFailureInTheChildIsReportedToTheParent) {
  // Executable bit set, but neither ELF nor a #! script: execve fails with ENOEXEC after fork.
  std::string file = test_util::UniqueDir("child") + "/garbage";
  std::ofstream(file) << std::string("\x7f\x01\x02garbage", 10);
  chmod(file.c_str(), 0755);
  SpawnOptions options;
  options.signal_mask = EmptyMask();
  options.argv = {file};
  absl::StatusOr<pid_t> pid = Spawn(options);
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.status().code(), absl::StatusCode::kPermissionDenied) << pid.status();
  EXPECT_NE(pid.status().message().find(file), std::string::npos);
  EXPECT_EQ(ExitCodeForStartFailure(pid.status()), 126);
}

TEST(SpawnTest, MissingProgramFailsBeforeForkWithNotFound) {
  SpawnOptions options;
  options.signal_mask = EmptyMask();
  options.argv = {"no-such-command-xyz"};
  absl::StatusOr<pid_t> pid = Spawn(options);
  EXPECT_EQ(pid.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace memtrace::launch
