#include "agent/stream/failure_log.h"

#include <cstdio>
#include <string>

#include "absl/time/time.h"
#include "agent/stream/stderr_lines.h"
#include "gtest/gtest.h"

namespace memtrace {
namespace {

TEST(FailureLogTest, CountsEveryFailurePerKind) {
  FailureLog log(false);
  log.Report(Failure::kConnect, "x");
  log.Report(Failure::kConnect, "y");
  log.Report(Failure::kQueueFull, "z");
  EXPECT_EQ(log.count(Failure::kConnect), 2u);
  EXPECT_EQ(log.count(Failure::kQueueFull), 1u);
  EXPECT_EQ(log.count(Failure::kSpoolFull), 0u);
}

TEST(FailureLogTest, PrintsOncePerKindWithThePrefix) {
  testing::internal::CaptureStderr();
  FailureLog log(true);
  log.Report(Failure::kConnect, "cannot reach collector a:1");
  log.Report(Failure::kConnect, "cannot reach collector a:1 again");
  log.Report(Failure::kAckTimeout, "no ack");
  ASSERT_TRUE(AgentStderr().Flush(absl::Seconds(10)));  // written by the agent's stderr thread
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("memtrace-agent: cannot reach collector a:1 ("), 0u) << err;
  EXPECT_EQ(err.find("again"), std::string::npos) << err;
  EXPECT_NE(err.find("memtrace-agent: no ack"), std::string::npos) << err;
  size_t lines = 0;
  for (char c : err) lines += c == '\n';
  EXPECT_EQ(lines, 2u);
}

TEST(FailureLogTest, EveryKindHasAName) {
  for (size_t i = 0; i < kFailureKinds; ++i) {
    EXPECT_STRNE(FailureName(static_cast<Failure>(i)), "unknown") << i;
  }
}

}  // namespace
}  // namespace memtrace
