#include "agent/cupti/driver_callbacks.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "agent/cupti/testing/recording_sink.h"
#include "gtest/gtest.h"

namespace memtrace {
namespace cupti {
namespace {

class DriverCallbacksTest : public ::testing::Test {
 protected:
  DriverCallbacksTest()
      : tracker_(&sink_, *RangeClassifier::Create(RangeClassifierOptions()), [] { return 1; }),
        callbacks_(
            &sink_, &tracker_, &correlation_, [this] { return NextSource(); },
            [this] { return now_.fetch_add(1); }) {}

  // Stands in for the backtrace resolver: each call is one "stack walk", counted.
  uint32_t NextSource() {
    ++source_calls_;
    return sink_.Intern(StringKind::kSource, "libc10_cuda.so");
  }

  // One API call as CUPTI reports it: ENTER, then EXIT with the result.
  template <typename Params, typename Result>
  void Call(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, Params* params, Result result,
            uint32_t correlation) {
    ApiCall call;
    call.domain = domain;
    call.cbid = cbid;
    call.params = params;
    call.correlation_id = correlation;
    call.site = CUPTI_API_ENTER;
    callbacks_.OnApi(call);
    call.site = CUPTI_API_EXIT;
    call.return_value = &result;
    callbacks_.OnApi(call);
  }

  void Nvtx(CUpti_CallbackId cbid, const void* params, const void* ret = nullptr) {
    callbacks_.OnNvtx(cbid, params, ret);
  }

  void PushA(const char* name) {
    nvtxRangePushA_params p{name};
    Nvtx(CUPTI_CBID_NVTX_nvtxRangePushA, &p);
  }
  void Pop() {
    nvtxRangePop_params p{nullptr};
    Nvtx(CUPTI_CBID_NVTX_nvtxRangePop, &p);
  }

  RecordingSink sink_;
  CorrelationTable correlation_{12};
  NvtxTracker tracker_;
  int source_calls_ = 0;
  std::atomic<int64_t> now_{100};
  DriverCallbacks callbacks_;
};

TEST_F(DriverCallbacksTest, AllocationCallStoresTagAndSourceUnderItsCorrelationId) {
  PushA("leak:cache");
  CUdeviceptr ptr = 0;
  cuMemAlloc_v2_params p{&ptr, 1 << 20};
  ptr = 0x7f0000200000;
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &p, CUDA_SUCCESS, 500);
  Pop();
  std::optional<CorrelationInfo> info = correlation_.Find(500);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(sink_.Name(info->tag_id), "leak:cache");
  EXPECT_EQ(sink_.Name(info->source_id), "libc10_cuda.so");
  EXPECT_FALSE(info->vmm);
  EXPECT_TRUE(sink_.events().empty());  // the allocation itself comes from the MEMORY2 record
}

TEST_F(DriverCallbacksTest, NestedRuntimeAndDriverCallShareOneStackWalkAndOneOom) {
  PushA("fsdp:layers.3");
  void* dev = nullptr;
  cudaMalloc_v3020_params outer{&dev, size_t{80} << 30};
  CUdeviceptr dptr = 0;
  cuMemAlloc_v2_params inner{&dptr, size_t{80} << 30};
  ApiCall call;
  call.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
  call.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020;
  call.params = &outer;
  call.correlation_id = 600;
  call.site = CUPTI_API_ENTER;
  callbacks_.OnApi(call);
  {
    ApiCall d;
    d.domain = CUPTI_CB_DOMAIN_DRIVER_API;
    d.cbid = CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2;
    d.params = &inner;
    d.correlation_id = 601;
    d.site = CUPTI_API_ENTER;
    callbacks_.OnApi(d);
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    d.site = CUPTI_API_EXIT;
    d.return_value = &r;
    callbacks_.OnApi(d);
  }
  cudaError_t rr = cudaErrorMemoryAllocation;
  call.site = CUPTI_API_EXIT;
  call.return_value = &rr;
  callbacks_.OnApi(call);
  Pop();

  EXPECT_EQ(source_calls_, 1);
  EXPECT_EQ(correlation_.Find(600), correlation_.Find(601));
  std::vector<Event> ooms = sink_.EventsOfKind(EventKind::kOom);
  ASSERT_EQ(ooms.size(), 1u);
  EXPECT_EQ(ooms[0].bytes, uint64_t{80} << 30);
  EXPECT_EQ(sink_.Name(ooms[0].tag_id), "fsdp:layers.3");
  EXPECT_EQ(sink_.Name(ooms[0].source_id), "libc10_cuda.so");
  EXPECT_EQ(ooms[0].memory_kind, kMemoryDevice);
  EXPECT_EQ(callbacks_.stats().alloc_calls, 1u);
  EXPECT_EQ(callbacks_.stats().runtime_alloc_calls, 1u);
  EXPECT_EQ(callbacks_.stats().nested_alloc_calls, 1u);
}

TEST_F(DriverCallbacksTest, OomOfEachAllocationCallCarriesTheRequestedBytes) {
  CUdeviceptr d = 0;
  void* v = nullptr;
  size_t pitch = 0;
  CUmemGenericAllocationHandle h = 0;
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof prop);
  cuMemAllocAsync_params async{&d, 1000, nullptr};
  cuMemAllocFromPoolAsync_params from_pool{&d, 2000, nullptr, nullptr};
  cuMemCreate_params create{&h, 3000, &prop, 0};
  cuMemAllocManaged_params managed{&d, 4000, 1};
  cuMemAllocPitch_v2_params pitched{&d, &pitch, 100, 50, 4};
  cudaMallocAsync_v11020_params rt_async{&v, 6000, nullptr};
  const CUresult oom = CUDA_ERROR_OUT_OF_MEMORY;
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, &async, oom, 1);
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync, &from_pool, oom,
       2);
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemCreate, &create, oom, 3);
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, &managed, oom, 4);
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, &pitched, oom, 5);
  Call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020, &rt_async,
       cudaErrorMemoryAllocation, 6);
  std::vector<Event> ooms = sink_.EventsOfKind(EventKind::kOom);
  ASSERT_EQ(ooms.size(), 6u);
  EXPECT_EQ(ooms[0].bytes, 1000u);
  EXPECT_EQ(ooms[0].memory_kind, kMemoryPool);
  EXPECT_EQ(ooms[1].bytes, 2000u);
  EXPECT_EQ(ooms[2].bytes, 3000u);
  EXPECT_EQ(ooms[2].memory_kind, kMemoryVmm);
  EXPECT_EQ(ooms[3].bytes, 4000u);
  EXPECT_EQ(ooms[3].memory_kind, kMemoryManaged);
  EXPECT_EQ(ooms[4].bytes, 5000u);
  EXPECT_EQ(ooms[5].bytes, 6000u);
}

TEST_F(DriverCallbacksTest, PinnedHostAllocationsAreTaggedAndTheirOomsReported) {
  // cudaHostAlloc (pin_memory(), PyTorch's pinned allocator) and the driver's cuMemHostAlloc.
  PushA("dataloader:pin");
  void* host = nullptr;
  cudaHostAlloc_v3020_params rt{&host, 7000, 0};
  cuMemHostAlloc_params drv{&host, 8000, 0};
  Call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020, &rt, cudaSuccess,
       20);
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, &drv,
       CUDA_ERROR_OUT_OF_MEMORY, 21);
  Pop();
  ASSERT_TRUE(correlation_.Find(20).has_value());
  EXPECT_EQ(sink_.Name(correlation_.Find(20)->tag_id), "dataloader:pin");
  std::vector<Event> ooms = sink_.EventsOfKind(EventKind::kOom);
  ASSERT_EQ(ooms.size(), 1u);
  EXPECT_EQ(ooms[0].bytes, 8000u);
  EXPECT_EQ(ooms[0].memory_kind, kMemoryPinned);
  EXPECT_EQ(callbacks_.stats().alloc_calls, 2u);
}

TEST_F(DriverCallbacksTest, OtherErrorsAreNotOom) {
  CUdeviceptr d = 0;
  cuMemAlloc_v2_params p{&d, 10};
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &p,
       CUDA_ERROR_INVALID_VALUE, 7);
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &p, CUDA_SUCCESS, 8);
  EXPECT_TRUE(sink_.EventsOfKind(EventKind::kOom).empty());
}

TEST_F(DriverCallbacksTest, VmmCreateMapUnmapReleaseEmitsMapAndUnmap) {
  PushA("expandable");
  CUmemGenericAllocationHandle handle = 0;
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 3;
  cuMemCreate_params create{&handle, 20 << 20, &prop, 0};
  // The driver writes the handle before EXIT.
  handle = 0xabc;
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemCreate, &create, CUDA_SUCCESS, 10);
  ASSERT_TRUE(correlation_.Find(10).has_value());
  EXPECT_TRUE(correlation_.Find(10)->vmm);
  Pop();

  cuMemMap_params map{0x7f0040000000, 20 << 20, 0, 0xabc, 0};
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemMap, &map, CUDA_SUCCESS, 11);
  cuMemMap_params map2{0x7f0041400000, 20 << 20, 0, 0xabc, 0};
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemMap, &map2, CUDA_SUCCESS, 12);
  cuMemUnmap_params unmap{0x7f0040000000, 40 << 20};
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, &unmap, CUDA_SUCCESS, 13);
  cuMemRelease_params release{0xabc};
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemRelease, &release, CUDA_SUCCESS,
       14);
  // A map of the released handle is now unknown.
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemMap, &map, CUDA_SUCCESS, 15);

  std::vector<Event> maps = sink_.EventsOfKind(EventKind::kVmmMap);
  std::vector<Event> unmaps = sink_.EventsOfKind(EventKind::kVmmUnmap);
  ASSERT_EQ(maps.size(), 3u);
  // One unmap over both maps: one VMM_UNMAP for each, so that the collector removes both.
  ASSERT_EQ(unmaps.size(), 2u);
  EXPECT_EQ(maps[0].address, 0x7f0040000000u);
  EXPECT_EQ(maps[0].bytes, uint64_t{20 << 20});
  EXPECT_EQ(maps[0].device, 3u);
  EXPECT_EQ(maps[0].memory_kind, kMemoryVmm);
  // Mapped outside the range, the tag is the one open at cuMemCreate.
  EXPECT_EQ(sink_.Name(maps[0].tag_id), "expandable");
  EXPECT_EQ(sink_.Name(maps[0].source_id), "libc10_cuda.so");
  EXPECT_EQ(unmaps[0].address, 0x7f0040000000u);
  EXPECT_EQ(unmaps[0].bytes, uint64_t{20 << 20});
  EXPECT_EQ(unmaps[0].device, 3u);
  EXPECT_EQ(unmaps[1].address, 0x7f0041400000u);
  EXPECT_EQ(unmaps[1].bytes, uint64_t{20 << 20});
  EXPECT_EQ(unmaps[1].device, 3u);
  EXPECT_EQ(callbacks_.stats().vmm_unmaps, 2u);
  // cuMemRelease, cuMemMap and cuMemUnmap are marked like cuMemCreate, so that a MEMORY2
  // record of one would be skipped (a map's counted its memory twice, as an ALLOC too).
  for (uint32_t correlation : {11u, 12u, 13u, 14u}) {
    ASSERT_TRUE(correlation_.Find(correlation).has_value()) << correlation;
    EXPECT_TRUE(correlation_.Find(correlation)->vmm) << correlation;
  }
  EXPECT_EQ(maps[2].source_id, 0u);
  EXPECT_EQ(callbacks_.stats().vmm_unknown_handles, 1u);
}

// NCCL's peer buffers, CUDA IPC: physical memory another process created and exported, mapped
// here. It was counted as this rank's VMM memory (on device 0), each rank carrying its peers'.
TEST_F(DriverCallbacksTest, AMapOfAnImportedHandleIsImportedMemory) {
  CUmemGenericAllocationHandle handle = 0;
  int fd = 42;
  cuMemImportFromShareableHandle_params import{&handle, &fd,
                                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR};
  handle = 0xdef;  // the driver writes it before EXIT
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemImportFromShareableHandle, &import,
       CUDA_SUCCESS, 20);
  cuMemMap_params map{0x7f0080000000, 8 << 20, 0, 0xdef, 0};
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemMap, &map, CUDA_SUCCESS, 21);
  std::vector<Event> maps = sink_.EventsOfKind(EventKind::kVmmMap);
  ASSERT_EQ(maps.size(), 1u);
  EXPECT_EQ(maps[0].memory_kind, kMemoryVmmImported);
  EXPECT_EQ(maps[0].bytes, uint64_t{8 << 20});
  EXPECT_EQ(callbacks_.stats().vmm_imported_maps, 1u);
  EXPECT_EQ(callbacks_.stats().vmm_unknown_handles, 0u);
  // Released, the handle is forgotten: a later map of that value is unknown again.
  cuMemRelease_params release{0xdef};
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemRelease, &release, CUDA_SUCCESS,
       22);
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemMap, &map, CUDA_SUCCESS, 23);
  EXPECT_EQ(sink_.EventsOfKind(EventKind::kVmmMap).back().memory_kind, kMemoryVmm);
  EXPECT_EQ(callbacks_.stats().vmm_unknown_handles, 1u);
}

TEST_F(DriverCallbacksTest, FailedMapEmitsNothing) {
  cuMemMap_params map{0x1000, 4096, 0, 0x1, 0};
  Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemMap, &map, CUDA_ERROR_INVALID_VALUE,
       1);
  EXPECT_TRUE(sink_.events().empty());
}

// The attributes an nvtx*Ex call passes for an ASCII name.
nvtxEventAttributes_t AsciiAttributes(const char* message) {
  nvtxEventAttributes_t attr;
  std::memset(&attr, 0, sizeof attr);
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attr.message.ascii = message;
  return attr;
}

TEST_F(DriverCallbacksTest, NvtxExAndDomainVariantsFeedTheTracker) {
  nvtxEventAttributes_t attr = AsciiAttributes("step 17");
  nvtxRangePushEx_params push_ex{&attr};
  Nvtx(CUPTI_CBID_NVTX_nvtxRangePushEx, &push_ex);

  // A registered string in a domain.
  auto domain = reinterpret_cast<nvtxDomainHandle_t>(0x55);
  auto handle = reinterpret_cast<nvtxStringHandle_t>(0x66);
  nvtxDomainRegisterStringA_params reg{domain, "fsdp:registered"};
  Nvtx(CUPTI_CBID_NVTX_nvtxDomainRegisterStringA, &reg, &handle);
  nvtxEventAttributes_t attr2 = attr;
  attr2.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attr2.message.registered = handle;
  nvtxDomainRangePushEx_params dpush{domain, {&attr2}};
  Nvtx(CUPTI_CBID_NVTX_nvtxDomainRangePushEx, &dpush);
  EXPECT_EQ(sink_.Name(tracker_.CurrentTag()), "fsdp:registered");
  nvtxDomainRangePop_params dpop{domain};
  Nvtx(CUPTI_CBID_NVTX_nvtxDomainRangePop, &dpop);
  EXPECT_EQ(tracker_.CurrentTag(), 0u);
  Pop();

  // Start/end: the id comes back as the return value.
  nvtxRangeStartA_params start{"phase:weight_sync"};
  nvtxRangeId_t id = 1234;
  Nvtx(CUPTI_CBID_NVTX_nvtxRangeStartA, &start, &id);
  nvtxRangeEnd_params end{1234};
  Nvtx(CUPTI_CBID_NVTX_nvtxRangeEnd, &end);

  nvtxMarkA_params mark{"iteration 18"};
  Nvtx(CUPTI_CBID_NVTX_nvtxMarkA, &mark);
  wchar_t wide[] = L"step 19";
  nvtxRangePushW_params pushw{wide};
  Nvtx(CUPTI_CBID_NVTX_nvtxRangePushW, &pushw);
  Pop();

  std::vector<Event> steps = sink_.EventsOfKind(EventKind::kStep);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].aux, 17u);
  EXPECT_EQ(steps[1].aux, 18u);
  EXPECT_EQ(steps[2].aux, 19u);
  EXPECT_EQ(sink_.EventsOfKind(EventKind::kPhaseBegin).size(), 1u);
  EXPECT_EQ(sink_.EventsOfKind(EventKind::kPhaseEnd).size(), 1u);
  EXPECT_EQ(tracker_.stats().pops_without_push, 0u);
}

TEST_F(DriverCallbacksTest, NvtxStartEndAndMarkVariantsFeedTheTracker) {
  auto domain = reinterpret_cast<nvtxDomainHandle_t>(0x77);

  // Phases opened by each start variant and closed by each end variant, ids as return values.
  wchar_t rollout[] = L"phase:rollout";
  nvtxRangeStartW_params start_w{rollout};
  nvtxRangeId_t id_w = 11;
  Nvtx(CUPTI_CBID_NVTX_nvtxRangeStartW, &start_w, &id_w);
  nvtxEventAttributes_t weight_sync = AsciiAttributes("phase:weight_sync");
  nvtxRangeStartEx_params start_ex{&weight_sync};
  nvtxRangeId_t id_ex = 12;
  Nvtx(CUPTI_CBID_NVTX_nvtxRangeStartEx, &start_ex, &id_ex);
  nvtxEventAttributes_t actor = AsciiAttributes("phase:actor_update");
  nvtxDomainRangeStartEx_params start_domain{domain, {&actor}};
  nvtxRangeId_t id_domain = 13;
  Nvtx(CUPTI_CBID_NVTX_nvtxDomainRangeStartEx, &start_domain, &id_domain);
  EXPECT_EQ(sink_.EventsOfKind(EventKind::kPhaseBegin).size(), 3u);
  nvtxDomainRangeEnd_params end_domain{domain, {13}};
  Nvtx(CUPTI_CBID_NVTX_nvtxDomainRangeEnd, &end_domain);
  nvtxRangeEnd_params end_ex{12};
  Nvtx(CUPTI_CBID_NVTX_nvtxRangeEnd, &end_ex);
  nvtxRangeEnd_params end_w{11};
  Nvtx(CUPTI_CBID_NVTX_nvtxRangeEnd, &end_w);
  EXPECT_EQ(sink_.EventsOfKind(EventKind::kPhaseEnd).size(), 3u);

  // Steps from each mark variant.
  wchar_t step_w[] = L"step 21";
  nvtxMarkW_params mark_w{step_w};
  Nvtx(CUPTI_CBID_NVTX_nvtxMarkW, &mark_w);
  nvtxEventAttributes_t step_22 = AsciiAttributes("step 22");
  nvtxMarkEx_params mark_ex{&step_22};
  Nvtx(CUPTI_CBID_NVTX_nvtxMarkEx, &mark_ex);
  nvtxEventAttributes_t step_domain = AsciiAttributes("step 23");
  nvtxDomainMarkEx_params mark_domain{domain, {&step_domain}};
  Nvtx(CUPTI_CBID_NVTX_nvtxDomainMarkEx, &mark_domain);
  // A start whose id did not come back keeps only its step meaning.
  nvtxRangeStartA_params start_no_id{"step 24"};
  Nvtx(CUPTI_CBID_NVTX_nvtxRangeStartA, &start_no_id, nullptr);

  std::vector<Event> steps = sink_.EventsOfKind(EventKind::kStep);
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(steps[0].aux, 21u);
  EXPECT_EQ(steps[1].aux, 22u);
  EXPECT_EQ(steps[2].aux, 23u);
  EXPECT_EQ(steps[3].aux, 24u);
  EXPECT_EQ(callbacks_.stats().nvtx_calls, 10u);
  EXPECT_EQ(callbacks_.stats().nvtx_unnamed, 0u);
}

TEST_F(DriverCallbacksTest, UnreadableNvtxNameStillOpensALevel) {
  nvtxEventAttributes_t attr;
  std::memset(&attr, 0, sizeof attr);
  attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attr.message.registered = reinterpret_cast<nvtxStringHandle_t>(0x999);  // never registered
  PushA("outer");
  nvtxRangePushEx_params p{&attr};
  Nvtx(CUPTI_CBID_NVTX_nvtxRangePushEx, &p);
  EXPECT_EQ(sink_.Name(tracker_.CurrentTag()), "outer");  // the unnamed level names nothing
  Pop();
  EXPECT_EQ(sink_.Name(tracker_.CurrentTag()), "outer");
  Pop();
  EXPECT_EQ(callbacks_.stats().nvtx_unnamed, 1u);
}

TEST_F(DriverCallbacksTest, TagIsPerThread) {
  PushA("main-thread");
  std::thread other([this] {
    CUdeviceptr d = 0;
    cuMemAlloc_v2_params p{&d, 64};
    Call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &p, CUDA_SUCCESS, 90);
  });
  other.join();
  Pop();
  ASSERT_TRUE(correlation_.Find(90).has_value());
  EXPECT_EQ(correlation_.Find(90)->tag_id, 0u);
}

TEST_F(DriverCallbacksTest, CallbackIdListsAreTheHandledOnes) {
  std::vector<CUpti_CallbackId> driver = DriverCallbacks::DriverCallbackIds();
  EXPECT_NE(std::find(driver.begin(), driver.end(), CUPTI_DRIVER_TRACE_CBID_cuMemMap),
            driver.end());
  EXPECT_NE(std::find(driver.begin(), driver.end(), CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz),
            driver.end());
  std::vector<CUpti_CallbackId> nvtx = DriverCallbacks::NvtxCallbackIds();
  EXPECT_NE(std::find(nvtx.begin(), nvtx.end(), CUPTI_CBID_NVTX_nvtxRangePushA), nvtx.end());
  EXPECT_EQ(DriverCallbacks::RuntimeCallbackIds().size(), 9u);
  // The pinned host allocation calls are followed too.
  for (CUpti_CallbackId id : {CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc}) {
    EXPECT_NE(std::find(driver.begin(), driver.end(), id), driver.end()) << id;
  }
  std::vector<CUpti_CallbackId> runtime = DriverCallbacks::RuntimeCallbackIds();
  EXPECT_NE(std::find(runtime.begin(), runtime.end(), CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020),
            runtime.end());
}

}  // namespace
}  // namespace cupti
}  // namespace memtrace
