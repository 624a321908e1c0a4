#include "agent/cupti/driver_callbacks.h"

#include <optional>
#include <utility>
#include <vector>

namespace memtrace {
namespace cupti {
namespace {

Event VmmUnmap(int64_t ts_ns, uint64_t address, uint64_t bytes, uint32_t device) {
  Event e;
  e.kind = EventKind::kVmmUnmap;
  e.ts_ns = ts_ns;
  e.address = address;
  e.bytes = bytes;
  e.device = device;
  e.memory_kind = kMemoryVmm;
  return e;
}

// Per-thread nesting of allocation calls. CUPTI calls back synchronously on the thread that
// made the API call, so the nesting (runtime cudaMalloc -> driver cuMemAlloc_v2) is a property
// of the thread; a thread_local keeps the allocation path free of locks. It is shared by all
// DriverCallbacks instances, which is harmless because ENTER and EXIT always pair up.
struct ThreadCall {
  int depth = 0;
  uint32_t tag_id = 0;
  uint32_t source_id = 0;
};
thread_local ThreadCall tls_call;

struct AllocApi {
  uint64_t requested = 0;
  uint32_t memory_kind = kMemoryUnknown;
  bool vmm_create = false;
};

// The allocation calls we follow, with their requested size read from the params struct.
std::optional<AllocApi> ClassifyAlloc(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                      const void* params) {
  if (params == nullptr) return std::nullopt;
  AllocApi a;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    switch (cbid) {
      case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2:
        a.requested = static_cast<const cuMemAlloc_v2_params*>(params)->bytesize;
        a.memory_kind = kMemoryDevice;
        return a;
      case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
        auto* p = static_cast<const cuMemAllocPitch_v2_params*>(params);
        a.requested = uint64_t{p->WidthInBytes} * p->Height;
        a.memory_kind = kMemoryDevice;
        return a;
      }
      case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged:
        a.requested = static_cast<const cuMemAllocManaged_params*>(params)->bytesize;
        a.memory_kind = kMemoryManaged;
        return a;
      case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
      case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz:
        // The _ptsz params struct has the same layout.
        a.requested = static_cast<const cuMemAllocAsync_params*>(params)->bytesize;
        a.memory_kind = kMemoryPool;
        return a;
      case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
      case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz:
        a.requested = static_cast<const cuMemAllocFromPoolAsync_params*>(params)->bytesize;
        a.memory_kind = kMemoryPool;
        return a;
      case CUPTI_DRIVER_TRACE_CBID_cuMemCreate:
        a.requested = static_cast<const cuMemCreate_params*>(params)->size;
        a.memory_kind = kMemoryVmm;
        a.vmm_create = true;
        return a;
      case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2:
        a.requested = static_cast<const cuMemAllocHost_v2_params*>(params)->bytesize;
        a.memory_kind = kMemoryPinned;
        return a;
      case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc:  // PyTorch's pinned host allocator
        a.requested = static_cast<const cuMemHostAlloc_params*>(params)->bytesize;
        a.memory_kind = kMemoryPinned;
        return a;
      default:
        return std::nullopt;
    }
  }
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020:
        a.requested = static_cast<const cudaMalloc_v3020_params*>(params)->size;
        a.memory_kind = kMemoryDevice;
        return a;
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020: {
        auto* p = static_cast<const cudaMallocPitch_v3020_params*>(params);
        a.requested = uint64_t{p->width} * p->height;
        a.memory_kind = kMemoryDevice;
        return a;
      }
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000:
        a.requested = static_cast<const cudaMallocManaged_v6000_params*>(params)->size;
        a.memory_kind = kMemoryManaged;
        return a;
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020:
        a.requested = static_cast<const cudaMallocAsync_v11020_params*>(params)->size;
        a.memory_kind = kMemoryPool;
        return a;
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020:
        a.requested = static_cast<const cudaMallocFromPoolAsync_v11020_params*>(params)->size;
        a.memory_kind = kMemoryPool;
        return a;
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020:
        a.requested = static_cast<const cudaMallocHost_v3020_params*>(params)->size;
        a.memory_kind = kMemoryPinned;
        return a;
      case CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020:  // e.g. pin_memory()
        a.requested = static_cast<const cudaHostAlloc_v3020_params*>(params)->size;
        a.memory_kind = kMemoryPinned;
        return a;
      default:
        return std::nullopt;
    }
  }
  return std::nullopt;
}

bool IsOutOfMemory(const ApiCall& call) {
  if (call.return_value == nullptr) return false;
  if (call.domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    return *static_cast<const CUresult*>(call.return_value) == CUDA_ERROR_OUT_OF_MEMORY;
  }
  return *static_cast<const cudaError_t*>(call.return_value) == cudaErrorMemoryAllocation;
}

bool Succeeded(const ApiCall& call) {
  return call.return_value != nullptr &&
         *static_cast<const CUresult*>(call.return_value) == CUDA_SUCCESS;
}

// NVTX W variants carry wchar_t text; names are ASCII in practice, anything else becomes '?'.
std::string Narrow(const wchar_t* text) {
  std::string out;
  if (text == nullptr) return out;
  for (; *text != 0 && out.size() < 4096; ++text) {
    out.push_back(*text > 0 && *text < 128 ? static_cast<char>(*text) : '?');
  }
  return out;
}

std::string Ascii(const char* text) { return text == nullptr ? std::string() : text; }

}  // namespace

DriverCallbacks::DriverCallbacks(EventSink* sink, NvtxTracker* nvtx, CorrelationTable* correlation,
                                 SourceFn source, Clock clock)
    : sink_(sink),
      nvtx_(nvtx),
      correlation_(correlation),
      source_(std::move(source)),
      clock_(std::move(clock)) {}

std::vector<CUpti_CallbackId> DriverCallbacks::DriverCallbackIds() {
  return {CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
          CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
          CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
          CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
          CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
          CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
          CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
          CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
          CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,
          CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
          CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
          CUPTI_DRIVER_TRACE_CBID_cuMemMap,
          CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
          CUPTI_DRIVER_TRACE_CBID_cuMemImportFromShareableHandle};
}

std::vector<CUpti_CallbackId> DriverCallbacks::RuntimeCallbackIds() {
  return {CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
          CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020,
          CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000,
          CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
          CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
          CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020,
          CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020,
          CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020,
          CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020};
}

std::vector<CUpti_CallbackId> DriverCallbacks::NvtxCallbackIds() {
  return {CUPTI_CBID_NVTX_nvtxMarkA,
          CUPTI_CBID_NVTX_nvtxMarkW,
          CUPTI_CBID_NVTX_nvtxMarkEx,
          CUPTI_CBID_NVTX_nvtxRangeStartA,
          CUPTI_CBID_NVTX_nvtxRangeStartW,
          CUPTI_CBID_NVTX_nvtxRangeStartEx,
          CUPTI_CBID_NVTX_nvtxRangeEnd,
          CUPTI_CBID_NVTX_nvtxRangePushA,
          CUPTI_CBID_NVTX_nvtxRangePushW,
          CUPTI_CBID_NVTX_nvtxRangePushEx,
          CUPTI_CBID_NVTX_nvtxRangePop,
          CUPTI_CBID_NVTX_nvtxDomainMarkEx,
          CUPTI_CBID_NVTX_nvtxDomainRangeStartEx,
          CUPTI_CBID_NVTX_nvtxDomainRangeEnd,
          CUPTI_CBID_NVTX_nvtxDomainRangePushEx,
          CUPTI_CBID_NVTX_nvtxDomainRangePop,
          CUPTI_CBID_NVTX_nvtxDomainRegisterStringA};
}

void DriverCallbacks::OnApi(const ApiCall& call) {
  if (std::optional<AllocApi> alloc = ClassifyAlloc(call.domain, call.cbid, call.params)) {
    if (call.site == CUPTI_API_ENTER) {
      OnAllocEnter(call);
    } else {
      OnAllocExit(call);
    }
    return;
  }
  if (call.domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  if (call.site == CUPTI_API_EXIT) {
    OnVmmExit(call);
  } else if (call.cbid == CUPTI_DRIVER_TRACE_CBID_cuMemRelease ||
             call.cbid == CUPTI_DRIVER_TRACE_CBID_cuMemMap ||
             call.cbid == CUPTI_DRIVER_TRACE_CBID_cuMemUnmap) {
    // If MEMORY2 reports VMM memory, the records of these must be skipped as cuMemCreate's is
    // (VMM_MAP / VMM_UNMAP events cover them): a release's would free an allocation never added,
    // and a map's would count the mapped memory twice, once as an ALLOC (whether CUPTI 13 writes
    // such records is unknown here: ../shared/notes/cupti.md).
    CorrelationInfo info;
    info.vmm = true;
    correlation_->Put(call.correlation_id, info);
  }
}

void DriverCallbacks::OnAllocEnter(const ApiCall& call) {
  ThreadCall& t = tls_call;
  if (t.depth++ == 0) {
    alloc_calls_.fetch_add(1, std::memory_order_relaxed);
    if (call.domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
      runtime_alloc_calls_.fetch_add(1, std::memory_order_relaxed);
    }
    t.tag_id = nvtx_->CurrentTag();
    t.source_id = source_ ? source_() : 0;
  } else {
    nested_alloc_calls_.fetch_add(1, std::memory_order_relaxed);
  }
  CorrelationInfo info;
  info.tag_id = t.tag_id;
  info.source_id = t.source_id;
  info.vmm =
      call.domain == CUPTI_CB_DOMAIN_DRIVER_API && call.cbid == CUPTI_DRIVER_TRACE_CBID_cuMemCreate;
  correlation_->Put(call.correlation_id, info);
}

void DriverCallbacks::OnAllocExit(const ApiCall& call) {
  ThreadCall& t = tls_call;
  const AllocApi alloc = *ClassifyAlloc(call.domain, call.cbid, call.params);
  uint32_t tag_id = t.tag_id;
  uint32_t source_id = t.source_id;
  if (t.depth == 0) {
    // An EXIT without its ENTER (callbacks were enabled in between): no stored context.
    tag_id = nvtx_->CurrentTag();
    source_id = 0;
  } else {
    --t.depth;
  }
  // Only the outermost call reports, so a runtime call that fails inside its driver call is one
  // OOM, not two.
  if (t.depth == 0 && IsOutOfMemory(call)) {
    ooms_.fetch_add(1, std::memory_order_relaxed);
    Event e;
    e.kind = EventKind::kOom;
    e.ts_ns = clock_();
    e.bytes = alloc.requested;
    e.tag_id = tag_id;
    e.source_id = source_id;
    e.memory_kind = alloc.memory_kind;
    sink_->Record(e);
  }
  if (alloc.vmm_create && Succeeded(call)) {
    auto* p = static_cast<const cuMemCreate_params*>(call.params);
    if (p->handle != nullptr) {
      VmmHandle h;
      h.size = p->size;
      h.source_id = source_id;
      h.tag_id = tag_id;
      if (p->prop != nullptr && p->prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        h.device = static_cast<uint32_t>(p->prop->location.id);
      }
      absl::MutexLock lock(&vmm_mu_);
      handles_[static_cast<uint64_t>(*p->handle)] = h;
    }
  }
}

void DriverCallbacks::OnVmmExit(const ApiCall& call) {
  if (call.params == nullptr || !Succeeded(call)) return;
  switch (call.cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
      auto* p = static_cast<const cuMemMap_params*>(call.params);
      Event e;
      e.kind = EventKind::kVmmMap;
      e.ts_ns = clock_();
      e.address = p->ptr;
      e.bytes = p->size;
      e.memory_kind = kMemoryVmm;
      e.tag_id = nvtx_->CurrentTag();
      {
        absl::MutexLock lock(&vmm_mu_);
        auto h = handles_.find(static_cast<uint64_t>(p->handle));
        if (h != handles_.end()) {
          e.source_id = h->second.source_id;
          e.device = h->second.device;
          if (e.tag_id == 0) e.tag_id = h->second.tag_id;
        } else if (imported_.contains(static_cast<uint64_t>(p->handle))) {
          // Another process's physical memory (NCCL's peer buffers, CUDA IPC): its exporter
          // counts it. Counted as this rank's VMM memory, every rank's total carried its
          // peers' buffers too, on device 0 (the mapping does not say where they are).
          e.memory_kind = kMemoryVmmImported;
          vmm_imported_maps_.fetch_add(1, std::memory_order_relaxed);
        } else {
          vmm_unknown_handles_.fetch_add(1, std::memory_order_relaxed);
        }
        // Bounded: a process cannot have more live mappings than device memory / 2 MiB, but a
        // program that never unmaps must not grow this forever.
        if (mappings_.size() < (size_t{1} << 20)) mappings_[p->ptr] = Mapping{p->size, e.device};
      }
      vmm_maps_.fetch_add(1, std::memory_order_relaxed);
      sink_->Record(e);
      return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
      auto* p = static_cast<const cuMemUnmap_params*>(call.params);
      // One cuMemUnmap may cover several earlier maps: one VMM_UNMAP for each, as the collector
      // removes mappings by their address. An unmap of nothing known is passed on as it is.
      std::vector<Event> unmaps;
      const int64_t now = clock_();
      {
        absl::MutexLock lock(&vmm_mu_);
        auto first = mappings_.lower_bound(p->ptr);
        auto last = mappings_.lower_bound(p->ptr + p->size);
        for (auto it = first; it != last; ++it) {
          unmaps.push_back(VmmUnmap(now, it->first, it->second.size, it->second.device));
        }
        mappings_.erase(first, last);
      }
      if (unmaps.empty()) unmaps.push_back(VmmUnmap(now, p->ptr, p->size, 0));
      vmm_unmaps_.fetch_add(unmaps.size(), std::memory_order_relaxed);
      for (const Event& e : unmaps) sink_->Record(e);
      return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease: {
      auto* p = static_cast<const cuMemRelease_params*>(call.params);
      absl::MutexLock lock(&vmm_mu_);
      handles_.erase(static_cast<uint64_t>(p->handle));
      imported_.erase(static_cast<uint64_t>(p->handle));
      return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemImportFromShareableHandle: {
      auto* p = static_cast<const cuMemImportFromShareableHandle_params*>(call.params);
      if (p->handle == nullptr) return;
      absl::MutexLock lock(&vmm_mu_);
      // Bounded as the mappings are: a program that never releases must not grow it forever.
      if (imported_.size() < (size_t{1} << 20)) imported_.insert(static_cast<uint64_t>(*p->handle));
      return;
    }
    default:
      return;
  }
}

std::string DriverCallbacks::NvtxName(const nvtxEventAttributes_t* a) {
  if (a == nullptr) return std::string();
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return Ascii(a->message.ascii);
    case NVTX_MESSAGE_TYPE_UNICODE:
      return Narrow(a->message.unicode);
    case NVTX_MESSAGE_TYPE_REGISTERED: {
      absl::MutexLock lock(&strings_mu_);
      auto it = registered_.find(reinterpret_cast<uint64_t>(a->message.registered));
      return it == registered_.end() ? std::string() : it->second;
    }
    default:
      return std::string();
  }
}

void DriverCallbacks::OnNvtx(CUpti_CallbackId cbid, const void* params, const void* return_value) {
  if (params == nullptr) return;
  nvtx_calls_.fetch_add(1, std::memory_order_relaxed);
  if (cbid == CUPTI_CBID_NVTX_nvtxDomainRegisterStringA) {
    RegisterNvtxString(*static_cast<const nvtxDomainRegisterStringA_params*>(params), return_value);
    return;
  }
  ApplyNvtx(DecodeNvtx(cbid, params), return_value);
}

DriverCallbacks::NvtxCall DriverCallbacks::DecodeNvtx(CUpti_CallbackId cbid, const void* params) {
  using Op = NvtxCall::Op;
  NvtxCall call;
  switch (cbid) {
    case CUPTI_CBID_NVTX_nvtxRangePushA:
      call.op = Op::kPush;
      call.name = Ascii(static_cast<const nvtxRangePushA_params*>(params)->message);
      break;
    case CUPTI_CBID_NVTX_nvtxRangePushW:
      call.op = Op::kPush;
      call.name = Narrow(static_cast<const nvtxRangePushW_params*>(params)->message);
      break;
    case CUPTI_CBID_NVTX_nvtxRangePushEx:
      call.op = Op::kPush;
      call.name = NvtxName(static_cast<const nvtxRangePushEx_params*>(params)->eventAttrib);
      break;
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx: {
      auto* p = static_cast<const nvtxDomainRangePushEx_params*>(params);
      call.op = Op::kPush;
      call.domain = reinterpret_cast<uint64_t>(p->domain);
      call.name = NvtxName(p->core.eventAttrib);
      break;
    }
    case CUPTI_CBID_NVTX_nvtxRangePop:
      call.op = Op::kPop;
      break;
    case CUPTI_CBID_NVTX_nvtxDomainRangePop:
      call.op = Op::kPop;
      call.domain =
          reinterpret_cast<uint64_t>(static_cast<const nvtxDomainRangePop_params*>(params)->domain);
      break;
    case CUPTI_CBID_NVTX_nvtxRangeStartA:
      call.op = Op::kStart;
      call.name = Ascii(static_cast<const nvtxRangeStartA_params*>(params)->message);
      break;
    case CUPTI_CBID_NVTX_nvtxRangeStartW:
      call.op = Op::kStart;
      call.name = Narrow(static_cast<const nvtxRangeStartW_params*>(params)->message);
      break;
    case CUPTI_CBID_NVTX_nvtxRangeStartEx:
      call.op = Op::kStart;
      call.name = NvtxName(static_cast<const nvtxRangeStartEx_params*>(params)->eventAttrib);
      break;
    case CUPTI_CBID_NVTX_nvtxDomainRangeStartEx:
      call.op = Op::kStart;
      call.name =
          NvtxName(static_cast<const nvtxDomainRangeStartEx_params*>(params)->core.eventAttrib);
      break;
    case CUPTI_CBID_NVTX_nvtxRangeEnd:
      call.op = Op::kEnd;
      call.end_id = static_cast<const nvtxRangeEnd_params*>(params)->id;
      break;
    case CUPTI_CBID_NVTX_nvtxDomainRangeEnd:
      call.op = Op::kEnd;
      call.end_id = static_cast<const nvtxDomainRangeEnd_params*>(params)->core.id;
      break;
    case CUPTI_CBID_NVTX_nvtxMarkA:
      call.op = Op::kMark;
      call.name = Ascii(static_cast<const nvtxMarkA_params*>(params)->message);
      break;
    case CUPTI_CBID_NVTX_nvtxMarkW:
      call.op = Op::kMark;
      call.name = Narrow(static_cast<const nvtxMarkW_params*>(params)->message);
      break;
    case CUPTI_CBID_NVTX_nvtxMarkEx:
      call.op = Op::kMark;
      call.name = NvtxName(static_cast<const nvtxMarkEx_params*>(params)->eventAttrib);
      break;
    case CUPTI_CBID_NVTX_nvtxDomainMarkEx:
      call.op = Op::kMark;
      call.name = NvtxName(static_cast<const nvtxDomainMarkEx_params*>(params)->core.eventAttrib);
      break;
    default:
      break;
  }
  return call;
}

void DriverCallbacks::ApplyNvtx(const NvtxCall& call, const void* return_value) {
  switch (call.op) {
    case NvtxCall::Op::kPush:
      // An unnamed push still opens a level, so that its pop closes the right one.
      if (call.name.empty()) nvtx_unnamed_.fetch_add(1, std::memory_order_relaxed);
      nvtx_->Push(call.domain, call.name);
      return;
    case NvtxCall::Op::kPop:
      nvtx_->Pop(call.domain);
      return;
    case NvtxCall::Op::kStart:
      if (return_value == nullptr) {
        // Without the id the range could never be ended: only its step meaning is kept.
        nvtx_->Mark(call.name);
        return;
      }
      if (call.name.empty()) nvtx_unnamed_.fetch_add(1, std::memory_order_relaxed);
      nvtx_->Start(*static_cast<const nvtxRangeId_t*>(return_value), call.name);
      return;
    case NvtxCall::Op::kEnd:
      nvtx_->End(call.end_id);
      return;
    case NvtxCall::Op::kMark:
      nvtx_->Mark(call.name);
      return;
    case NvtxCall::Op::kNone:
      return;
  }
}

void DriverCallbacks::RegisterNvtxString(const nvtxDomainRegisterStringA_params& params,
                                         const void* return_value) {
  if (return_value == nullptr || params.string == nullptr) return;
  auto handle = *static_cast<const nvtxStringHandle_t*>(return_value);
  absl::MutexLock lock(&strings_mu_);
  if (registered_.size() < 65536) {
    registered_[reinterpret_cast<uint64_t>(handle)] = params.string;
  }
}

DriverCallbackStats DriverCallbacks::stats() const {
  DriverCallbackStats s;
  s.alloc_calls = alloc_calls_.load();
  s.runtime_alloc_calls = runtime_alloc_calls_.load();
  s.nested_alloc_calls = nested_alloc_calls_.load();
  s.ooms = ooms_.load();
  s.vmm_maps = vmm_maps_.load();
  s.vmm_unmaps = vmm_unmaps_.load();
  s.vmm_unknown_handles = vmm_unknown_handles_.load();
  s.vmm_imported_maps = vmm_imported_maps_.load();
  s.nvtx_calls = nvtx_calls_.load();
  s.nvtx_unnamed = nvtx_unnamed_.load();
  return s;
}

}  // namespace cupti
}  // namespace memtrace
