// LocalCollector against stand-in collector scripts (the real binary is exercised end to end in
// //tests/launch): the port handshake, early death, a silent process and stopping.
#include "tools/launch/local_collector.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"

namespace memtrace::launch {
namespace {

class LocalCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_util::UniqueDir("local");
    sigemptyset(&options_.signal_mask);
    options_.work_dir = dir_;
    options_.data_dir = dir_ + "/data/nested";
    options_.start_timeout = absl::Seconds(5);
  }
  // A script standing in for memtrace-collector: `body` runs with the port file in $PORT_FILE.
  std::string Script(const std::string& body) {
    std::string path = dir_ + "/collector-" + std::to_string(scripts_++);
    std::ofstream(path) << "#!/bin/sh\n"
                        << "while [ $# -gt 0 ]; do [ \"$1\" = --port_file ] && PORT_FILE=$2; "
                           "shift; done\n"
                        << body << "\n";
    chmod(path.c_str(), 0755);
    return path;
  }
  std::string dir_;
  int scripts_ = 0;
  LocalCollectorOptions options_;
};

TEST_F(LocalCollectorTest, ReadyWhenThePortFileHasACompleteLine) {
  options_.binary =
      Script("printf 4242 > $PORT_FILE; sleep 0.3; echo >> $PORT_FILE; exec sleep 30");
  absl::StatusOr<std::unique_ptr<LocalCollector>> c = LocalCollector::Start(options_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->address(), "127.0.0.1:4242");
  EXPECT_FALSE((*c)->Poll().has_value());
  struct stat st;
  EXPECT_EQ(stat(options_.data_dir.c_str(), &st), 0) << "data dir created";
  int status = (*c)->Stop(absl::Seconds(5));
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  EXPECT_EQ((*c)->Stop(absl::Seconds(5)), status) << "idempotent";
}

TEST_F(LocalCollectorTest, WildcardListenIsReachedThroughTheHostname) {
  options_.binary = Script("echo 4243 > $PORT_FILE; exec sleep 30");
  options_.listen = "0.0.0.0:0";
  absl::StatusOr<std::unique_ptr<LocalCollector>> c = LocalCollector::Start(options_);
  ASSERT_TRUE(c.ok()) << c.status();
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  EXPECT_EQ((*c)->address(), std::string(host) + ":4243");
  options_.listen = "no-port";
  EXPECT_EQ(LocalCollector::Start(options_).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(LocalCollectorTest, EarlyExitIsAnErrorQuotingTheLog) {
  options_.binary = Script("echo 'IO error: lock hold by current process' >&2; exit 1");
  absl::StatusOr<std::unique_ptr<LocalCollector>> c = LocalCollector::Start(options_);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(c.status().message().find("lock hold"), std::string::npos) << c.status();
  EXPECT_NE(c.status().message().find("exited with code 1"), std::string::npos) << c.status();
}

TEST_F(LocalCollectorTest, NoPortInTimeIsDeadlineExceededAndTheProcessIsGone) {
  options_.binary = Script("exec sleep 30");
  options_.start_timeout = absl::Milliseconds(300);
  absl::StatusOr<std::unique_ptr<LocalCollector>> c = LocalCollector::Start(options_);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
}

TEST_F(LocalCollectorTest, StopEscalatesToSigkillWhenSigtermIsIgnored) {
  options_.binary = Script("trap '' TERM; echo 1 > $PORT_FILE; while :; do sleep 0.05; done");
  absl::StatusOr<std::unique_ptr<LocalCollector>> c = LocalCollector::Start(options_);
  ASSERT_TRUE(c.ok()) << c.status();
  absl::Time start = absl::Now();
  int status = (*c)->Stop(absl::Milliseconds(300));
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

TEST_F(LocalCollectorTest, PollReportsADeathDuringTheRun) {
  options_.binary = Script("echo 1 > $PORT_FILE; exec sleep 30");
  absl::StatusOr<std::unique_ptr<LocalCollector>> c = LocalCollector::Start(options_);
  ASSERT_TRUE(c.ok()) << c.status();
  kill((*c)->pid(), SIGKILL);
  absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!(*c)->Poll().has_value() && absl::Now() < deadline)
    absl::SleepFor(absl::Milliseconds(10));
  ASSERT_TRUE((*c)->Poll().has_value());
  EXPECT_EQ(WTERMSIG(*(*c)->Poll()), SIGKILL);
}

TEST_F(LocalCollectorTest, RunsInItsOwnProcessGroup) {
  options_.binary = Script("echo 1 > $PORT_FILE; exec sleep 30");
  absl::StatusOr<std::unique_ptr<LocalCollector>> c = LocalCollector::Start(options_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(getpgid((*c)->pid()), (*c)->pid());
  EXPECT_NE(getpgid((*c)->pid()), getpgrp());
}

}  // namespace
}  // namespace memtrace::launch
