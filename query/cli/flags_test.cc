#include "query/cli/flags.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace memtrace::cli {
namespace {

struct Values {
  std::string job;
  int64_t count = 0;
  std::optional<uint32_t> rank;
  bool wide = false;
  absl::Duration timeout = absl::Seconds(10);
};

FlagSet MakeFlags(Values* v) {
  FlagSet flags;
  flags.AddString("job", "JOB", "the job id", &v->job);
  flags.AddInt("count", "N", "how many", &v->count);
  flags.AddOptionalUint32("rank", "R", "only this rank", &v->rank);
  flags.AddBool("wide", "one column per rank", &v->wide);
  flags.AddDuration("timeout", "DURATION", "RPC deadline", &v->timeout);
  return flags;
}

TEST(FlagSetTest, ParsesSpaceAndEqualsFormsAndKeepsPositionals) {
  Values v;
  absl::StatusOr<FlagSet::Parsed> parsed = MakeFlags(&v).Parse(
      {"first", "--job", "j1", "--count=-3", "-rank", "7", "--wide", "--timeout=250ms", "last"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(v.job, "j1");
  EXPECT_EQ(v.count, -3);
  EXPECT_EQ(v.rank, 7u);
  EXPECT_TRUE(v.wide);
  EXPECT_EQ(v.timeout, absl::Milliseconds(250));
  EXPECT_FALSE(parsed->help);
  EXPECT_EQ(parsed->positional, (std::vector<std::string>{"first", "last"}));
}

TEST(FlagSetTest, TakesTheNextArgumentAsValueEvenWhenItStartsWithADash) {
  Values v;
  ASSERT_TRUE(MakeFlags(&v).Parse({"--job", "-5m"}).ok());
  EXPECT_EQ(v.job, "-5m");
  ASSERT_TRUE(MakeFlags(&v).Parse({"--count", "-3"}).ok());
  EXPECT_EQ(v.count, -3);
  Values w;
  ASSERT_TRUE(MakeFlags(&w).Parse({"--job", "--not-a-flag"}).ok());
  EXPECT_EQ(w.job, "--not-a-flag");
}

// A flag whose value was left out took the next flag as its value: "--job --wide" asked for
// job "--wide" (exit 1 from the collector, not a usage error), "--job --count 3" blamed '3'.
TEST(FlagSetTest, AFlagIsNoOtherFlagsValue) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--job", "--wide"},
                                             {"--job", "-wide"},
                                             {"--job", "--count", "3"},
                                             {"--job", "--count=3"}}) {
    Values v;
    absl::StatusOr<FlagSet::Parsed> parsed = MakeFlags(&v).Parse(args);
    ASSERT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << args[1];
    EXPECT_EQ(parsed.status().message(), "--job needs a value (JOB), not the flag " + args[1]);
  }
  // Said with '=', it is the value.
  Values v;
  ASSERT_TRUE(MakeFlags(&v).Parse({"--job=--wide"}).ok());
  EXPECT_EQ(v.job, "--wide");
  // Help asked for in a value's place is help.
  absl::StatusOr<FlagSet::Parsed> help = MakeFlags(&v).Parse({"--rank", "--help"});
  ASSERT_TRUE(help.ok()) << help.status();
  EXPECT_TRUE(help->help);
}

TEST(FlagSetTest, DoubleDashEndsFlags) {
  Values v;
  absl::StatusOr<FlagSet::Parsed> parsed = MakeFlags(&v).Parse({"--", "--job", "x"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(v.job, "");
  EXPECT_EQ(parsed->positional, (std::vector<std::string>{"--job", "x"}));
}

TEST(FlagSetTest, ReportsHelp) {
  Values v;
  absl::StatusOr<FlagSet::Parsed> parsed = MakeFlags(&v).Parse({"--rank", "abc", "-h"});
  // The bad --rank comes first and is reported first.
  EXPECT_FALSE(parsed.ok());
  parsed = MakeFlags(&v).Parse({"--help", "--rank", "abc"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->help);
}

TEST(FlagSetTest, NamesTheFlagAndValueOfEachError) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--rank", "abc"}, "--rank: 'abc' is not a non-negative integer below 2^32"},
           {{"--rank", "-1"}, "--rank: '-1' is not a non-negative integer below 2^32"},
           {{"--rank", "4294967296"},
            "--rank: '4294967296' is not a non-negative integer below 2^32"},
           {{"--count", "1.5"}, "--count: '1.5' is not an integer"},
           {{"--wide=maybe"}, "--wide: 'maybe' is not true or false"},
           {{"--timeout", "soon"}, "--timeout: 'soon' is not a duration (e.g. 10s, 500ms, 2m)"},
           {{"--timeout", "0s"}, "--timeout: '0s' is not a positive duration"},
           {{"--bogus"}, "unknown flag --bogus"},
           {{"--job"}, "--job needs a value (JOB)"},
           // An unset shell variable ("--job $JOB") must not read as "no --job": the default.
           {{"--job", ""}, "--job: empty value"},
           {{"--job="}, "--job: empty value"},
       }) {
    Values v;
    absl::StatusOr<FlagSet::Parsed> parsed = MakeFlags(&v).Parse(c.args);
    ASSERT_FALSE(parsed.ok()) << c.args[0];
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), c.message);
  }
}

TEST(FlagSetTest, RefusesASingleValuedFlagGivenTwice) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--job", "a", "--job", "b"}, {"--job=a", "-job", "a"}, {"--wide", "--wide=false"}}) {
    Values v;
    absl::StatusOr<FlagSet::Parsed> parsed = MakeFlags(&v).Parse(args);
    ASSERT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << args[0];
    EXPECT_NE(parsed.status().message().find("given more than once"), std::string::npos)
        << parsed.status();
  }
}

// Found by a user: `export -o a.json --output b.json` wrote b.json without a word, and `-o a
// -o b` was refused naming "--o".
TEST(FlagSetTest, AnAliasIsTheSameFlag) {
  std::string output;
  FlagSet flags;
  flags.AddString("o", "FILE", "output file", &output);
  flags.AddAlias("output", "o");
  ASSERT_TRUE(flags.Parse({"--output", "b.json"}).ok());
  EXPECT_EQ(output, "b.json");
  EXPECT_EQ(flags.Parse({"--output", ""}).status().message(), "--output: empty value");
  EXPECT_EQ(flags.Parse({"-o", "a.json", "--output", "b.json"}).status().message(),
            "-o and --output given: they are one flag, which takes one value");
  EXPECT_EQ(flags.Parse({"-o", "a.json", "-o", "b.json"}).status().message(),
            "-o given more than once (it takes one value)");
  EXPECT_EQ(flags.Parse({"-o"}).status().message(), "-o needs a value (FILE)");
  EXPECT_EQ(flags.Parse({"-o", ""}).status().message(), "-o: empty value");
  EXPECT_NE(flags.Describe().find("--output FILE   the same as -o"), std::string::npos)
      << flags.Describe();
}

TEST(FlagSetTest, RepeatableFlagsSeeEveryValueInOrder) {
  std::vector<std::string> jobs;
  FlagSet flags;
  flags.AddRepeatable("job", "JOB", "a job", [&jobs](absl::string_view v) {
    jobs.emplace_back(v);
    return absl::OkStatus();
  });
  ASSERT_TRUE(flags.Parse({"--job", "a", "--job=b"}).ok());
  EXPECT_EQ(jobs, (std::vector<std::string>{"a", "b"}));
}

TEST(FlagSetTest, DescribesFlagsInRegistrationOrderAligned) {
  Values v;
  EXPECT_EQ(MakeFlags(&v).Describe(),
            "  --job JOB            the job id\n"
            "  --count N            how many\n"
            "  --rank R             only this rank\n"
            "  --wide               one column per rank\n"
            "  --timeout DURATION   RPC deadline\n");
}

TEST(FlagSetTest, DescribesAOneLetterFlagWithOneDashAndParsesBoth) {
  std::string out;
  FlagSet flags;
  flags.AddString("o", "FILE", "output file", &out);
  EXPECT_EQ(flags.Describe(), "  -o FILE   output file\n");
  ASSERT_TRUE(flags.Parse({"-o", "a"}).ok());
  EXPECT_EQ(out, "a");
  ASSERT_TRUE(flags.Parse({"--o", "b"}).ok());
  EXPECT_EQ(out, "b");
}

TEST(ParseBytesTest, AcceptsIntegersAndBinaryUnits) {
  EXPECT_EQ(*ParseBytes("1048576"), 1048576u);
  EXPECT_EQ(*ParseBytes("256MiB"), 256ull << 20);
  EXPECT_EQ(*ParseBytes("256M"), 256ull << 20);
  EXPECT_EQ(*ParseBytes("1.5GiB"), 3ull << 29);
  EXPECT_EQ(*ParseBytes("64K"), 64ull << 10);
  EXPECT_EQ(*ParseBytes("2TiB"), 2ull << 40);
  EXPECT_EQ(*ParseBytes("7B"), 7u);
}

TEST(ParseBytesTest, RejectsNegativeUnknownUnitsAndOverflow) {
  for (const char* text : {"", "-5", "MiB", "5 MiB", "5mb", "5PiB", "1.2.3M", "99999999999T"}) {
    absl::StatusOr<uint64_t> bytes = ParseBytes(text);
    EXPECT_FALSE(bytes.ok()) << text;
    EXPECT_EQ(bytes.status().message(),
              absl::StrCat("'", text,
                           "' is not a byte count (e.g. 1048576, 256MiB, 1.5GiB; units B, K/KiB, "
                           "M/MiB, G/GiB, T/TiB)"));
  }
}

TEST(ParseRankListTest, ReadsListsAndRanges) {
  EXPECT_EQ(*ParseRankList("0,1,5"), (std::set<uint32_t>{0, 1, 5}));
  EXPECT_EQ(*ParseRankList("2-4, 7"), (std::set<uint32_t>{2, 3, 4, 7}));
  EXPECT_EQ(*ParseRankList("1000000"), (std::set<uint32_t>{1000000}));
  EXPECT_FALSE(ParseRankList("a").ok());
  EXPECT_FALSE(ParseRankList("5-2").ok());
  EXPECT_FALSE(ParseRankList("1,").ok());
  EXPECT_FALSE(ParseRankList("-3").ok());
  EXPECT_FALSE(ParseRankList("16777216").ok());
  // A typo for "0-3,17" is no range; nor is a sign.
  EXPECT_EQ(ParseRankList("0-3-17").status().message(),
            "'0-3-17' is not a rank or a range of ranks");
  EXPECT_FALSE(ParseRankList("+3").ok());
  EXPECT_FALSE(ParseRankList("1 - 3").ok());
  EXPECT_FALSE(ParseRankList("3-").ok());
  EXPECT_FALSE(ParseRankList("").ok());
  // A range that would fill memory before any request is refused; ranges that overlap count
  // their ranks once.
  absl::StatusOr<std::set<uint32_t>> huge = ParseRankList("0-16777215");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().message(), "'0-16777215' names more than 1048576 ranks");
  EXPECT_EQ(ParseRankList("0-1048575")->size(), 1048576u);
  EXPECT_EQ(ParseRankList("0-1048575,5")->size(), 1048576u);
  EXPECT_EQ(ParseRankList("0-600000,300000-900000")->size(), 900001u);
  EXPECT_EQ(ParseRankList("0-1048575,2000000").status().message(),
            "'0-1048575,2000000' names more than 1048576 ranks");
}

}  // namespace
}  // namespace memtrace::cli
