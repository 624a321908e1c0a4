#include "query/cli/commands/live.h"

#include <sstream>

#include "gtest/gtest.h"
#include "query/cli/commands/fake_analysis_server.h"

namespace memtrace::cli {
namespace {

int Live(const FakeAnalysisServer& server, std::vector<std::string> args, std::string* out_text,
         std::string* err_text) {
  std::ostringstream out, err;
  CommandIo io{out, err};
  args.push_back("--collector=" + server.address());
  int code = LiveCommand().run(args, io);
  *out_text = out.str();
  *err_text = err.str();
  return code;
}

TEST(LiveCommandTest, EachMomentBecomesTheRequestsMoment) {
  FakeAnalysisServer server;
  std::string out, err;
  ASSERT_EQ(Live(server, {"--job", "j", "--rank", "2", "--at-oom", "--top", "5"}, &out, &err),
            kExitOk)
      << err;
  EXPECT_EQ(server.live_request.moment_case(), v1::LiveRequest::kAtOom);
  EXPECT_EQ(server.live_request.rank(), 2u);
  EXPECT_EQ(server.live_request.params().top_n(), 5u);
  ASSERT_EQ(Live(server, {"--job", "j", "--rank", "2", "--at-step", "40"}, &out, &err), kExitOk);
  EXPECT_EQ(server.live_request.at_step(), 40);
  ASSERT_EQ(Live(server, {"--job", "j", "--rank", "2", "--at", "1700000000000000000"}, &out, &err),
            kExitOk);
  EXPECT_EQ(server.live_request.at_ns(), 1'700'000'000'000'000'000);
  ASSERT_EQ(Live(server, {"--job", "j", "--rank", "2", "--at-peak"}, &out, &err), kExitOk);
  EXPECT_EQ(server.live_request.moment_case(), v1::LiveRequest::kAtPeak);
  ASSERT_EQ(Live(server, {"--job", "j", "--rank", "2", "--by", "tag,source", "--order", "excess"},
                 &out, &err),
            kExitOk);
  EXPECT_EQ(server.live_request.moment_case(), v1::LiveRequest::MOMENT_NOT_SET);
  EXPECT_EQ(server.live_request.params().by(), v1::LIVE_GROUP_BY_TAG_SOURCE);
  EXPECT_EQ(server.live_request.params().order(), v1::LIVE_ORDER_EXCESS);
}

TEST(LiveCommandTest, RankIsRequiredAndMomentsExcludeEachOther) {
  FakeAnalysisServer server;
  std::string out, err;
  EXPECT_EQ(Live(server, {"--job", "j", "--at-oom"}, &out, &err), kExitUsage);
  EXPECT_EQ(err, "memtrace live: --rank is required\n");
  EXPECT_EQ(Live(server, {"--job", "j", "--rank", "1", "--at-oom", "--at-step", "3"}, &out, &err),
            kExitUsage);
  EXPECT_EQ(err, "memtrace live: give at most one of --at, --at-step, --at-oom and --at-peak\n");
  EXPECT_EQ(Live(server, {"--job", "j", "--rank", "1", "--at-peak", "--at", "now"}, &out, &err),
            kExitUsage);
  // --top 0 printed an empty table.
  EXPECT_EQ(Live(server, {"--job", "j", "--rank", "1", "--top", "0"}, &out, &err), kExitUsage);
  EXPECT_NE(err.find("--top"), std::string::npos) << err;
  EXPECT_EQ(server.calls, 0);
}

TEST(LiveCommandTest, NoOomIsAnErrorWithTheCollectorsReason) {
  FakeAnalysisServer server;
  server.SetError(grpc::Status(grpc::StatusCode::NOT_FOUND, "rank 1 has no OOM event"));
  std::string out, err;
  EXPECT_EQ(Live(server, {"--job", "j", "--rank", "1", "--at-oom"}, &out, &err), kExitError);
  EXPECT_EQ(err, "memtrace live: rank 1 has no OOM event\n");
}

TEST(LiveCommandTest, TableShowsTheGroups) {
  FakeAnalysisServer server;
  server.live_report.set_job_id("j");
  server.live_report.set_rank(2);
  v1::LiveGroup* g = server.live_report.add_groups();
  g->set_tag("leak:cache");
  g->set_bytes(3ull << 30);
  std::string out, err;
  ASSERT_EQ(Live(server, {"--job", "j", "--rank", "2"}, &out, &err), kExitOk);
  EXPECT_NE(out.find("leak:cache"), std::string::npos) << out;
  EXPECT_NE(out.find("3.00 GiB"), std::string::npos) << out;
}

}  // namespace
}  // namespace memtrace::cli
