#include "query/analysis/units.h"

#include "gtest/gtest.h"

namespace memtrace::analysis {
namespace {

TEST(UnitsTest, BytesUseBinaryPrefixesAndThreeDigits) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(17), "17 B");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(512.0 * (1 << 20)), "512 MiB");
  EXPECT_EQ(FormatBytes(12.3 * (1 << 30)), "12.3 GiB");
  EXPECT_EQ(FormatBytes(80.0 * (1 << 30)), "80.0 GiB");
  EXPECT_EQ(FormatBytes(1023.9 * 1024), "1.00 MiB");
  // Rounding into the next width: three digits, not four.
  EXPECT_EQ(FormatBytes(10239), "10.0 KiB");
  EXPECT_EQ(FormatBytes(100.0 * (1 << 20) - 1), "100 MiB");
  EXPECT_EQ(FormatBytes(3.0 * (uint64_t{1} << 40)), "3.00 TiB");
}

TEST(UnitsTest, SignedBytesAndRates) {
  EXPECT_EQ(FormatSignedBytes(256.0 * (1 << 20)), "+256 MiB");
  EXPECT_EQ(FormatSignedBytes(-1.0 * (1 << 30)), "-1.00 GiB");
  EXPECT_EQ(FormatSignedBytes(0), "0 B");
  EXPECT_EQ(FormatRate(128.0 * (1 << 20)), "128 MiB/step");
  // Time buckets: per second whatever their width, per minute under 1 MiB/s.
  EXPECT_EQ(FormatRate(128.0 * (1 << 20), 500'000'000), "256 MiB/s");
  EXPECT_EQ(FormatRate(-256.0 * (1 << 20), 1'000'000'000), "-256 MiB/s");
  EXPECT_EQ(FormatRate(5.0 * (1 << 20), 10'000'000'000), "30.0 MiB/min");
  EXPECT_EQ(FormatRate(0, 1'000'000'000), "0 B/s");
}

TEST(UnitsTest, DurationsPickTheLargestSensibleUnit) {
  EXPECT_EQ(FormatDuration(850e6), "850 ms");
  EXPECT_EQ(FormatDuration(45e9), "45 s");
  EXPECT_EQ(FormatDuration(37 * 60e9), "37 min");
  EXPECT_EQ(FormatDuration(5.2 * 3600e9), "5.20 h");
  EXPECT_EQ(FormatDuration(3.1 * 86400e9), "3.10 d");
}

TEST(UnitsTest, WhatIsStoredBesideTheRanksFollowsTheirCount) {
  EXPECT_EQ(FormatBesideTheRanks(0, 0), "");
  EXPECT_EQ(FormatBesideTheRanks(2, 0), " and 2 subprocess(es) of them");
  EXPECT_EQ(FormatBesideTheRanks(0, 2), " and the 2 process(es) that started them");
  EXPECT_EQ(FormatBesideTheRanks(1, 1),
            ", 1 subprocess(es) of them and the 1 process(es) that started them");
}

TEST(UnitsTest, RankListsCollapseRuns) {
  EXPECT_EQ(FormatRankList({5}), "5");
  EXPECT_EQ(FormatRankList({3, 0, 1, 2, 5, 7, 8, 9, 9}), "0-3,5,7-9");
  EXPECT_EQ(FormatRankList({}), "");
  // At most so many items, then the count of ranks.
  EXPECT_EQ(FormatRankList({3, 0, 1, 2, 5, 7, 8, 9}, 2), "0-3,5,... (8 ranks)");
  EXPECT_EQ(FormatRankList({0, 1, 2}, 1), "0-2");
}

TEST(UnitsTest, KeysAreStepsOrTheStartOfTheirTimeBucket) {
  EXPECT_EQ(FormatKey(32, 0), "step 32");
  EXPECT_EQ(FormatKey(412, 0, /*approximate=*/true), "step ~412");
  EXPECT_EQ(FormatKeyValue(32, 0), "32");
  // Bucket 1796332086 of 1 s: 2026-12-03 21:08:06 UTC.
  EXPECT_EQ(FormatKeyValue(1796332086, 1'000'000'000), "2026-12-03 21:08:06");
  EXPECT_EQ(FormatKey(1796332086, 1'000'000'000), "2026-12-03 21:08:06 bucket");
  EXPECT_EQ(FormatKey(1796332086, 1'000'000'000, true), "~2026-12-03 21:08:06 bucket");
  // Half-second buckets: neighbours differ in their milliseconds.
  EXPECT_EQ(FormatKeyValue(3592664173, 500'000'000), "2026-12-03 21:08:06.500");
  // Too far out for a time: the index itself.
  EXPECT_EQ(FormatKeyValue(INT64_MAX, 1'000'000'000), "bucket 9223372036854775807");
}

}  // namespace
}  // namespace memtrace::analysis
