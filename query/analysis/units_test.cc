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
  EXPECT_EQ(FormatBytes(3.0 * (uint64_t{1} << 40)), "3.00 TiB");
}

TEST(UnitsTest, SignedBytesAndRates) {
  EXPECT_EQ(FormatSignedBytes(256.0 * (1 << 20)), "+256 MiB");
  EXPECT_EQ(FormatSignedBytes(-1.0 * (1 << 30)), "-1.00 GiB");
  EXPECT_EQ(FormatSignedBytes(0), "0 B");
  EXPECT_EQ(FormatRate(128.0 * (1 << 20)), "128 MiB/step");
}

TEST(UnitsTest, DurationsPickTheLargestSensibleUnit) {
  EXPECT_EQ(FormatDuration(850e6), "850 ms");
  EXPECT_EQ(FormatDuration(45e9), "45 s");
  EXPECT_EQ(FormatDuration(37 * 60e9), "37 min");
  EXPECT_EQ(FormatDuration(5.2 * 3600e9), "5.20 h");
  EXPECT_EQ(FormatDuration(3.1 * 86400e9), "3.10 d");
}

}  // namespace
}  // namespace memtrace::analysis
