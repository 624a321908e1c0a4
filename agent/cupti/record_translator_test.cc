#include "agent/cupti/record_translator.h"

#include <cstring>
#include <tuple>
#include <vector>

#include "agent/cupti/testing/recording_sink.h"
#include "gtest/gtest.h"

namespace memtrace {
namespace cupti {
namespace {

// Records filled as the driver fills them (cupti_activity.h, CUPTI 13.0).
CUpti_ActivityMemory4 MemoryRecord(CUpti_ActivityMemoryOperationType op, uint64_t address,
                                   uint64_t bytes, uint32_t correlation) {
  CUpti_ActivityMemory4 r;
  std::memset(&r, 0, sizeof r);
  r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  r.memoryOperationType = op;
  r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  r.correlationId = correlation;
  r.address = address;
  r.bytes = bytes;
  r.timestamp = 1'700'000'000'000'000'000ull + correlation;
  r.PC = 0x7f0000001234;
  r.processId = 4242;
  r.deviceId = 1;
  r.contextId = 1;
  r.streamId = CUPTI_INVALID_STREAM_ID;
  r.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
  return r;
}

CUpti_ActivityMemoryPool3 PoolRecord(CUpti_ActivityMemoryPoolOperationType op, uint64_t address,
                                     uint64_t size) {
  CUpti_ActivityMemoryPool3 r;
  std::memset(&r, 0, sizeof r);
  r.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
  r.memoryPoolOperationType = op;
  r.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
  r.correlationId = 77;
  r.deviceId = 2;
  r.address = address;
  r.size = size;
  r.releaseThreshold = 0;
  r.timestamp = 5000;
  return r;
}

CUpti_ActivityMarker2 MarkerRecord(uint32_t flags, uint32_t id, const char* name,
                                   uint64_t timestamp) {
  CUpti_ActivityMarker2 r;
  std::memset(&r, 0, sizeof r);
  r.kind = CUPTI_ACTIVITY_KIND_MARKER;
  r.flags = static_cast<CUpti_ActivityFlag>(flags);
  r.timestamp = timestamp;
  r.id = id;
  r.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  r.objectId.pt.processId = 4242;
  r.objectId.pt.threadId = 4243;
  r.name = name;
  r.domain = nullptr;
  return r;
}

const CUpti_Activity* AsActivity(const void* r) { return static_cast<const CUpti_Activity*>(r); }

class RecordTranslatorTest : public ::testing::Test {
 protected:
  RecordTranslatorTest()
      : classifier_(*RangeClassifier::Create(RangeClassifierOptions())),
        translator_(&sink_, &correlation_, &classifier_, TranslatorOptions()) {}

  RecordingSink sink_;
  CorrelationTable correlation_{10};
  RangeClassifier classifier_;
  RecordTranslator translator_;
};

TEST_F(RecordTranslatorTest, AllocAndReleasePairByAddress) {
  auto alloc =
      MemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x7f00a0000000, 2 << 20, 10);
  auto release =
      MemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, 0x7f00a0000000, 2 << 20, 11);
  translator_.Translate(AsActivity(&alloc));
  translator_.Translate(AsActivity(&release));
  std::vector<Event> events = sink_.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, EventKind::kAlloc);
  EXPECT_EQ(events[1].kind, EventKind::kFree);
  for (const Event& e : events) {
    EXPECT_EQ(e.address, 0x7f00a0000000u);
    EXPECT_EQ(e.bytes, uint64_t{2 << 20});
    EXPECT_EQ(e.device, 1u);
    EXPECT_EQ(e.stream, 0u);  // CUPTI_INVALID_STREAM_ID: synchronous
    EXPECT_EQ(e.memory_kind, kMemoryDevice);
  }
  EXPECT_EQ(events[0].ts_ns, 1'700'000'000'000'000'010);
  EXPECT_EQ(translator_.stats().memory_records, 2u);
}

// CUPTI's clock measured 3 s ahead of CLOCK_REALTIME at start: every record kind is shifted
// back onto it, where the callback events are.
TEST_F(RecordTranslatorTest, AClockShiftMovesEveryRecordOntoTheEventsClock) {
  translator_.SetMarkersDriveSteps(true);
  translator_.SetClockShift(-3'000'000'000);
  auto alloc =
      MemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x7f00a0000000, 64, 10);
  auto pool =
      PoolRecord(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, 0x7f00b0000000, 1 << 20);
  pool.timestamp = 3'000'005'000;
  auto step = MarkerRecord(CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 1, "step 7", 3'000'009'000);
  translator_.Translate(AsActivity(&alloc));
  translator_.Translate(AsActivity(&pool));
  translator_.Translate(AsActivity(&step));
  std::vector<Event> events = sink_.events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].ts_ns, 1'700'000'000'000'000'010 - 3'000'000'000);
  EXPECT_EQ(events[1].ts_ns, 5000);
  EXPECT_EQ(events[2].kind, EventKind::kStep);
  EXPECT_EQ(events[2].ts_ns, 9000);
}

TEST_F(RecordTranslatorTest, PoolAllocationIsMemoryKindPoolWithItsStream) {
  auto r = MemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x1000, 512, 12);
  r.isAsync = 1;
  r.streamId = 13;
  r.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
  r.memoryPoolConfig.address = 0x7f0000000000;
  r.memoryPoolConfig.pool.size = 64 << 20;
  translator_.Translate(AsActivity(&r));
  std::vector<Event> events = sink_.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].memory_kind, kMemoryPool);
  EXPECT_EQ(events[0].stream, 13u);
}

TEST_F(RecordTranslatorTest, MemoryKindsMapOneToOne) {
  const CUpti_ActivityMemoryKind kinds[] = {
      CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN,       CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
      CUPTI_ACTIVITY_MEMORY_KIND_PINNED,        CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
      CUPTI_ACTIVITY_MEMORY_KIND_ARRAY,         CUPTI_ACTIVITY_MEMORY_KIND_MANAGED,
      CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC};
  for (CUpti_ActivityMemoryKind k : kinds) {
    auto r = MemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x1000, 1, 1);
    r.memoryKind = k;
    translator_.Translate(AsActivity(&r));
  }
  auto odd = MemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x1000, 1, 1);
  odd.memoryKind = static_cast<CUpti_ActivityMemoryKind>(99);
  translator_.Translate(AsActivity(&odd));
  std::vector<Event> events = sink_.events();
  ASSERT_EQ(events.size(), 9u);
  for (uint32_t i = 0; i < 8; ++i) EXPECT_EQ(events[i].memory_kind, i);
  EXPECT_EQ(events[8].memory_kind, kMemoryUnknown);
}

TEST_F(RecordTranslatorTest, CorrelatedAllocationGetsTagAndSourceButFreeDoesNot) {
  correlation_.Put(20, {/*tag_id=*/5, /*source_id=*/6, /*vmm=*/false});
  correlation_.Put(21, {5, 6, false});
  auto alloc = MemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x2000, 64, 20);
  auto release = MemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, 0x2000, 64, 21);
  translator_.Translate(AsActivity(&alloc));
  translator_.Translate(AsActivity(&release));
  std::vector<Event> events = sink_.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].tag_id, 5u);
  EXPECT_EQ(events[0].source_id, 6u);
  EXPECT_EQ(events[1].tag_id, 0u);
  EXPECT_EQ(translator_.stats().tagged, 1u);
  EXPECT_EQ(translator_.stats().correlated, 2u);
}

TEST_F(RecordTranslatorTest, RecordSourcePathIsUsedWhenCallbacksNamedNoSource) {
  auto r = MemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x3000, 64, 30);
  r.source = "/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so";
  translator_.Translate(AsActivity(&r));
  translator_.Translate(AsActivity(&r));
  std::vector<Event> events = sink_.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(sink_.Name(events[0].source_id), "libc10_cuda.so");
  EXPECT_EQ(events[1].source_id, events[0].source_id);
}

TEST_F(RecordTranslatorTest, RecordOfAVmmCreateIsSkipped) {
  correlation_.Put(40, {0, 0, /*vmm=*/true});
  auto r = MemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0, 20 << 20, 40);
  translator_.Translate(AsActivity(&r));
  EXPECT_TRUE(sink_.events().empty());
  EXPECT_EQ(translator_.stats().vmm_records_skipped, 1u);
}

TEST_F(RecordTranslatorTest, UnknownOperationTypeIsCountedNotTranslated) {
  auto r = MemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID, 0x1, 1, 1);
  translator_.Translate(AsActivity(&r));
  EXPECT_TRUE(sink_.events().empty());
  EXPECT_EQ(translator_.stats().invalid_records, 1u);
}

TEST_F(RecordTranslatorTest, PoolOperations) {
  auto created = PoolRecord(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, 0x7f10, 1 << 30);
  auto trimmed = PoolRecord(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED, 0x7f10, 1 << 29);
  trimmed.minBytesToKeep = 1 << 20;
  auto destroyed = PoolRecord(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED, 0x7f10, 0);
  translator_.Translate(AsActivity(&created));
  translator_.Translate(AsActivity(&trimmed));
  translator_.Translate(AsActivity(&destroyed));
  std::vector<Event> events = sink_.events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].kind, EventKind::kPoolCreate);
  EXPECT_EQ(events[0].bytes, uint64_t{1} << 30);
  EXPECT_EQ(events[1].kind, EventKind::kPoolTrim);
  EXPECT_EQ(events[1].aux, uint64_t{1} << 20);
  EXPECT_EQ(events[2].kind, EventKind::kPoolDestroy);
  for (const Event& e : events) {
    EXPECT_EQ(e.address, 0x7f10u);
    EXPECT_EQ(e.device, 2u);
    EXPECT_EQ(e.memory_kind, kMemoryPool);
  }
}

TEST_F(RecordTranslatorTest, MarkersAreIgnoredWhenCallbacksDriveSteps) {
  auto m = MarkerRecord(CUPTI_ACTIVITY_FLAG_MARKER_START, 1, "step 4", 100);
  translator_.Translate(AsActivity(&m));
  EXPECT_TRUE(sink_.events().empty());
  EXPECT_EQ(translator_.stats().marker_records, 1u);
  translator_.SetMarkersDriveSteps(true);
  translator_.Translate(AsActivity(&m));
  ASSERT_EQ(sink_.events().size(), 1u);
  EXPECT_EQ(sink_.events()[0].aux, 4u);
}

TEST(RecordTranslatorMarkerTest, MarkersDriveStepsAndPhasesInActivityOnlyMode) {
  RecordingSink sink;
  RangeClassifier classifier = *RangeClassifier::Create(RangeClassifierOptions());
  TranslatorOptions options;
  options.markers_drive_steps = true;
  RecordTranslator translator(&sink, nullptr, &classifier, options);
  auto step = MarkerRecord(CUPTI_ACTIVITY_FLAG_MARKER_START, 1, "step 4", 100);
  auto step_end = MarkerRecord(CUPTI_ACTIVITY_FLAG_MARKER_END, 1, nullptr, 300);
  auto phase = MarkerRecord(CUPTI_ACTIVITY_FLAG_MARKER_START, 2, "rollout", 110);
  auto tag = MarkerRecord(CUPTI_ACTIVITY_FLAG_MARKER_START, 3, "fsdp:layers.0", 120);
  auto phase_end = MarkerRecord(CUPTI_ACTIVITY_FLAG_MARKER_END, 2, nullptr, 200);
  for (auto* r : {&step, &phase, &tag, &phase_end, &step_end}) translator.Translate(AsActivity(r));
  std::vector<Event> events = sink.events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].kind, EventKind::kStep);
  EXPECT_EQ(events[0].aux, 4u);
  EXPECT_EQ(events[0].ts_ns, 100);
  EXPECT_EQ(events[1].kind, EventKind::kPhaseBegin);
  EXPECT_EQ(events[2].kind, EventKind::kPhaseEnd);
  EXPECT_EQ(events[2].ts_ns, 200);
  EXPECT_EQ(events[1].tag_id, events[2].tag_id);
  EXPECT_EQ(sink.Name(events[1].tag_id), "rollout");
}

// A sink that tells losses reported as such from events recorded.
class LossReportingSink : public RecordingSink {
 public:
  void RecordLoss(uint32_t reason, uint64_t n, int64_t ts_ns) override {
    losses.push_back({reason, n, ts_ns});
  }
  std::vector<std::tuple<uint32_t, uint64_t, int64_t>> losses;
};

TEST(RecordTranslatorLossTest, DroppedRecordsAreReportedAsALossNotRecordedAsAnEvent) {
  // Through Record() the marker could itself be dropped by a full queue (transport_test's
  // ALossReportedWhileTheQueueIsFullKeepsItsCount is what RecordLoss guarantees).
  LossReportingSink sink;
  CorrelationTable correlation{10};
  RangeClassifier classifier = *RangeClassifier::Create(RangeClassifierOptions());
  RecordTranslator translator(&sink, &correlation, &classifier, TranslatorOptions());
  translator.RecordDropped(1234, 20);
  EXPECT_TRUE(sink.events().empty());
  ASSERT_EQ(sink.losses.size(), 1u);
  EXPECT_EQ(sink.losses[0],
            std::make_tuple(uint32_t{kLossCuptiDropped}, uint64_t{1234}, int64_t{20}));
}

TEST_F(RecordTranslatorTest, DroppedRecordsBecomeOneLossEventWithTheCount) {
  translator_.RecordDropped(0, 10);  // nothing dropped: nothing to report
  translator_.RecordDropped(1234, 20);
  std::vector<Event> events = sink_.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, EventKind::kLoss);
  EXPECT_EQ(events[0].aux, 1234u);
  EXPECT_EQ(events[0].memory_kind, kLossCuptiDropped);
  EXPECT_EQ(events[0].ts_ns, 20);
  EXPECT_EQ(translator_.stats().cupti_dropped, 1234u);
}

// A buffer laid out as CUPTI lays it out (records back to back, each 8-byte aligned), walked by
// libcupti's own cuptiActivityGetNextRecord, which works without a GPU.
TEST_F(RecordTranslatorTest, CompletedBufferIsWalkedWithCuptiAndEveryRecordTranslated) {
  alignas(8) uint8_t buffer[1024];
  std::memset(buffer, 0, sizeof buffer);
  size_t used = 0;
  auto put = [&](const void* r, size_t size) {
    std::memcpy(buffer + used, r, size);
    used += (size + 7) & ~size_t{7};
  };
  auto a = MemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0xa000, 4096, 1);
  auto p = PoolRecord(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, 0xb000, 1 << 20);
  auto m = MarkerRecord(CUPTI_ACTIVITY_FLAG_MARKER_START, 9, "step 1", 50);
  auto f = MemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, 0xa000, 4096, 2);
  put(&a, sizeof a);
  put(&p, sizeof p);
  put(&m, sizeof m);
  put(&f, sizeof f);
  EXPECT_EQ(translator_.TranslateBuffer(buffer, used), 4u);
  std::vector<Event> events = sink_.events();
  ASSERT_EQ(events.size(), 3u);  // the marker is not an event in callback mode
  EXPECT_EQ(events[0].kind, EventKind::kAlloc);
  EXPECT_EQ(events[1].kind, EventKind::kPoolCreate);
  EXPECT_EQ(events[2].kind, EventKind::kFree);
  EXPECT_EQ(translator_.stats().records, 4u);
  EXPECT_EQ(translator_.TranslateBuffer(buffer, 0), 0u);
  EXPECT_EQ(translator_.TranslateBuffer(nullptr, 100), 0u);
}

// A buffer's events reach the sink in order, in chunks (EventSink::RecordMany), so that the
// Transport locks its queue once per chunk; a record translated on its own goes at once.
TEST_F(RecordTranslatorTest, ABuffersEventsReachTheSinkInOrderAFewHundredAtATime) {
  constexpr int kRecords = 300;
  std::vector<CUpti_ActivityMemory4> records;
  for (int i = 0; i < kRecords; ++i) {
    records.push_back(MemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                                   0x10000 + 0x1000 * i, 4096, 1000 + i));
  }
  std::vector<uint8_t> buffer(kRecords * ((sizeof(CUpti_ActivityMemory4) + 7) & ~size_t{7}) + 8);
  uint8_t* const aligned =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buffer.data()) + 7) & ~uintptr_t{7});
  size_t used = 0;
  for (const CUpti_ActivityMemory4& r : records) {
    std::memcpy(aligned + used, &r, sizeof r);
    used += (sizeof r + 7) & ~size_t{7};
  }
  EXPECT_EQ(translator_.TranslateBuffer(aligned, used), size_t{kRecords});
  const std::vector<Event> events = sink_.events();
  ASSERT_EQ(events.size(), size_t{kRecords});
  for (int i = 0; i < kRecords; ++i) {
    EXPECT_EQ(events[i].address, 0x10000u + 0x1000u * i);
    EXPECT_EQ(events[i].ts_ns, 1'700'000'000'000'001'000 + i);
  }
  EXPECT_EQ(sink_.record_many_sizes(), (std::vector<size_t>{128, 128, 44}));

  translator_.Translate(reinterpret_cast<const CUpti_Activity*>(&records[0]));
  EXPECT_EQ(sink_.events().size(), size_t{kRecords + 1});
  EXPECT_EQ(sink_.record_many_sizes().size(), 3u);  // not through RecordMany
}

}  // namespace
}  // namespace cupti
}  // namespace memtrace
