#include "query/cli/commands/leaks.h"

#include <sstream>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "query/cli/commands/fake_analysis_server.h"

namespace memtrace::cli {
namespace {

int Leaks(const FakeAnalysisServer& server, std::vector<std::string> args, std::string* err_text) {
  std::ostringstream out, err;
  CommandIo io{out, err};
  io.now = absl::FromUnixSeconds(1'700'000'000);
  args.push_back("--collector=" + server.address());
  int code = LeaksCommand().run(args, io);
  *err_text = err.str();
  return code;
}

TEST(LeaksCommandTest, SendsRankTimeAndCandidateLimits) {
  FakeAnalysisServer server;
  std::string err;
  ASSERT_EQ(Leaks(server,
                  {"--job", "j", "--rank", "5", "--at", "now-10s", "--min-boundaries", "4", "--top",
                   "3", "--min-growth", "1GiB", "--warmup", "7"},
                  &err),
            kExitOk)
      << err;
  const v1::LeaksRequest& q = server.leaks_request;
  EXPECT_EQ(q.job_id(), "j");
  ASSERT_TRUE(q.has_rank());
  EXPECT_EQ(q.rank(), 5u);
  EXPECT_EQ(q.at_ns(), int64_t{1'699'999'990} * 1'000'000'000);
  EXPECT_EQ(q.params().min_boundaries(), 4u);
  EXPECT_EQ(q.params().top_n(), 3u);
  EXPECT_EQ(q.params().min_growth_bytes(), uint64_t{1} << 30);
  EXPECT_EQ(q.params().warmup_steps(), 7u);
}

TEST(LeaksCommandTest, EveryRankAndEverythingStoredByDefault) {
  FakeAnalysisServer server;
  std::string err;
  ASSERT_EQ(Leaks(server, {"--job", "j"}, &err), kExitOk) << err;
  EXPECT_FALSE(server.leaks_request.has_rank());
  EXPECT_FALSE(server.leaks_request.has_at_ns());
  EXPECT_FALSE(server.leaks_request.subprocesses());
  ASSERT_EQ(Leaks(server, {"--job", "j", "--subprocesses"}, &err), kExitOk) << err;
  EXPECT_TRUE(server.leaks_request.subprocesses());
}

// --top 0 left the candidates out without a word; live's --top starts at 1 too.
TEST(LeaksCommandTest, TopStartsAtOne) {
  FakeAnalysisServer server;
  std::string err;
  EXPECT_EQ(Leaks(server, {"--job", "j", "--top", "0"}, &err), kExitUsage);
  EXPECT_NE(err.find("'0' is not an integer from 1"), std::string::npos) << err;
  EXPECT_EQ(Leaks(server, {"--job", "j", "--top", "1"}, &err), kExitOk) << err;
}

TEST(LeaksCommandTest, BadTimeIsAUsageErrorNamingTheFlag) {
  FakeAnalysisServer server;
  std::string err;
  EXPECT_EQ(Leaks(server, {"--job", "j", "--at", "yesterday"}, &err), kExitUsage);
  EXPECT_EQ(err.rfind("memtrace leaks: --at: ", 0), 0u) << err;
  EXPECT_EQ(server.calls, 0);
}

}  // namespace
}  // namespace memtrace::cli
