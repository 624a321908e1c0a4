// The agent's one conversation with libcupti: version check, callback subscription, activity
// kinds, activity buffers, flushing and dropped-record counts. It never fails the process:
// every CUPTI error degrades to less data and one "memtrace-agent: " log line.
//
// Degradation, in order:
//   cuptiGetVersion < 130000 or failing  -> no activity records (their layout is unknown);
//                                           callbacks still run.
//   subscribe refused (another subscriber, e.g. torch.profiler / kineto, Nsight) or
//   MEMTRACE_SUBSCRIBE=0                 -> activity only: no VMM/OOM/tag callbacks, steps and
//                                           phases come from MARKER records instead.
//   activity enable fails                -> callbacks only (VMM, OOM, NVTX) plus samples.
#ifndef MEMTRACE_AGENT_CUPTI_CUPTI_SESSION_H_
#define MEMTRACE_AGENT_CUPTI_CUPTI_SESSION_H_

#include <cupti.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "agent/cupti/agent_log.h"
#include "agent/cupti/buffer_pool.h"
#include "agent/cupti/driver_callbacks.h"

namespace memtrace {
namespace cupti {

// What the session hands over. Implementations must be thread-safe and must not block:
// the API and NVTX calls run on application threads, buffers on CUPTI's worker thread.
class CuptiHandlers {
 public:
  virtual ~CuptiHandlers() = default;
  virtual void OnApi(const ApiCall& call) = 0;
  virtual void OnNvtx(CUpti_CallbackId cbid, const void* params, const void* return_value) = 0;
  // A completed buffer of activity records (valid only during the call).
  virtual void OnActivityBuffer(uint8_t* buffer, size_t valid_size) = 0;
  // CUPTI reports `n` more records dropped (buffers declined or full).
  virtual void OnRecordsDropped(uint64_t n) = 0;
};

struct CuptiSessionOptions {
  bool subscribe = true;
  bool allocation_source = false;  // cuptiActivityEnableAllocationSource(1)
  size_t buffer_bytes = 4 << 20;
  size_t max_buffers = 8;
};

struct CuptiSessionState {
  uint32_t version = 0;                      // cuptiGetVersion, 0 when it failed
  bool records = false;                      // activity records enabled and decodable
  bool callbacks = false;                    // subscribed: API / NVTX / resource callbacks run
  std::string other_subscriber;              // who held the subscriber when ours was refused
  std::vector<std::string> cupti_libraries;  // every libcupti* mapped into the process
};

// Paths of every libcupti* shared object loaded in this process (dl_iterate_phdr), in load
// order. More than one, or one that is not libcupti.so.13 (a cu12 PyTorch's), is worth a log
// line: records then come from whichever copy CUDA's injection bound us to.
std::vector<std::string> LoadedCuptiLibraries();

class CuptiSession {
 public:
  // Starts everything it can; never fails (see the degradation list above). `handlers` and
  // `log` must outlive the session. Only one session may exist per process: CUPTI's buffer
  // callbacks carry no user data, so the session registers itself in a process-wide slot.
  static std::unique_ptr<CuptiSession> Start(const CuptiSessionOptions& options,
                                             CuptiHandlers* handlers, AgentLog* log);
  ~CuptiSession();

  // cuptiActivityFlushAll; `forced` also delivers incomplete buffers (for exit). Blocks until
  // the buffers are handed to OnActivityBuffer. Without `forced` it delivers partly filled
  // buffers too (those whose records are complete): the agent's BufferFlusher calls it.
  void Flush(bool forced);

  // cuptiGetTimestamp: CUPTI's clock now, in the ns its records carry; nullopt when it fails.
  static std::optional<int64_t> Timestamp();

  // Forced flush, then stops delivering callbacks to the handlers. Idempotent.
  void Stop();

  const CuptiSessionState& state() const { return state_; }

  // The CUPTI callbacks; public only so the C trampolines in the .cc can reach them.
  void HandleCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata);
  void HandleBufferRequest(uint8_t** buffer, size_t* size, size_t* max_records);
  void HandleBufferComplete(uint8_t* buffer, size_t size, size_t valid_size);

 private:
  CuptiSession(const CuptiSessionOptions& options, CuptiHandlers* handlers, AgentLog* log);
  void Subscribe();
  void EnableRecords();
  void CheckDropped();

  const CuptiSessionOptions options_;
  CuptiHandlers* handlers_;
  AgentLog* log_;
  BufferPool pool_;
  // One completed buffer at a time: cuptiActivityFlushAll delivers on the flushing thread while
  // CUPTI's own worker may deliver a full buffer, and two buffers translated at once would
  // interleave their records in the event stream (a FREE before its ALLOC). Whether CUPTI
  // serializes completions itself is not known (../shared/notes/cupti.md).
  absl::Mutex completion_mu_;
  CuptiSessionState state_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::atomic<bool> stopped_{false};
};

// "CUPTI_ERROR_... (N)" for log lines.
std::string CuptiResultName(CUptiResult result);

}  // namespace cupti
}  // namespace memtrace

#endif  // MEMTRACE_AGENT_CUPTI_CUPTI_SESSION_H_
