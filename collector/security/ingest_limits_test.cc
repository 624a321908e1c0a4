#include "collector/security/ingest_limits.h"

#include "gtest/gtest.h"

namespace memtrace::security {
namespace {

TEST(IngestLimitsTest, StringIdsUpToTheLimitPass) {
  IngestLimits limits;
  limits.max_string_table = 10;
  DecodedBatch batch;
  batch.strings = {StringDef{1, StringKind::kTag, "a"}, StringDef{10, StringKind::kTag, "b"}};
  EXPECT_TRUE(CheckStringTable(batch, limits).ok());
}

TEST(IngestLimitsTest, StringIdAboveTheLimitIsResourceExhaustedNamingIt) {
  IngestLimits limits;
  limits.max_string_table = 10;
  DecodedBatch batch;
  batch.strings = {StringDef{11, StringKind::kTag, "a"}};
  absl::Status s = CheckStringTable(batch, limits);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_NE(s.message().find("11"), std::string::npos);
  EXPECT_NE(s.message().find("--max_string_table"), std::string::npos);
}

}  // namespace
}  // namespace memtrace::security
