#include "query/cli/commands/compare.h"

#include <sstream>

#include "gtest/gtest.h"
#include "query/cli/commands/fake_analysis_server.h"

namespace memtrace::cli {
namespace {

TEST(CompareCommandTest, SendsBothJobsInOrder) {
  FakeAnalysisServer server;
  server.compare_report.set_job_a("before");
  server.compare_report.set_job_b("after");
  std::ostringstream out, err;
  CommandIo io{out, err};
  ASSERT_EQ(CompareCommand().run({"--job", "before", "--job", "after", "--min-change", "0.1",
                                  "--collector", server.address()},
                                 io),
            kExitOk)
      << err.str();
  EXPECT_EQ(server.compare_request.job_a(), "before");
  EXPECT_EQ(server.compare_request.job_b(), "after");
  EXPECT_DOUBLE_EQ(server.compare_request.params().min_change_fraction(), 0.1);
  EXPECT_NE(out.str().find("before"), std::string::npos) << out.str();
}

TEST(CompareCommandTest, NeedsExactlyTwoJobs) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--job", "a"},
        std::vector<std::string>{"--job", "a", "--job", "b", "--job", "c"}}) {
    std::ostringstream out, err;
    CommandIo io{out, err};
    EXPECT_EQ(CompareCommand().run(args, io), kExitUsage);
    EXPECT_NE(err.str().find("give two jobs: --job A --job B"), std::string::npos) << err.str();
  }
}

}  // namespace
}  // namespace memtrace::cli
