#include "tools/bench/agent_hot_path.h"

#include <cupti.h>

#include <cstdlib>

#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"

namespace memtrace::bench {
namespace {

TEST(AgentHotPathTest, BufferHoldsWalkableMemoryRecordsWithTagsInTheTable) {
  cupti::CorrelationTable table;
  CuptiBuffer b = BuildMemoryBuffer(64 << 10, &table);
  EXPECT_EQ(b.records, (64u << 10) / sizeof(CUpti_ActivityMemory4));
  size_t walked = 0;
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(b.data(), b.valid_bytes, &r) == CUPTI_SUCCESS) {
    EXPECT_EQ(r->kind, CUPTI_ACTIVITY_KIND_MEMORY2);
    ++walked;
  }
  EXPECT_EQ(walked, b.records);
  EXPECT_TRUE(table.Find(1).has_value());   // an allocation
  EXPECT_FALSE(table.Find(2).has_value());  // its release
}

TEST(AgentHotPathTest, SmallMeasurementTranslatesEverythingAndLosesNothing) {
  HotPathOptions o;
  o.buffer_bytes = 256 << 10;
  o.buffers = 3;
  o.data_dir = test_util::TmpPath("hot");
  absl::StatusOr<HotPathResult> r = MeasureHotPath(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->translate_events_per_s, 0);
  EXPECT_GT(r->memcpy_records_per_s, r->translate_events_per_s);
  EXPECT_GT(r->record_ns_per_event, 0);
  EXPECT_GT(r->record_many_ns_per_event, 0);
  EXPECT_GT(r->buffer_latency_ms_max, 0);
  EXPECT_GT(r->wire_bytes_per_event, 1);
  EXPECT_EQ(r->events_lost, 0u);
}

}  // namespace
}  // namespace memtrace::bench
