#include "query/cli/commands/growth.h"

#include <sstream>

#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "query/cli/commands/fake_analysis_server.h"

namespace memtrace::cli {
namespace {

int Growth(const FakeAnalysisServer& server, std::vector<std::string> args, std::string* out_text,
           std::string* err_text = nullptr) {
  std::ostringstream out, err;
  CommandIo io{out, err};
  args.push_back("--collector=" + server.address());
  int code = GrowthCommand().run(args, io);
  *out_text = out.str();
  if (err_text != nullptr) *err_text = err.str();
  return code;
}

TEST(GrowthCommandTest, ByTakesEveryGroupingOfTheService) {
  FakeAnalysisServer server;
  std::string out;
  const std::vector<std::pair<std::string, v1::GrowthBy>> cases = {
      {"tag", v1::GROWTH_BY_TAG},
      {"rank", v1::GROWTH_BY_RANK},
      {"tag,rank", v1::GROWTH_BY_TAG_RANK},
      {"source", v1::GROWTH_BY_SOURCE},
      {"source,rank", v1::GROWTH_BY_SOURCE_RANK}};
  for (const auto& [name, by] : cases) {
    ASSERT_EQ(Growth(server, {"--job", "j", "--by", name}, &out), kExitOk) << name;
    EXPECT_EQ(server.growth_request.params().by(), by) << name;
  }
  std::string err;
  EXPECT_EQ(Growth(server, {"--job", "j", "--by", "module"}, &out, &err), kExitUsage);
  EXPECT_NE(err.find("'module' is not one of tag, rank, tag,rank, source, source,rank"),
            std::string::npos)
      << err;
}

TEST(GrowthCommandTest, SendsWindowAndThresholds) {
  FakeAnalysisServer server;
  std::string out;
  ASSERT_EQ(Growth(server,
                   {"--job", "j", "--warmup", "1", "--window", "30", "--min-growth", "128MiB",
                    "--min-z", "2", "--by", "rank", "--metric", "end", "--subprocesses"},
                   &out),
            kExitOk);
  const v1::GrowthParams& p = server.growth_request.params();
  EXPECT_EQ(p.warmup_steps(), 1u);
  EXPECT_EQ(p.window_steps(), 30u);
  EXPECT_EQ(p.min_growth_bytes(), 128u << 20);
  EXPECT_DOUBLE_EQ(p.min_trend_z(), 2);
  EXPECT_EQ(p.rank_metric(), v1::ANALYSIS_METRIC_END);
  EXPECT_TRUE(server.growth_request.subprocesses());
  // --metric shapes --by rank's series only: elsewhere it is refused, not ignored.
  const int calls = server.calls;
  std::string err;
  EXPECT_EQ(Growth(server, {"--job", "j", "--metric", "peak"}, &out, &err), kExitUsage);
  EXPECT_EQ(err, "memtrace growth: --metric applies to --by rank only\n");
  EXPECT_EQ(server.calls, calls);
}

// --window 3 was accepted and answered "nothing to fit" for every series, as headroom's
// --recent 3 is refused.
TEST(GrowthCommandTest, AWindowBelowTheFittedMinimumIsAUsageError) {
  FakeAnalysisServer server;
  std::string out, err;
  for (const char* window : {"1", "7"}) {
    EXPECT_EQ(Growth(server, {"--job", "j", "--window", window}, &out, &err), kExitUsage) << window;
    EXPECT_NE(err.find("give at least 8, or 0 for all steps after warm-up"), std::string::npos)
        << err;
  }
  EXPECT_EQ(server.calls, 0);
  for (const char* window : {"0", "8"}) {
    EXPECT_EQ(Growth(server, {"--job", "j", "--window", window}, &out, &err), kExitOk) << window;
  }
}

TEST(GrowthCommandTest, RefusesATrendThresholdThatIsNotAFinitePositiveNumber) {
  FakeAnalysisServer server;
  std::string out, err;
  for (const char* z : {"nan", "inf", "-2", "0"}) {
    EXPECT_EQ(Growth(server, {"--job", "j", "--min-z", z}, &out, &err), kExitUsage) << z;
    EXPECT_EQ(err,
              std::string("memtrace growth: --min-z: '") + z + "' is not a finite number > 0\n");
  }
  EXPECT_EQ(server.calls, 0);
}

TEST(GrowthCommandTest, PrintsTheGrowingGroupsAsTableOrJson) {
  FakeAnalysisServer server;
  v1::GroupGrowth* g = server.growth_report.add_groups();
  g->set_name("leak:cache");
  g->set_rank(5);
  g->set_ranks_growing(1);
  g->set_total_bytes_per_step(256 << 20);
  g->add_ranks()->set_rank(5);
  server.growth_report.set_job_id("j");
  std::string table, json;
  ASSERT_EQ(Growth(server, {"--job", "j"}, &table), kExitOk);
  EXPECT_NE(table.find("leak:cache"), std::string::npos) << table;
  ASSERT_EQ(Growth(server, {"--job", "j", "--format", "json"}, &json), kExitOk);
  v1::GrowthReport parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok()) << json;
  ASSERT_EQ(parsed.groups_size(), 1);
  EXPECT_EQ(parsed.groups(0).name(), "leak:cache");
  EXPECT_EQ(parsed.groups(0).rank(), 5u);
}

}  // namespace
}  // namespace memtrace::cli
