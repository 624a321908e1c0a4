#include "query/cli/time_arg.h"

#include "gtest/gtest.h"

namespace memtrace::cli {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'764'694'443);

TEST(ParseTimeArgTest, TakesIntegersAsNanosecondsSinceTheEpoch) {
  EXPECT_EQ(*ParseTimeArg("1764694443000000001", kNow), 1'764'694'443'000'000'001);
  EXPECT_EQ(*ParseTimeArg("0", kNow), 0);
  // Seconds (ms, us) typed for ns selected everything from 1970 on: refused, saying so.
  absl::StatusOr<int64_t> seconds = ParseTimeArg("1767225610", kNow);
  ASSERT_FALSE(seconds.ok());
  EXPECT_NE(seconds.status().message().find("it looks like seconds: give ns (1767225610000000000)"),
            std::string::npos)
      << seconds.status();
  EXPECT_NE(ParseTimeArg("1767225610123", kNow).status().message().find("milliseconds"),
            std::string::npos);
}

TEST(ParseTimeArgTest, ResolvesRelativeFormsAgainstNow) {
  const int64_t now_ns = absl::ToUnixNanos(kNow);
  EXPECT_EQ(*ParseTimeArg("now", kNow), now_ns);
  EXPECT_EQ(*ParseTimeArg("now-15m", kNow), now_ns - 15ll * 60 * 1'000'000'000);
  EXPECT_EQ(*ParseTimeArg("now+1h", kNow), now_ns + 3600ll * 1'000'000'000);
  EXPECT_EQ(*ParseTimeArg("-90s", kNow), now_ns - 90ll * 1'000'000'000);
  EXPECT_EQ(*ParseTimeArg("-250ms", kNow), now_ns - 250'000'000);
}

TEST(ParseTimeArgTest, ParsesRfc3339WithFractionAndOffset) {
  EXPECT_EQ(*ParseTimeArg("2025-12-02T16:54:03Z", kNow), 1'764'694'443'000'000'000);
  EXPECT_EQ(*ParseTimeArg("2025-12-02T17:54:03.5+01:00", kNow), 1'764'694'443'500'000'000);
}

// A time as the tables print it (UTC, no zone, a space) pastes back as the same instant.
TEST(ParseTimeArgTest, TakesTimesAsTheTablesPrintThemAsUtc) {
  EXPECT_EQ(*ParseTimeArg("2025-12-02 16:54:03", kNow), 1'764'694'443'000'000'000);
  EXPECT_EQ(*ParseTimeArg("2025-12-02 16:54:03.250", kNow), 1'764'694'443'250'000'000);
  EXPECT_EQ(*ParseTimeArg("2025-12-02T16:54:03", kNow), 1'764'694'443'000'000'000);
  EXPECT_EQ(*ParseTimeArg("2025-12-02 17:54:03+01:00", kNow), 1'764'694'443'000'000'000);
  // As error messages print them ("no event at or before 2025-12-02 16:54:03.250 UTC"): pasted
  // back, it was "not a time".
  EXPECT_EQ(*ParseTimeArg("2025-12-02 16:54:03.250 UTC", kNow), 1'764'694'443'250'000'000);
}

TEST(ParseTimeArgTest, RejectsEverythingElseNamingTheText) {
  for (const char* text :
       {"", "abc", "now-", "now-abc", "+5m", "-", "-12", "nowish", "2025-13-02T16:54:03Z",
        "2025-12-02", "2025-12-02 16:54", "2025-12-02  16:54:03", "2025-12-02 16:54:03 CET",
        "2025-12-02 16:54:03UTC"}) {
    absl::StatusOr<int64_t> t = ParseTimeArg(text, kNow);
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find(absl::StrCat("'", text, "'")), std::string::npos);
  }
}

}  // namespace
}  // namespace memtrace::cli
