#include "query/cli/commands/analysis_command.h"

#include <sstream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/memtrace/v1/analysis.pb.h"

namespace memtrace::cli {
namespace {

TEST(AnalysisFlagsTest, FormatTakesTableOrJsonOnly) {
  std::ostringstream out, err;
  CommandIo io{out, err};
  FlagSet flags;
  AnalysisOptions options;
  AddAnalysisFlags(io, flags, &options);
  ASSERT_TRUE(flags.Parse({"--format", "json"}).ok());
  EXPECT_TRUE(options.json);
  ASSERT_TRUE(flags.Parse({"--format=table"}).ok());
  EXPECT_FALSE(options.json);
  absl::StatusOr<FlagSet::Parsed> csv = flags.Parse({"--format", "csv"});
  ASSERT_FALSE(csv.ok());
  EXPECT_NE(csv.status().message().find("'csv' is not one of table, json"), std::string::npos)
      << csv.status();
  EXPECT_NE(flags.Describe().find("--format table|json"), std::string::npos);
  EXPECT_EQ(options.collector, kDefaultCollector);
}

TEST(AnalysisFlagsTest, TypedFlagsSetTheirFieldAndRejectBadValues) {
  FlagSet flags;
  v1::HeadroomParams p;
  AddBytesFlag(flags, "capacity", "h", [&p](uint64_t v) { p.set_capacity_bytes(v); });
  AddUint32Flag(flags, "recent", "N", "h", [&p](uint32_t v) { p.set_recent_steps(v); });
  AddDoubleFlag(flags, "z", "Z", "h", kPositiveNumber, [&p](double v) { p.set_min_trend_z(v); });
  ASSERT_TRUE(flags.Parse({"--capacity", "80GiB", "--recent", "20", "--z", "2.5"}).ok());
  EXPECT_EQ(p.capacity_bytes(), uint64_t{80} << 30);
  EXPECT_EQ(p.recent_steps(), 20u);
  EXPECT_DOUBLE_EQ(p.min_trend_z(), 2.5);
  EXPECT_FALSE(flags.Parse({"--recent", "-1"}).ok());
  EXPECT_FALSE(flags.Parse({"--capacity", "lots"}).ok());
  EXPECT_FALSE(flags.Parse({"--z", "x"}).ok());
}

TEST(AnalysisFlagsTest, NumberFlagsTakeFiniteValuesInTheirRangeOnly) {
  double fraction = -1;
  FlagSet flags;
  AddDoubleFlag(flags, "f", "F", "h", kFractionBelowOne, [&fraction](double v) { fraction = v; });
  for (const char* bad : {"nan", "inf", "-0.1", "1", "1.5"}) {
    absl::StatusOr<FlagSet::Parsed> parsed = flags.Parse({"--f", bad});
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().message(),
              absl::StrCat("-f: '", bad, "' is not a finite number in [0, 1)"));  // one letter: -f
  }
  ASSERT_TRUE(flags.Parse({"--f", "0"}).ok());
  EXPECT_EQ(fraction, 0);
  ASSERT_TRUE(flags.Parse({"--f", "0.99"}).ok());
  EXPECT_DOUBLE_EQ(fraction, 0.99);
  EXPECT_EQ(kPositiveNumber.Describe(), "> 0");
}

TEST(ReportJsonTest, IncludesDefaultsAndParsesBackIntoTheSameMessage) {
  v1::DivergenceReport report;
  report.set_job_id("j");
  report.set_status(v1::DIVERGENCE_STATUS_NONE_DIVERGED);
  report.set_ranks(8);
  const std::string json = ReportJson(report);
  EXPECT_NE(json.find("\"status\": \"DIVERGENCE_STATUS_NONE_DIVERGED\""), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"steps_compared\": 0"), std::string::npos) << json;
  EXPECT_EQ(json.back(), '\n');
  v1::DivergenceReport parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok());
  EXPECT_EQ(parsed.SerializeAsString(), report.SerializeAsString());
}

}  // namespace
}  // namespace memtrace::cli
