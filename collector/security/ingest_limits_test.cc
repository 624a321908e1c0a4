#include "collector/security/ingest_limits.h"

#include "gtest/gtest.h"

namespace memtrace::security {
namespace {

TEST(IngestLimitsTest, StringIdsUpToTheLimitPass) {
  IngestLimits limits;
  limits.max_string_table = 10;
  DecodedBatch batch;
  batch.strings = {StringDef{1, StringKind::kTag, "a"}, StringDef{10, StringKind::kTag, "b"}};
  EXPECT_TRUE(CheckIds(batch, limits).ok());
}

TEST(IngestLimitsTest, StringIdAboveTheLimitIsResourceExhaustedNamingIt) {
  IngestLimits limits;
  limits.max_string_table = 10;
  DecodedBatch batch;
  batch.strings = {StringDef{11, StringKind::kTag, "a"}};
  absl::Status s = CheckIds(batch, limits);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_NE(s.message().find("11"), std::string::npos);
  EXPECT_NE(s.message().find("--max_string_table"), std::string::npos);
}

TEST(IngestLimitsTest, AnEventReferringToAStringIdAboveTheLimitIsRefused) {
  IngestLimits limits;
  limits.max_string_table = 10;
  DecodedBatch batch;
  Event e;
  e.kind = EventKind::kAlloc;
  e.memory_kind = kMemoryDevice;
  e.tag_id = 10;
  e.source_id = 10;
  batch.events = {e, e};
  EXPECT_TRUE(CheckIds(batch, limits).ok());
  batch.events[1].source_id = 11;
  absl::Status s = CheckIds(batch, limits);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_NE(s.message().find("event 1 refers to string id 11"), std::string::npos) << s;
  batch.events[1].source_id = 0;
  batch.events[1].kind = EventKind::kPhaseBegin;
  batch.events[1].tag_id = 4000000000u;
  EXPECT_TRUE(absl::IsResourceExhausted(CheckIds(batch, limits)));
}

TEST(IngestLimitsTest, AnAllocationOfAMemoryKindOutsideTheEnumIsInvalid) {
  IngestLimits limits;
  DecodedBatch batch;
  Event e;
  e.kind = EventKind::kVmmMap;
  e.memory_kind = kMemoryVmm;
  batch.events = {e};
  EXPECT_TRUE(CheckIds(batch, limits).ok());
  batch.events[0].memory_kind = 128;
  absl::Status s = CheckIds(batch, limits);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("event 0 has memory kind 128"), std::string::npos) << s;
  // A loss marker's memory_kind is its reason, not a kind.
  batch.events[0].kind = EventKind::kLoss;
  batch.events[0].memory_kind = 1000;
  EXPECT_TRUE(CheckIds(batch, limits).ok());
}

}  // namespace
}  // namespace memtrace::security
