#include "agent/cupti/term_drain.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"

namespace memtrace::cupti {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Each case runs in a child of its own: the handler is process-wide and ends the process.
pid_t ChildThat(void (*body)(const std::string&), const std::string& path) {
  const pid_t child = fork();
  if (child == 0) {
    body(path);
    _exit(0);
  }
  return child;
}

int WaitFor(pid_t child) {
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, 0), child);
  return status;
}

// SIGTERM, as torchrun sends the surviving ranks: the drain runs, then the process ends by
// SIGTERM, as it would have without the agent.
TEST(TermDrainTest, DrainsThenEndsBySigterm) {
  const std::string path = test_util::ClearedPath("drained");
  const pid_t child = ChildThat(
      [](const std::string& p) {
        static std::string out;
        out = p;
        if (!InstallTermDrain([] { std::ofstream(out) << "drained"; }, absl::Seconds(60)).ok()) {
          _exit(3);
        }
        raise(SIGTERM);
        for (;;) pause();
      },
      path);
  const int status = WaitFor(child);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_EQ(ReadAll(path), "drained");
}

// A second SIGTERM a second or more into the drain (a launcher in a hurry) ends the process at
// once.
TEST(TermDrainTest, ASecondSigtermDoesNotWaitForTheDrain) {
  const std::string path = test_util::ClearedPath("second");
  const pid_t child = ChildThat(
      [](const std::string& p) {
        static std::string out;
        out = p;
        if (!InstallTermDrain(
                 [] {
                   std::ofstream(out) << "began";
                   for (;;) pause();  // a drain that would never end
                 },
                 absl::Seconds(60))
                 .ok()) {
          _exit(3);
        }
        raise(SIGTERM);
        for (;;) pause();
      },
      path);
  for (int i = 0; i < 500 && ReadAll(path) != "began"; ++i) usleep(10'000);
  ASSERT_EQ(ReadAll(path), "began");
  usleep(1'100'000);  // sooner, it would be the same shutdown signalled twice
  ASSERT_EQ(kill(child, SIGTERM), 0);
  const int status = WaitFor(child);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

// A drain that does not end (a CUPTI flush on a wedged GPU) does not keep the process alive past
// its bound.
TEST(TermDrainTest, ADrainThatHangsEndsAtItsBound) {
  const pid_t child = ChildThat(
      [](const std::string&) {
        if (!InstallTermDrain(
                 [] {
                   for (;;) pause();
                 },
                 absl::Milliseconds(300))
                 .ok())
          _exit(3);
        raise(SIGTERM);
        for (;;) pause();
      },
      "");
  const int64_t start = time(nullptr);
  const int status = WaitFor(child);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_LE(time(nullptr) - start, 30);
}

// Two SIGTERMs a moment apart (scancel and the launcher both signalling the group) are one
// shutdown: the drain still runs to its end.
TEST(TermDrainTest, TwoSigtermsAMomentApartStillDrain) {
  const std::string path = test_util::ClearedPath("twice");
  const pid_t child = ChildThat(
      [](const std::string& p) {
        static std::string out;
        out = p;
        if (!InstallTermDrain(
                 [] {
                   usleep(200'000);
                   std::ofstream(out) << "drained";
                 },
                 absl::Seconds(60))
                 .ok()) {
          _exit(3);
        }
        raise(SIGTERM);
        raise(SIGTERM);
        for (;;) pause();
      },
      path);
  const int status = WaitFor(child);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_EQ(ReadAll(path), "drained");
}

// A handler of the application's own is left alone.
TEST(TermDrainTest, LeavesAnApplicationsHandlerAlone) {
  const pid_t child = ChildThat(
      [](const std::string&) {
        signal(SIGTERM, [](int) { _exit(7); });
        if (InstallTermDrain([] {}, absl::Seconds(60)).code() !=
            absl::StatusCode::kFailedPrecondition) {
          _exit(3);
        }
        raise(SIGTERM);
        _exit(4);
      },
      "");
  const int status = WaitFor(child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 7);
}

// A process forked from a traced one inherits the handler: it ends at once by SIGTERM, and the
// parent's drain does not run.
TEST(TermDrainTest, AForkedChildEndsAtOnceAndLeavesTheParentsDrainAlone) {
  const std::string path = test_util::ClearedPath("forked");
  const pid_t child = ChildThat(
      [](const std::string& p) {
        static std::string out;
        out = p;
        if (!InstallTermDrain([] { std::ofstream(out) << "parent drained"; }, absl::Seconds(60))
                 .ok()) {
          _exit(3);
        }
        const pid_t grandchild = fork();
        if (grandchild == 0) {
          raise(SIGTERM);
          _exit(5);
        }
        int status = 0;
        waitpid(grandchild, &status, 0);
        _exit(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM ? 0 : 6);
      },
      path);
  const int status = WaitFor(child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(ReadAll(path), "");
}

}  // namespace
}  // namespace memtrace::cupti
