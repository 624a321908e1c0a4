#include "query/cli/output.h"

#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "simdjson.h"

namespace memtrace::cli {
namespace {

TEST(FormatBytesTest, UsesBinaryUnitsWithThreeSignificantDigits) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1.00 KiB");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(20ull << 20), "20.0 MiB");
  EXPECT_EQ(FormatBytes(256ull << 20), "256 MiB");
  EXPECT_EQ(FormatBytes(3ull << 30), "3.00 GiB");
  EXPECT_EQ(FormatBytes(80ull << 30), "80.0 GiB");
  EXPECT_EQ(FormatBytes(~0ull), "16.0 EiB");
  // As the analyses' tables print it (it said "1024 KiB").
  EXPECT_EQ(FormatBytes((1ull << 20) - 1), "1.00 MiB");
}

TEST(FormatBytesTest, RoundsUpIntoTheNextPrecisionInsteadOfPrintingTooManyDigits) {
  // 9.999 MiB would print "10.00 MiB" with two decimals; it must switch to one.
  EXPECT_EQ(FormatBytes((10ull << 20) - 1), "10.0 MiB");
  EXPECT_EQ(FormatBytes((100ull << 20) - 1), "100 MiB");
}

TEST(FormatSignedBytesTest, ShowsTheSign) {
  EXPECT_EQ(FormatSignedBytes(0), "0 B");
  EXPECT_EQ(FormatSignedBytes(2 << 20), "+2.00 MiB");
  EXPECT_EQ(FormatSignedBytes(-(1ll << 30)), "-1.00 GiB");
  EXPECT_EQ(FormatSignedBytes(INT64_MIN), "-8.00 EiB");
}

TEST(FormatTimeNsTest, PrintsUtcWithMilliseconds) {
  EXPECT_EQ(FormatTimeNs(1'700'000'000'123'456'789), "2023-11-14 22:13:20.123");
  EXPECT_EQ(FormatTimeNs(0), "-");
}

TEST(FormatDurationNsTest, RoundsToMilliseconds) {
  EXPECT_EQ(FormatDurationNs(100'500'400'000), "1m40.5s");
  EXPECT_EQ(FormatDurationNs(250'000'999), "250ms");
  EXPECT_EQ(FormatDurationNs(0), "0");
  // An hour and 30 s is not "1h30.292s" (an hour and a half, read quickly).
  EXPECT_EQ(FormatDurationNs(3'630'292'000'000), "1h0m30.292s");
  EXPECT_EQ(FormatDurationNs(3'690'000'000'000), "1h1m30s");
  EXPECT_EQ(FormatDurationNs(7'200'000'000'000), "2h");
}

TEST(ParseOutputFormatTest, AcceptsTheThreeFormatsAndNamesABadValue) {
  EXPECT_EQ(*ParseOutputFormat("table"), OutputFormat::kTable);
  EXPECT_EQ(*ParseOutputFormat("json"), OutputFormat::kJson);
  EXPECT_EQ(*ParseOutputFormat("csv"), OutputFormat::kCsv);
  absl::StatusOr<OutputFormat> bad = ParseOutputFormat("yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'yaml'"), std::string::npos);
}

Table SampleTable() {
  Table table({{"rank", ColumnType::kInt},
               {"host", ColumnType::kText},
               {"live", ColumnType::kBytes},
               {"delta", ColumnType::kSignedBytes},
               {"complete", ColumnType::kBool}});
  table.AddRow({uint64_t{0}, std::string("sim-node-0"), uint64_t{3ull << 30}, int64_t{0}, true});
  table.AddRow({uint64_t{12}, std::string("a \"quoted\", host"), uint64_t{512},
                int64_t{-(256ll << 20)}, false});
  table.AddRow({uint64_t{3}});  // short row: padded with empty cells
  return table;
}

TEST(WriteTextTest, AlignsColumnsAndShowsHumanUnits) {
  std::ostringstream out;
  WriteText(SampleTable(), out);
  EXPECT_EQ(out.str(),
            "rank  host                  live     delta  complete\n"
            "   0  sim-node-0        3.00 GiB       0 B  yes\n"
            "  12  a \"quoted\", host     512 B  -256 MiB  no\n"
            "   3  -                        -         -  -\n");
}

TEST(WriteCsvTest, QuotesFieldsWithCommasAndQuotesAndKeepsRawNumbers) {
  std::ostringstream out;
  WriteCsv(SampleTable(), out);
  EXPECT_EQ(out.str(),
            "rank,host,live,delta,complete\n"
            "0,sim-node-0,3221225472,0,true\n"
            "12,\"a \"\"quoted\"\", host\",512,-268435456,false\n"
            "3,,,,\n");
}

TEST(WriteJsonTest, ProducesParseableObjectsWithRawValues) {
  std::ostringstream out;
  WriteJson(SampleTable(), out);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(out.str()).get(doc), simdjson::SUCCESS) << out.str();
  simdjson::dom::array rows = doc.get_array();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(uint64_t(rows.at(0)["live"]), 3ull << 30);
  EXPECT_EQ(std::string_view(rows.at(1)["host"]), "a \"quoted\", host");
  EXPECT_EQ(int64_t(rows.at(1)["delta"]), -(256ll << 20));
  EXPECT_EQ(bool(rows.at(0)["complete"]), true);
  EXPECT_TRUE(rows.at(2)["host"].is_null());
}

TEST(WriteJsonTest, EscapesControlCharacters) {
  Table table({{"text", ColumnType::kText}});
  table.AddRow({std::string("a\nb\x01")});
  std::ostringstream out;
  WriteJson(table, out);
  EXPECT_EQ(out.str(), "[\n  {\"text\": \"a\\nb\\u0001\"}\n]\n");
}

// A job id with a newline stays on its row (JSON and CSV quote it; the table escapes it).
TEST(WriteTextTest, EscapesControlCharactersSoEachRowIsOneLine) {
  Table table({{"job", ColumnType::kText}, {"ranks", ColumnType::kInt}});
  table.AddRow({std::string("new\nline\x1b"), uint64_t{3}});
  std::ostringstream out;
  WriteText(table, out);
  EXPECT_EQ(out.str(),
            "job            ranks\n"
            "new\\nline\\x1b      3\n");
}

TEST(WriteJsonTest, WritesAnEmptyArrayForNoRows) {
  std::ostringstream out;
  WriteJson(Table({{"a", ColumnType::kText}}), out);
  EXPECT_EQ(out.str(), "[]\n");
}

}  // namespace
}  // namespace memtrace::cli
