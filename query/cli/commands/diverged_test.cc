#include "query/cli/commands/diverged.h"

#include <sstream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "query/cli/commands/fake_analysis_server.h"

namespace memtrace::cli {
namespace {

struct Outcome {
  int code = -1;
  std::string out, err;
};

Outcome Diverged(const FakeAnalysisServer& server, std::vector<std::string> args) {
  std::ostringstream out, err;
  CommandIo io{out, err};
  args.push_back("--collector");
  args.push_back(server.address());
  Outcome r;
  r.code = DivergedCommand().run(args, io);
  r.out = out.str();
  r.err = err.str();
  return r;
}

TEST(DivergedCommandTest, SendsTheFlagsAsParameters) {
  FakeAnalysisServer server;
  Outcome r = Diverged(server, {"--job", "j", "--metric", "peak", "--persistence", "3", "--min-z",
                                "4", "--min-excess", "1GiB", "--warmup", "2", "--absolute",
                                "--attempt", "1", "--axis", "time", "--subprocesses"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const v1::DivergedRequest& q = server.diverged_request;
  EXPECT_EQ(q.job_id(), "j");
  EXPECT_EQ(q.params().metric(), v1::ANALYSIS_METRIC_PEAK);
  EXPECT_EQ(q.params().persistence_steps(), 3u);
  EXPECT_DOUBLE_EQ(q.params().min_z(), 4);
  EXPECT_EQ(q.params().min_excess_bytes(), uint64_t{1} << 30);
  EXPECT_EQ(q.params().warmup_steps(), 2u);
  EXPECT_TRUE(q.params().absolute());
  EXPECT_EQ(q.params().attempt(), 1u);
  EXPECT_EQ(q.axis(), v1::TIMELINE_AXIS_TIME);
  EXPECT_TRUE(q.subprocesses());
}

TEST(DivergedCommandTest, LeavesUnsetParametersUnset) {
  FakeAnalysisServer server;
  ASSERT_EQ(Diverged(server, {"--job", "j"}).code, kExitOk);
  EXPECT_FALSE(server.diverged_request.params().has_persistence_steps());
  EXPECT_FALSE(server.diverged_request.params().has_metric());
  EXPECT_FALSE(server.diverged_request.subprocesses());
}

TEST(DivergedCommandTest, NoDivergenceIsExitZeroAndSaysSo) {
  FakeAnalysisServer server;
  server.diverged_report.set_job_id("j");
  server.diverged_report.set_status(v1::DIVERGENCE_STATUS_NONE_DIVERGED);
  server.diverged_report.set_message("no rank diverged");
  server.diverged_report.set_ranks(8);
  Outcome table = Diverged(server, {"--job", "j"});
  EXPECT_EQ(table.code, kExitOk);
  EXPECT_NE(table.out.find("no rank diverged"), std::string::npos) << table.out;
  Outcome json = Diverged(server, {"--job", "j", "--format", "json"});
  ASSERT_EQ(json.code, kExitOk);
  v1::DivergenceReport parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &parsed).ok()) << json.out;
  EXPECT_EQ(parsed.ranks(), 8u);
}

TEST(DivergedCommandTest, ErrorsAreOneLineWithTheirExitCode) {
  FakeAnalysisServer server;
  Outcome missing = Diverged(server, {});
  EXPECT_EQ(missing.code, kExitUsage);
  EXPECT_EQ(missing.err, "memtrace diverged: --job is required\n");
  EXPECT_EQ(server.calls, 0);
  Outcome bad = Diverged(server, {"--job", "j", "--metric", "max"});
  EXPECT_EQ(bad.code, kExitUsage);
  server.SetError(grpc::Status(grpc::StatusCode::NOT_FOUND, "job \"j\" is not stored"));
  Outcome unknown = Diverged(server, {"--job", "j"});
  EXPECT_EQ(unknown.code, kExitError);
  EXPECT_EQ(unknown.err, "memtrace diverged: job \"j\" is not stored\n");
  EXPECT_EQ(unknown.out, "");
}

TEST(DivergedCommandTest, RefusesThresholdsThatAreNotFinitePositiveNumbers) {
  FakeAnalysisServer server;
  for (const char* z : {"nan", "-1", "0", "inf", "-inf"}) {
    Outcome r = Diverged(server, {"--job", "j", "--min-z", z});
    EXPECT_EQ(r.code, kExitUsage) << z;
    EXPECT_EQ(r.err,
              absl::StrCat("memtrace diverged: --min-z: '", z, "' is not a finite number > 0\n"));
  }
  Outcome zero = Diverged(server, {"--job", "j", "--persistence", "0"});
  EXPECT_EQ(zero.code, kExitUsage);
  EXPECT_EQ(zero.err,
            "memtrace diverged: --persistence: '0' is not an integer from 1 below 2^32\n");
  EXPECT_EQ(server.calls, 0);
}

TEST(DivergedCommandTest, HelpShowsUsageAndEveryFlag) {
  std::ostringstream out, err;
  CommandIo io{out, err};
  EXPECT_EQ(DivergedCommand().run({"--help"}, io), kExitOk);
  for (const char* text : {"Usage: memtrace diverged --job JOB", "--persistence N",
                           "--metric floor|end|peak", "--format table|json", "--axis step|time"}) {
    EXPECT_NE(out.str().find(text), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace memtrace::cli
