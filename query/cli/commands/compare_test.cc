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

TEST(CompareCommandTest, MinChangeIsAFractionBelowOne) {
  FakeAnalysisServer server;
  for (const char* change : {"nan", "-1", "inf", "1", "2"}) {
    std::ostringstream out, err;
    CommandIo io{out, err};
    EXPECT_EQ(CompareCommand().run({"--job", "a", "--job", "b", "--min-change", change,
                                    "--collector", server.address()},
                                   io),
              kExitUsage)
        << change;
    EXPECT_EQ(err.str(), std::string("memtrace compare: --min-change: '") + change +
                             "' is not a finite number in [0, 1)\n");
  }
  EXPECT_EQ(server.calls, 0);
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
