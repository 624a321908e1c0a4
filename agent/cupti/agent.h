// The whole agent inside a traced process: options and identity from the environment, the
// Transport to the collector, and the CUPTI pieces wired to it (session -> callbacks / record
// translator -> transport; sampler -> transport). Built once by InitializeInjection.
#ifndef MEMTRACE_AGENT_CUPTI_AGENT_H_
#define MEMTRACE_AGENT_CUPTI_AGENT_H_

#include <atomic>
#include <memory>

#include "agent/cupti/agent_log.h"
#include "agent/cupti/agent_options.h"
#include "agent/cupti/alloc_source.h"
#include "agent/cupti/buffer_flusher.h"
#include "agent/cupti/correlation_table.h"
#include "agent/cupti/cupti_session.h"
#include "agent/cupti/driver_callbacks.h"
#include "agent/cupti/driver_memory.h"
#include "agent/cupti/nvtx_tracker.h"
#include "agent/cupti/record_order.h"
#include "agent/cupti/record_translator.h"
#include "agent/cupti/sampler.h"
#include "agent/identity/env.h"
#include "agent/stream/transport.h"

namespace memtrace {
namespace cupti {

class Agent : public CuptiHandlers {
 public:
  // Reads options and identity from `env`, starts the transport and attaches to CUPTI with
  // whatever degradation CUPTI forces. Null when the agent is disabled (MEMTRACE_DISABLE=1)
  // or the transport cannot be configured; the reason is logged. `log` must outlive the agent.
  static std::unique_ptr<Agent> Start(const EnvLookup& env, AgentLog* log);

  ~Agent() override;  // Shutdown()

  // Forced CUPTI flush, sampler stop, then the transport drains for at most the configured
  // shutdown timeout. Idempotent; returns within about that timeout + 1 s.
  void Shutdown();
  const AgentOptions& options() const { return options_; }

  const CuptiSessionState& cupti_state() const { return session_->state(); }
  TransportStats transport_stats() const { return transport_->stats(); }
  TranslatorStats translator_stats() const { return translator_->stats(); }

  // CuptiHandlers.
  void OnApi(const ApiCall& call) override;
  void OnNvtx(CUpti_CallbackId cbid, const void* params, const void* return_value) override;
  void OnActivityBuffer(uint8_t* buffer, size_t valid_size) override;
  void OnRecordsDropped(uint64_t n) override;

 private:
  Agent(AgentOptions options, AgentLog* log);
  // The parts of Start after the transport, in the order they must happen: the recorders that
  // turn callbacks and records into events, the device sampler (not yet running), then the CUPTI
  // session, after which callbacks arrive and the flusher and the sampler start.
  void BuildRecorders();
  void StartSampler();
  void StartSession();
  // Whether CUPTI's record timestamps are on CLOCK_REALTIME, the callback events' clock.
  void CompareClocks();

  const AgentOptions options_;
  AgentLog* log_;
  // Declaration order is construction order: the transport first (everything writes to it),
  // the session last (it starts delivering callbacks as soon as it exists).
  std::unique_ptr<Transport> transport_;
  // Between the recorders and the transport: callback events wait for the records before them.
  std::unique_ptr<RecordOrder> order_;
  std::unique_ptr<BufferFlusher> flusher_;
  std::unique_ptr<NvtxTracker> nvtx_;
  std::unique_ptr<CorrelationTable> correlation_;
  std::unique_ptr<AllocSourceResolver> sources_;
  std::unique_ptr<DriverCallbacks> callbacks_;
  std::unique_ptr<RangeClassifier> classifier_;
  std::unique_ptr<RecordTranslator> translator_;
  std::unique_ptr<DriverMemorySource> devices_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<CuptiSession> session_;
  std::atomic<bool> shut_down_{false};
  std::atomic<bool> shutdown_finished_{false};
};

}  // namespace cupti
}  // namespace memtrace

#endif  // MEMTRACE_AGENT_CUPTI_AGENT_H_
