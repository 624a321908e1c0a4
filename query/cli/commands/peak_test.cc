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
    if (by == v1::PEAK_BY_PHASE) {
      EXPECT_NE(out.str().find("rollout"), std::string::npos) << out.str();
      EXPECT_NE(out.str().find("actor_update"), std::string::npos) << out.str();
    }
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
