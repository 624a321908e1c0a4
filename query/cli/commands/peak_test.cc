#include "query/cli/commands/peak.h"

#include <sstream>

#include "gtest/gtest.h"
#include "query/cli/commands/fake_analysis_server.h"

namespace memtrace::cli {
namespace {

TEST(PeakCommandTest, SendsTheGroupingAndShowsThePhases) {
  FakeAnalysisServer server;
  server.peak_report.set_job_id("j");
  server.peak_report.add_summaries()->set_group("rollout");
  server.peak_report.add_summaries()->set_group("actor_update");
  for (const auto& [name, by] :
       std::vector<std::pair<std::string, v1::PeakBy>>{{"phase", v1::PEAK_BY_PHASE},
                                                       {"tag", v1::PEAK_BY_TAG},
                                                       {"source", v1::PEAK_BY_SOURCE},
                                                       {"rank", v1::PEAK_BY_RANK}}) {
    std::ostringstream out, err;
    CommandIo io{out, err};
    ASSERT_EQ(
        PeakCommand().run(
            {"--job", "j", "--by", name, "--warmup", "2", "--collector", server.address()}, io),
        kExitOk)
        << err.str();
    EXPECT_EQ(server.peak_request.params().by(), by);
    EXPECT_EQ(server.peak_request.params().warmup_steps(), 2u);
    EXPECT_FALSE(server.peak_request.subprocesses());
    if (by == v1::PEAK_BY_PHASE) {
      EXPECT_NE(out.str().find("rollout"), std::string::npos) << out.str();
      EXPECT_NE(out.str().find("actor_update"), std::string::npos) << out.str();
    }
  }
}

TEST(PeakCommandTest, SubprocessesAreAskedFor) {
  FakeAnalysisServer server;
  std::ostringstream out, err;
  CommandIo io{out, err};
  ASSERT_EQ(
      PeakCommand().run(
          {"--job", "j", "--by", "rank", "--subprocesses", "--collector", server.address()}, io),
      kExitOk)
      << err.str();
  EXPECT_TRUE(server.peak_request.subprocesses());
}

// A job that recorded no phases has no by-phase answer: the default asks by rank then, and says
// so; --by phase keeps the empty answer.
TEST(PeakCommandTest, WithoutPhasesTheDefaultAnswersByRank) {
  FakeAnalysisServer server;
  server.peak_report.set_job_id("j");
  server.peak_report.set_ranks(2);
  {
    std::ostringstream out, err;
    CommandIo io{out, err};
    ASSERT_EQ(PeakCommand().run({"--job", "j", "--collector", server.address()}, io), kExitOk);
    EXPECT_EQ(server.calls, 2);
    EXPECT_EQ(server.peak_request.params().by(), v1::PEAK_BY_RANK);
    EXPECT_NE(err.str().find("has no phase in its steps so far: peak by rank"), std::string::npos)
        << err.str();
  }
  for (const std::vector<std::string>& asked :
       {std::vector<std::string>{"--by", "phase"}, std::vector<std::string>{"--warmup", "3"}}) {
    server.calls = 0;
    std::vector<std::string> args = {"--job", "j", "--collector", server.address()};
    args.insert(args.end(), asked.begin(), asked.end());
    std::ostringstream out, err;
    CommandIo io{out, err};
    ASSERT_EQ(PeakCommand().run(args, io), kExitOk);
    EXPECT_EQ(server.calls, 1) << asked[0];
    EXPECT_EQ(server.peak_request.params().by(), v1::PEAK_BY_PHASE) << asked[0];
    EXPECT_EQ(err.str(), "") << asked[0];
  }
}

TEST(PeakCommandTest, JobIsRequired) {
  std::ostringstream out, err;
  CommandIo io{out, err};
  EXPECT_EQ(PeakCommand().run({"--by", "phase"}, io), kExitUsage);
  EXPECT_EQ(err.str(), "memtrace peak: --job is required\n");
}

}  // namespace
}  // namespace memtrace::cli
