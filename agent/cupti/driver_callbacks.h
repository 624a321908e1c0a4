// The CUPTI callback logic, as plain functions over what a callback receives (domain, callback
// id, site, the params struct, the return value), so it is tested with real params structs from
// generated_cuda_meta.h / generated_cuda_runtime_api_meta.h / generated_nvtx_meta.h.
//
// What it does:
// - Allocation calls (driver cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemAllocManaged,
//   cuMemAllocAsync(_ptsz), cuMemAllocFromPoolAsync(_ptsz), cuMemCreate, cuMemAllocHost_v2 and
//   their runtime counterparts): at ENTER of the outermost one on a thread, take the NVTX tag and
//   the owning shared object, and store them under the call's correlation id, where the record
//   translator finds them when the MEMORY2 record arrives. A runtime call and the driver call it
//   makes inside are one allocation: the nested one reuses the outer one's tag and source.
// - Out of memory: at EXIT of the outermost allocation call returning CUDA_ERROR_OUT_OF_MEMORY /
//   cudaErrorMemoryAllocation, an EVENT_KIND_OOM with the requested bytes, tag and source.
// - VMM (expandable segments): cuMemCreate remembers handle -> size/source/device, cuMemMap emits
//   VMM_MAP, cuMemUnmap emits VMM_UNMAP, cuMemRelease forgets the handle.
// - NVTX: push/pop, start/end, marks and their domain variants feed the NvtxTracker.
#ifndef MEMTRACE_AGENT_CUPTI_DRIVER_CALLBACKS_H_
#define MEMTRACE_AGENT_CUPTI_DRIVER_CALLBACKS_H_

#include <cupti.h>
#include <generated_nvtx_meta.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "agent/cupti/clock.h"
#include "agent/cupti/correlation_table.h"
#include "agent/cupti/nvtx_tracker.h"
#include "agent/stream/event_sink.h"

namespace memtrace {
namespace cupti {

// What a driver or runtime API callback receives (CUpti_CallbackData, flattened).
struct ApiCall {
  CUpti_CallbackDomain domain = CUPTI_CB_DOMAIN_DRIVER_API;
  CUpti_CallbackId cbid = 0;
  CUpti_ApiCallbackSite site = CUPTI_API_ENTER;
  const void* params = nullptr;        // the generated *_params struct of `cbid`
  const void* return_value = nullptr;  // CUresult* (driver) / cudaError_t* (runtime), EXIT only
  uint32_t correlation_id = 0;
};

struct DriverCallbackStats {
  uint64_t alloc_calls = 0;          // outermost allocation calls seen at ENTER
  uint64_t runtime_alloc_calls = 0;  // of which runtime API (cudaMalloc...) calls
  // Allocation calls made inside another one on the same thread (a driver cuMemAlloc_v2
  // inside cudaMalloc): non-zero answers "do runtime calls fire nested driver callbacks".
  uint64_t nested_alloc_calls = 0;
  uint64_t ooms = 0;
  uint64_t vmm_maps = 0;
  uint64_t vmm_unmaps = 0;
  uint64_t vmm_unknown_handles = 0;  // cuMemMap of a handle whose cuMemCreate was not seen
  // cuMemMap of a handle imported from another process (cuMemImportFromShareableHandle):
  // MEMORY_KIND_VMM_IMPORTED, its exporter's memory.
  uint64_t vmm_imported_maps = 0;
  uint64_t nvtx_calls = 0;
  uint64_t nvtx_unnamed = 0;  // ranges whose name could not be read (e.g. unknown handle)
};

class DriverCallbacks {
 public:
  // Returns the source id of the current call stack (0 = unknown); null disables sources.
  using SourceFn = std::function<uint32_t()>;

  // All pointers must outlive this object.
  DriverCallbacks(EventSink* sink, NvtxTracker* nvtx, CorrelationTable* correlation,
                  SourceFn source, Clock clock);

  // Handles one driver/runtime API callback. Thread-safe; called on the application thread.
  void OnApi(const ApiCall& call);

  // Handles one CUPTI_CB_DOMAIN_NVTX callback (CUpti_NvtxData's params / return value).
  void OnNvtx(CUpti_CallbackId cbid, const void* params, const void* return_value);

  // The callback ids OnApi / OnNvtx act on, for cuptiEnableCallback.
  static std::vector<CUpti_CallbackId> DriverCallbackIds();
  static std::vector<CUpti_CallbackId> RuntimeCallbackIds();
  static std::vector<CUpti_CallbackId> NvtxCallbackIds();

  DriverCallbackStats stats() const;

 private:
  struct VmmHandle {
    uint64_t size = 0;
    uint32_t source_id = 0;
    uint32_t tag_id = 0;
    uint32_t device = 0;
  };
  struct Mapping {
    uint64_t size = 0;
    uint32_t device = 0;
  };

  void OnAllocEnter(const ApiCall& call);
  void OnAllocExit(const ApiCall& call);
  void OnVmmExit(const ApiCall& call);
  std::string NvtxName(const nvtxEventAttributes_t* attributes);

  // One NVTX range or mark call, read from its callback's params.
  struct NvtxCall {
    enum class Op { kNone, kPush, kPop, kStart, kEnd, kMark };
    Op op = Op::kNone;
    std::string name;          // kPush, kStart, kMark; empty when it could not be read
    uint64_t domain = 0;       // kPush, kPop: the domain handle (0: the default domain)
    nvtxRangeId_t end_id = 0;  // kEnd: the range ended
  };
  // kNone for a callback id the agent does not act on.
  NvtxCall DecodeNvtx(CUpti_CallbackId cbid, const void* params);
  // Passes the call on to the NvtxTracker; `return_value` is kStart's range id.
  void ApplyNvtx(const NvtxCall& call, const void* return_value);
  // Keeps the text of an nvtxDomainRegisterStringA handle, for names given by handle.
  void RegisterNvtxString(const nvtxDomainRegisterStringA_params& params, const void* return_value);

  EventSink* sink_;
  NvtxTracker* nvtx_;
  CorrelationTable* correlation_;
  SourceFn source_;
  Clock clock_;

  absl::Mutex vmm_mu_;
  absl::flat_hash_map<uint64_t, VmmHandle> handles_ ABSL_GUARDED_BY(vmm_mu_);
  // Handles cuMemImportFromShareableHandle returned: another process's physical memory.
  absl::flat_hash_set<uint64_t> imported_ ABSL_GUARDED_BY(vmm_mu_);
  std::map<uint64_t, Mapping> mappings_ ABSL_GUARDED_BY(vmm_mu_);  // by mapped address

  absl::Mutex strings_mu_;
  // nvtxDomainRegisterStringA handles -> text, for NVTX_MESSAGE_TYPE_REGISTERED names.
  absl::flat_hash_map<uint64_t, std::string> registered_ ABSL_GUARDED_BY(strings_mu_);

  std::atomic<uint64_t> alloc_calls_{0};
  std::atomic<uint64_t> runtime_alloc_calls_{0};
  std::atomic<uint64_t> nested_alloc_calls_{0};
  std::atomic<uint64_t> ooms_{0};
  std::atomic<uint64_t> vmm_maps_{0};
  std::atomic<uint64_t> vmm_unmaps_{0};
  std::atomic<uint64_t> vmm_unknown_handles_{0};
  std::atomic<uint64_t> vmm_imported_maps_{0};
  std::atomic<uint64_t> nvtx_calls_{0};
  std::atomic<uint64_t> nvtx_unnamed_{0};
};

}  // namespace cupti
}  // namespace memtrace

#endif  // MEMTRACE_AGENT_CUPTI_DRIVER_CALLBACKS_H_
