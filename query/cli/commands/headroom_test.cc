#include "query/cli/commands/headroom.h"

#include <sstream>

#include "gtest/gtest.h"
#include "query/cli/commands/fake_analysis_server.h"

namespace memtrace::cli {
namespace {

TEST(HeadroomCommandTest, SendsCapacityAndWindow) {
  FakeAnalysisServer server;
  std::ostringstream out, err;
  CommandIo io{out, err};
  ASSERT_EQ(
      HeadroomCommand().run({"--job", "j", "--capacity", "80GiB", "--recent", "20", "--warmup", "3",
                             "--min-growth", "32MiB", "--collector", server.address()},
                            io),
      kExitOk)
      << err.str();
  const v1::HeadroomParams& p = server.headroom_request.params();
  EXPECT_EQ(p.capacity_bytes(), uint64_t{80} << 30);
  EXPECT_EQ(p.recent_steps(), 20u);
  EXPECT_EQ(p.warmup_steps(), 3u);
  EXPECT_EQ(p.min_growth_bytes(), uint64_t{32} << 20);
}

TEST(HeadroomCommandTest, WithoutCapacityTheSampledTotalIsUsed) {
  FakeAnalysisServer server;
  std::ostringstream out, err;
  CommandIo io{out, err};
  ASSERT_EQ(HeadroomCommand().run({"--job", "j", "--collector", server.address()}, io), kExitOk);
  EXPECT_FALSE(server.headroom_request.params().has_capacity_bytes());
  EXPECT_FALSE(server.headroom_request.subprocesses());
}

TEST(HeadroomCommandTest, SubprocessesAreAskedForAndSaidToBeCompared) {
  FakeAnalysisServer server;
  server.headroom_report.set_job_id("j");
  server.headroom_report.set_subprocesses(true);
  std::ostringstream out, err;
  CommandIo io{out, err};
  ASSERT_EQ(
      HeadroomCommand().run({"--job", "j", "--subprocesses", "--collector", server.address()}, io),
      kExitOk)
      << err.str();
  EXPECT_TRUE(server.headroom_request.subprocesses());
  EXPECT_NE(out.str().find("(forecast: the ranks' subprocesses, each against the device"),
            std::string::npos)
      << out.str();
}

// --recent 5 left every rank fewer than the 8 points a trend is fitted over: all "too short",
// and "no rank is on course to fill its device" about a job that leaks.
TEST(HeadroomCommandTest, RecentBelowTheFittedMinimumIsAUsageError) {
  for (const char* recent : {"1", "7"}) {
    std::ostringstream out, err;
    CommandIo io{out, err};
    EXPECT_EQ(HeadroomCommand().run({"--job", "j", "--recent", recent}, io), kExitUsage) << recent;
    EXPECT_NE(err.str().find("at least 8"), std::string::npos) << err.str();
  }
  FakeAnalysisServer server;
  for (const char* recent : {"0", "8"}) {
    std::ostringstream out, err;
    CommandIo io{out, err};
    EXPECT_EQ(HeadroomCommand().run(
                  {"--job", "j", "--recent", recent, "--collector", server.address()}, io),
              kExitOk)
        << recent << ": " << err.str();
  }
}

TEST(HeadroomCommandTest, BadCapacityIsAUsageError) {
  std::ostringstream out, err;
  CommandIo io{out, err};
  EXPECT_EQ(HeadroomCommand().run({"--job", "j", "--capacity", "big"}, io), kExitUsage);
  EXPECT_NE(err.str().find("--capacity"), std::string::npos) << err.str();
  err.str("");
  EXPECT_EQ(HeadroomCommand().run({"--job", "j", "--capacity", "0"}, io), kExitUsage);
  EXPECT_NE(err.str().find("--capacity: must be more than 0 bytes"), std::string::npos)
      << err.str();
}

}  // namespace
}  // namespace memtrace::cli
