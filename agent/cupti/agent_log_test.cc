#include "agent/cupti/agent_log.h"

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

}  // namespace
}  // namespace cupti
}  // namespace memtrace
