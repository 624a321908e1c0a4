// The callback side and the record side together, as in a PyTorch process: NVTX ranges and
// allocation callbacks on the application thread, MEMORY2 records later in a CUPTI-laid-out
// buffer walked by libcupti, both through the RecordOrder the agent puts before its transport.
// The planted leak (one tensor per step inside "leak:cache") must come out as one tagged ALLOC
// per step, after the step's STEP event in the stream (the order the collector applies), though
// every STEP reached the agent before the buffer with the allocations.
#include <cstring>
#include <vector>

#include "agent/cupti/correlation_table.h"
#include "agent/cupti/driver_callbacks.h"
#include "agent/cupti/nvtx_tracker.h"
#include "agent/cupti/record_order.h"
#include "agent/cupti/record_translator.h"
#include "agent/cupti/testing/recording_sink.h"
#include "gtest/gtest.h"

namespace memtrace {
namespace cupti {
namespace {

class PipelineTest : public ::testing::Test {
 protected:
  PipelineTest()
      : classifier_(*RangeClassifier::Create(RangeClassifierOptions())),
        tracker_(order_.callbacks(), classifier_, [this] { return ++now_; }),
        callbacks_(
            order_.callbacks(), &tracker_, &correlation_,
            [this] { return sink_.Intern(StringKind::kSource, "libc10_cuda.so"); },
            [this] { return ++now_; }),
        translator_(order_.records(), &correlation_, &classifier_, TranslatorOptions()) {}

  // What the agent's BufferFlusher does: the records so far reach the translator, then the
  // callback events held before the flush began may go.
  void Flush() {
    const uint64_t mark = order_.FlushMark();
    if (!buffer_.empty()) translator_.TranslateBuffer(buffer_.data(), buffer_.size());
    buffer_.clear();
    order_.ReleaseHeldBefore(mark);
  }

  // For each ALLOC in stream order, the step the collector would put it in (the last STEP
  // before it; -1 before any).
  std::vector<int64_t> StepOfEachAllocation() const {
    std::vector<int64_t> out;
    int64_t step = -1;
    for (const Event& e : sink_.events()) {
      if (e.kind == EventKind::kStep) step = static_cast<int64_t>(e.aux);
      if (e.kind == EventKind::kAlloc) out.push_back(step);
    }
    return out;
  }

  // The planted leak: each step a "fwd" range and one segment allocated inside "leak:cache";
  // `flush_after_step_marker` runs Flush() as the flusher would when the STEP starts waiting.
  void RunLeak(int steps, size_t leak, bool flush_after_step_marker) {
    for (int step = 0; step < steps; ++step) {
      Push(("step " + std::to_string(step)).c_str());
      if (flush_after_step_marker) Flush();
      Push("fwd");
      Pop();
      Push("leak:cache");
      CudaMalloc(0x7f0000000000 + uint64_t(step) * leak, leak);
      Pop();
      Pop();
    }
  }

  void Push(const char* name) {
    nvtxRangePushA_params p{name};
    callbacks_.OnNvtx(CUPTI_CBID_NVTX_nvtxRangePushA, &p, nullptr);
  }
  void Pop() {
    nvtxRangePop_params p{nullptr};
    callbacks_.OnNvtx(CUPTI_CBID_NVTX_nvtxRangePop, &p, nullptr);
  }

  // cudaMalloc as the caching allocator calls it, with the nested driver call, and the MEMORY2
  // record the driver would produce for it (carrying the runtime call's correlation id).
  void CudaMalloc(uint64_t address, size_t bytes) {
    void* dev = nullptr;
    cudaMalloc_v3020_params rt{&dev, bytes};
    CUdeviceptr dptr = 0;
    cuMemAlloc_v2_params drv{&dptr, bytes};
    const uint32_t rt_id = next_id_++;
    const uint32_t drv_id = next_id_++;
    ApiCall outer{CUPTI_CB_DOMAIN_RUNTIME_API,
                  CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
                  CUPTI_API_ENTER,
                  &rt,
                  nullptr,
                  rt_id};
    ApiCall inner{CUPTI_CB_DOMAIN_DRIVER_API,
                  CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
                  CUPTI_API_ENTER,
                  &drv,
                  nullptr,
                  drv_id};
    callbacks_.OnApi(outer);
    callbacks_.OnApi(inner);
    CUresult ok = CUDA_SUCCESS;
    cudaError_t rt_ok = cudaSuccess;
    inner.site = CUPTI_API_EXIT;
    inner.return_value = &ok;
    callbacks_.OnApi(inner);
    outer.site = CUPTI_API_EXIT;
    outer.return_value = &rt_ok;
    callbacks_.OnApi(outer);

    CUpti_ActivityMemory4 r;
    std::memset(&r, 0, sizeof r);
    r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    r.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    r.correlationId = rt_id;
    r.address = address;
    r.bytes = bytes;
    r.timestamp = ++now_;
    r.streamId = CUPTI_INVALID_STREAM_ID;
    const size_t at = buffer_.size();
    buffer_.resize(at + sizeof r);
    std::memcpy(buffer_.data() + at, &r, sizeof r);
  }

  RecordingSink sink_;
  RecordOrder order_{&sink_, 4096, nullptr};
  RangeClassifier classifier_;
  int64_t now_ = 0;
  NvtxTracker tracker_;
  CorrelationTable correlation_{12};
  DriverCallbacks callbacks_;
  RecordTranslator translator_;
  uint32_t next_id_ = 100;
  std::vector<uint8_t> buffer_;  // records back to back (each a multiple of 8 bytes)
};

TEST_F(PipelineTest, PlantedLeakComesOutAsOneTaggedAllocationPerStep) {
  constexpr int kSteps = 50;
  constexpr size_t kLeak = 20 << 20;  // one caching-allocator segment per step
  order_.set_records_share_clock(true);
  RunLeak(kSteps, kLeak, /*flush_after_step_marker=*/false);
  EXPECT_TRUE(sink_.EventsOfKind(EventKind::kStep).empty());  // all waiting for the records
  ASSERT_EQ(buffer_.size() % 8, 0u);
  EXPECT_EQ(translator_.TranslateBuffer(buffer_.data(), buffer_.size()), size_t{kSteps});
  order_.Close();

  std::vector<Event> steps = sink_.EventsOfKind(EventKind::kStep);
  std::vector<Event> allocs = sink_.EventsOfKind(EventKind::kAlloc);
  ASSERT_EQ(steps.size(), size_t{kSteps});
  ASSERT_EQ(allocs.size(), size_t{kSteps});
  const uint32_t leak_tag = sink_.IdOf(StringKind::kTag, "leak:cache");
  ASSERT_NE(leak_tag, 0u);
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_EQ(steps[i].aux, uint64_t(i));
    EXPECT_EQ(allocs[i].tag_id, leak_tag);
    EXPECT_EQ(sink_.Name(allocs[i].source_id), "libc10_cuda.so");
    EXPECT_EQ(allocs[i].bytes, kLeak);
    // The allocation happened inside step i: after its STEP, before the next one.
    EXPECT_GT(allocs[i].ts_ns, steps[i].ts_ns);
    if (i + 1 < kSteps) EXPECT_LT(allocs[i].ts_ns, steps[i + 1].ts_ns);
  }
  EXPECT_EQ(translator_.stats().tagged, uint64_t{kSteps});
  EXPECT_EQ(callbacks_.stats().nested_alloc_calls, uint64_t{kSteps});
  EXPECT_EQ(tracker_.stats().pops_without_push, 0u);
  // In the stream, as the collector applies it: allocation i in step i.
  std::vector<int64_t> expected(kSteps);
  for (int i = 0; i < kSteps; ++i) expected[i] = i;
  EXPECT_EQ(StepOfEachAllocation(), expected);
  EXPECT_EQ(order_.stats().released_by_record, uint64_t{kSteps});
}

TEST_F(PipelineTest, OnUnknownClocksAFlushPerStepMarkerKeepsEachAllocationInItsStep) {
  // Records' timestamps are not comparable: only flushes release the STEPs. The flusher is
  // poked when a STEP starts waiting and delivers the records made before it.
  constexpr int kSteps = 20;
  RunLeak(kSteps, 2 << 20, /*flush_after_step_marker=*/true);
  Flush();
  std::vector<int64_t> expected(kSteps);
  for (int i = 0; i < kSteps; ++i) expected[i] = i;
  EXPECT_EQ(StepOfEachAllocation(), expected);
  EXPECT_EQ(order_.stats().released_by_flush, uint64_t{kSteps});
}

TEST_F(PipelineTest, AllocationOutsideAnyTagRangeIsUntagged) {
  Push("step 0");
  CudaMalloc(0x1000, 4096);
  Pop();
  Flush();
  std::vector<Event> allocs = sink_.EventsOfKind(EventKind::kAlloc);
  ASSERT_EQ(allocs.size(), 1u);
  EXPECT_EQ(allocs[0].tag_id, 0u);
  EXPECT_NE(allocs[0].source_id, 0u);
}

}  // namespace
}  // namespace cupti
}  // namespace memtrace
