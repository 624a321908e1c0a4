#include "agent/cupti/cupti_session.h"

#include <link.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/cupti/fork_guard.h"

namespace memtrace {
namespace cupti {
namespace {

// CUPTI's buffer callbacks (CUpti_BuffersCallbackRequestFunc / CompleteFunc) carry no user
// data, so the session that owns the buffers is found through this process-wide slot. It is
// the only global of the CUPTI layer besides the injection entry point.
std::atomic<CuptiSession*> g_buffer_session{nullptr};

constexpr uint32_t kMinCuptiVersion = 130000;  // CUPTI 13.0: CUpti_ActivityMemory4 etc.

// The trampolines never let an exception reach CUPTI's C frames.
void CUPTIAPI OnCallback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* cbdata) {
  if (InForkedChild()) return;  // fork_guard.h
  try {
    static_cast<CuptiSession*>(userdata)->HandleCallback(domain, cbid, cbdata);
  } catch (...) {
  }
}

void CUPTIAPI OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;
  if (InForkedChild()) return;  // no buffer: CUPTI drops the child's records
  try {
    if (CuptiSession* s = g_buffer_session.load(std::memory_order_acquire)) {
      s->HandleBufferRequest(buffer, size, max_records);
    }
  } catch (...) {
  }
}

void CUPTIAPI OnBufferCompleted(CUcontext /*context, deprecated*/, uint32_t /*stream, deprecated*/,
                                uint8_t* buffer, size_t size, size_t valid_size) {
  if (InForkedChild()) return;  // the parent's buffer, in a copy of its memory: nothing to do
  try {
    if (CuptiSession* s = g_buffer_session.load(std::memory_order_acquire)) {
      s->HandleBufferComplete(buffer, size, valid_size);
    }
  } catch (...) {
  }
}

}  // namespace

std::vector<std::string> LoadedCuptiLibraries() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        const char* name = info->dlpi_name;
        if (name != nullptr && std::strstr(name, "libcupti") != nullptr) {
          const char* slash = std::strrchr(name, '/');
          if (std::strncmp(slash != nullptr ? slash + 1 : name, "libcupti", 8) == 0) {
            static_cast<std::vector<std::string>*>(data)->emplace_back(name);
          }
        }
        return 0;
      },
      &paths);
  return paths;
}

std::string CuptiResultName(CUptiResult result) {
  const char* name = nullptr;
  if (cuptiGetResultString(result, &name) != CUPTI_SUCCESS || name == nullptr) name = "?";
  return absl::StrCat(name, " (", static_cast<int>(result), ")");
}

std::unique_ptr<CuptiSession> CuptiSession::Start(const CuptiSessionOptions& options,
                                                  CuptiHandlers* handlers, AgentLog* log) {
  // Before anything CUPTI can call back into: a child forked from here on ignores the callbacks.
  InstallForkGuard();
  std::unique_ptr<CuptiSession> s(new CuptiSession(options, handlers, log));
  uint32_t version = 0;
  CUptiResult r = cuptiGetVersion(&version);
  if (r != CUPTI_SUCCESS) {
    log->Once("version", absl::StrCat("cuptiGetVersion failed: ", CuptiResultName(r),
                                      "; activity record decoding disabled"));
  } else {
    s->state_.version = version;
    if (version < kMinCuptiVersion) {
      log->Once("version", absl::StrCat("CUPTI API version ", version, " < ", kMinCuptiVersion,
                                        " (CUDA 13): activity record decoding disabled, "
                                        "callbacks only"));
    }
  }
  s->state_.cupti_libraries = LoadedCuptiLibraries();
  bool foreign_major = false;
  for (const std::string& path : s->state_.cupti_libraries) {
    if (path.find("libcupti.so.13") == std::string::npos) foreign_major = true;
  }
  if (s->state_.cupti_libraries.size() > 1 || foreign_major) {
    std::string list;
    for (const std::string& path : s->state_.cupti_libraries) {
      absl::StrAppend(&list, list.empty() ? "" : ", ", path);
    }
    log->Once("cupti_copies",
              absl::StrCat(s->state_.cupti_libraries.size(), " libcupti copies loaded (", list,
                           "); the agent uses the libcupti.so.13 it links"));
  }
  if (options.subscribe) {
    s->Subscribe();
  } else {
    log->Once("subscribe",
              "MEMTRACE_SUBSCRIBE=0: activity records only (no VMM, OOM or tag "
              "callbacks; steps from NVTX marker records)");
  }
  if (s->state_.version >= kMinCuptiVersion) s->EnableRecords();
  return s;
}

CuptiSession::CuptiSession(const CuptiSessionOptions& options, CuptiHandlers* handlers,
                           AgentLog* log)
    : options_(options),
      handlers_(handlers),
      log_(log),
      pool_(options.buffer_bytes, options.max_buffers) {}

CuptiSession::~CuptiSession() {
  Stop();
  if (subscriber_ != nullptr) cuptiUnsubscribe(subscriber_);
  CuptiSession* self = this;
  g_buffer_session.compare_exchange_strong(self, nullptr);
}

void CuptiSession::Subscribe() {
  char old_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 64];
  std::memset(old_name, 0, sizeof old_name);
  CUpti_SubscriberParams params;
  std::memset(&params, 0, sizeof params);
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "memtrace";
  params.oldSubscriberName = old_name;
  params.oldSubscriberSize = sizeof old_name;
  CUptiResult r = cuptiSubscribe_v2(&subscriber_, &OnCallback, this, &params);
  if (r != CUPTI_SUCCESS) {
    subscriber_ = nullptr;
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
      state_.other_subscriber = old_name[0] != 0 ? old_name : "unnamed";
      log_->Once("subscribe",
                 absl::StrCat("CUPTI subscriber already held by \"", state_.other_subscriber,
                              "\": continuing with activity records only (no VMM, OOM or tag "
                              "callbacks; steps from NVTX marker records)"));
    } else {
      log_->Once("subscribe", absl::StrCat("cuptiSubscribe_v2 failed: ", CuptiResultName(r),
                                           "; continuing with activity records only"));
    }
    return;
  }
  state_.callbacks = true;
  int failures = 0;
  std::string first_failure;
  auto enable = [&](CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    CUptiResult e = cuptiEnableCallback(1, subscriber_, domain, cbid);
    if (e != CUPTI_SUCCESS && failures++ == 0) {
      first_failure = absl::StrCat("domain ", static_cast<int>(domain), " cbid ", cbid, ": ",
                                   CuptiResultName(e));
    }
  };
  for (CUpti_CallbackId id : DriverCallbacks::DriverCallbackIds()) {
    enable(CUPTI_CB_DOMAIN_DRIVER_API, id);
  }
  for (CUpti_CallbackId id : DriverCallbacks::RuntimeCallbackIds()) {
    enable(CUPTI_CB_DOMAIN_RUNTIME_API, id);
  }
  for (CUpti_CallbackId id : DriverCallbacks::NvtxCallbackIds()) enable(CUPTI_CB_DOMAIN_NVTX, id);
  enable(CUPTI_CB_DOMAIN_STATE, CUPTI_CBID_STATE_FATAL_ERROR);
  if (failures > 0) {
    log_->Once("enable_callback", absl::StrCat(failures,
                                               " callback(s) could not be enabled, "
                                               "first: ",
                                               first_failure));
  }
}

void CuptiSession::EnableRecords() {
  CuptiSession* expected = nullptr;
  if (!g_buffer_session.compare_exchange_strong(expected, this)) {
    log_->Once("session",
               "a second CUPTI session in one process: activity records stay with "
               "the first");
    return;
  }
  // One global buffer stream instead of CUPTI's default of one per thread: per-thread buffers
  // are handed over independently, so a free on one thread could reach the collector before
  // the allocation it frees made on another, and each recording thread would hold one of the
  // pool's few buffers. Must precede RegisterCallbacks and any activity kind (the header).
  uint8_t per_thread = 0;
  size_t per_thread_size = sizeof per_thread;
  CUptiResult r = cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER,
                                            &per_thread_size, &per_thread);
  if (r != CUPTI_SUCCESS) {
    log_->Once(
        "per_thread_buffers",
        absl::StrCat("cuptiActivitySetAttribute(PER_THREAD_ACTIVITY_BUFFER, 0) failed: ",
                     CuptiResultName(r), "; records of different threads may arrive out of order"));
  }
  r = cuptiActivityRegisterCallbacks(&OnBufferRequested, &OnBufferCompleted);
  if (r != CUPTI_SUCCESS) {
    log_->Once("register", absl::StrCat("cuptiActivityRegisterCallbacks failed: ",
                                        CuptiResultName(r), "; no activity records"));
    return;
  }
  if (options_.allocation_source) {
    // Must precede enabling MEMORY2 so that every record carries its source.
    r = cuptiActivityEnableAllocationSource(1);
    if (r != CUPTI_SUCCESS) {
      log_->Once("allocation_source",
                 absl::StrCat("cuptiActivityEnableAllocationSource failed: ", CuptiResultName(r)));
    }
  }
  r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2);
  if (r != CUPTI_SUCCESS) {
    log_->Once("enable_memory2",
               absl::StrCat("CUDA/CUPTI unavailable: cuptiActivityEnable(MEMORY2) failed: ",
                            CuptiResultName(r), "; no activity records"));
    return;
  }
  state_.records = true;
  const CUpti_ActivityKind more[] = {CUPTI_ACTIVITY_KIND_MEMORY_POOL, CUPTI_ACTIVITY_KIND_MARKER};
  for (CUpti_ActivityKind kind : more) {
    r = cuptiActivityEnable(kind);
    if (r != CUPTI_SUCCESS) {
      log_->Once(absl::StrCat("enable_", static_cast<int>(kind)),
                 absl::StrCat("cuptiActivityEnable(kind ", static_cast<int>(kind),
                              ") failed: ", CuptiResultName(r)));
    }
  }
}

void CuptiSession::HandleCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                  const void* cbdata) {
  if (cbdata == nullptr || stopped_.load(std::memory_order_acquire)) return;
  switch (domain) {
    case CUPTI_CB_DOMAIN_DRIVER_API:
    case CUPTI_CB_DOMAIN_RUNTIME_API: {
      auto* d = static_cast<const CUpti_CallbackData*>(cbdata);
      ApiCall call;
      call.domain = domain;
      call.cbid = cbid;
      call.site = d->callbackSite;
      call.params = d->functionParams;
      call.return_value = d->callbackSite == CUPTI_API_EXIT ? d->functionReturnValue : nullptr;
      call.correlation_id = d->correlationId;
      handlers_->OnApi(call);
      return;
    }
    case CUPTI_CB_DOMAIN_NVTX: {
      auto* d = static_cast<const CUpti_NvtxData*>(cbdata);
      handlers_->OnNvtx(cbid, d->functionParams, d->functionReturnValue);
      return;
    }
    case CUPTI_CB_DOMAIN_STATE: {
      auto* d = static_cast<const CUpti_StateData*>(cbdata);
      if (cbid == CUPTI_CBID_STATE_FATAL_ERROR) {
        log_->Once("fatal",
                   absl::StrCat("CUPTI fatal error ", CuptiResultName(d->notification.result), ": ",
                                d->notification.message != nullptr ? d->notification.message : "",
                                "; CUPTI detaches itself, recording stops"));
      }
      return;
    }
    default:
      return;
  }
}

void CuptiSession::HandleBufferRequest(uint8_t** buffer, size_t* size, size_t* max_records) {
  uint8_t* b = pool_.Acquire();
  if (b == nullptr) {
    log_->Once("buffers", absl::StrCat("all ", options_.max_buffers, " activity buffers of ",
                                       pool_.buffer_bytes() >> 10,
                                       " KiB are in use: CUPTI drops records (reported as "
                                       "LOSS events)"));
    return;
  }
  *buffer = b;
  *size = pool_.buffer_bytes();
  *max_records = 0;  // as many as fit
}

void CuptiSession::HandleBufferComplete(uint8_t* buffer, size_t /*size*/, size_t valid_size) {
  if (!pool_.Owns(buffer)) {
    // Another CUPTI client (kineto) registered its callbacks, then ours replaced them, or the
    // other way round: its buffer is not ours to read or free.
    log_->Once("foreign_buffer",
               "ignoring an activity buffer the agent did not allocate "
               "(another CUPTI client in this process?)");
    return;
  }
  // Translated even after Stop(): the forced flush at exit delivers the last records here.
  {
    absl::MutexLock lock(&completion_mu_);
    if (valid_size > 0) handlers_->OnActivityBuffer(buffer, valid_size);
  }
  // Outside the lock: a CUPTI call that could wait on CUPTI's own locks while another thread
  // delivers a buffer must not hold ours.
  CheckDropped();
  pool_.Release(buffer);
}

void CuptiSession::CheckDropped() {
  size_t dropped = 0;
  // Null context: the global queue. The count is reset by each call.
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    handlers_->OnRecordsDropped(dropped);
  }
}

void CuptiSession::Flush(bool forced) {
  if (!state_.records) return;
  CUptiResult r = cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
  if (r != CUPTI_SUCCESS) {
    log_->Once("flush", absl::StrCat("cuptiActivityFlushAll failed: ", CuptiResultName(r)));
  }
  CheckDropped();
}

std::optional<int64_t> CuptiSession::Timestamp() {
  uint64_t ts = 0;
  if (cuptiGetTimestamp(&ts) != CUPTI_SUCCESS) return std::nullopt;
  return static_cast<int64_t>(ts);
}

void CuptiSession::Stop() {
  if (stopped_.exchange(true)) return;
  Flush(/*forced=*/true);
}

}  // namespace cupti
}  // namespace memtrace
