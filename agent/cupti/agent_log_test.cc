#include "agent/cupti/agent_log.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace memtrace {
namespace cupti {
namespace {

std::string Contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[256];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  return out;
}

TEST(AgentLogTest, PrintsEachKindOnceWithPrefix) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  AgentLog log(f);
  EXPECT_TRUE(log.Once("subscribe", "subscriber taken by kineto"));
  EXPECT_FALSE(log.Once("subscribe", "subscriber taken again"));
  EXPECT_TRUE(log.Once("version", "CUPTI 130001"));
  log.Always("started");
  EXPECT_EQ(Contents(f),
            "memtrace-agent: subscriber taken by kineto\n"
            "memtrace-agent: CUPTI 130001\n"
            "memtrace-agent: started\n");
  std::fclose(f);
}

// Without a file the lines go to stderr through a writer thread: the line why an agent records
// nothing (MEMTRACE_DISABLE=1) was missing from the output of a process that exited at once.
TEST(AgentLogTest, FlushWaitsUntilStderrHasTheLines) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  std::fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  ASSERT_GE(saved, 0);
  ASSERT_EQ(dup2(fileno(f), STDERR_FILENO), STDERR_FILENO);
  AgentLog log;
  EXPECT_TRUE(log.Once("disabled", "disabled by MEMTRACE_DISABLE=1: not recording"));
  const bool flushed = log.Flush(absl::Seconds(5));
  // What the file holds now, before stderr is restored: nothing the writer thread adds later.
  const std::string written = Contents(f);
  dup2(saved, STDERR_FILENO);
  close(saved);
  EXPECT_TRUE(flushed);
  EXPECT_EQ(written, "memtrace-agent: disabled by MEMTRACE_DISABLE=1: not recording\n");
  std::fclose(f);
}

}  // namespace
}  // namespace cupti
}  // namespace memtrace
