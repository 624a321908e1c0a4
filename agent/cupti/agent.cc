#include "agent/cupti/agent.h"

#include <dlfcn.h>

#include <exception>
#include <functional>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/identity/env.h"
#include "agent/identity/transport_env.h"
#include "agent/stream/stderr_lines.h"

namespace memtrace {
namespace cupti {
namespace {

// Callback events waiting for the records before them; a step or phase marker a few ms apart,
// so this many is far more than a flush period's worth. A full hold lets its oldest go early.
constexpr size_t kMaxHeldCallbackEvents = 4096;
// CUPTI's clock and CLOCK_REALTIME count as one when they read this close.
constexpr int64_t kSameClockNs = 50'000'000;

// TransportOptions from the environment; a process started without any launcher or
// MEMTRACE_JOB_ID still gets traced, under a job id of its own.
absl::StatusOr<TransportOptions> TransportFromEnv(const EnvLookup& env, AgentLog* log) {
  absl::StatusOr<TransportOptions> t = TransportOptionsFromEnvironment(env);
  // Set but empty (an unset template variable) is not given, as everywhere in env.h.
  if (t.ok() || EnvNonEmpty(env, "MEMTRACE_JOB_ID").has_value()) return t;
  const ProcessFacts facts = CurrentProcessFacts();
  EnvLookup with_job = [&env](const std::string& name) -> std::optional<std::string> {
    if (name == "MEMTRACE_JOB_ID") return std::string("local");  // replaced below
    return env(name);
  };
  absl::StatusOr<TransportOptions> retry = TransportOptionsFromEnvironment(with_job, facts);
  if (retry.ok()) {
    // A rank of a world of several shares its launcher's job (LocalJobId).
    const std::string job = LocalJobId(facts, retry->identity.world_size());
    retry->identity.set_job_id(job);
    log->Once("job_id", absl::StrCat("no job id in the environment (", t.status().message(),
                                     "); using MEMTRACE_JOB_ID=", job));
    return retry;
  }
  return t;
}

// The transport to the collector, from the environment; null (with the reason logged) when it
// cannot be configured or started.
std::unique_ptr<Transport> StartTransport(const EnvLookup& env, AgentLog* log,
                                          std::string* collector, v1::RankIdentity* identity) {
  absl::StatusOr<TransportOptions> options = TransportFromEnv(env, log);
  if (!options.ok()) {
    log->Once("config", absl::StrCat("not recording: ", options.status().message()));
    return nullptr;
  }
  *collector = options->collector_address;
  *identity = options->identity;
  absl::StatusOr<std::unique_ptr<Transport>> transport = Transport::Start(*std::move(options));
  if (!transport.ok()) {
    log->Once("transport",
              absl::StrCat("not recording: transport: ", transport.status().message()));
    return nullptr;
  }
  return *std::move(transport);
}

// Without NVTX_INJECTION64_PATH, NVTX stays a no-op in every library that initialises it, so no
// step, phase or tag reaches the callbacks: say so once, naming what to set it to.
void HintNvtxInjection(const EnvLookup& env, AgentLog* log) {
  if (env("NVTX_INJECTION64_PATH").has_value()) return;
  Dl_info self;
  const char* path =
      dladdr(reinterpret_cast<void*>(&TransportFromEnv), &self) != 0 && self.dli_fname != nullptr
          ? self.dli_fname
          : "libmemtrace_agent.so";
  log->Once("nvtx_hint", absl::StrCat("NVTX_INJECTION64_PATH is not set: NVTX ranges (steps, "
                                      "phases, tags) will not be seen; set it to ",
                                      path,
                                      " (or to the libcupti.so.13 in use) before the process "
                                      "starts"));
}

}  // namespace

std::unique_ptr<Agent> Agent::Start(const EnvLookup& env, AgentLog* log) {
  ParsedAgentOptions parsed = ParseAgentOptions(env);
  for (const std::string& w : parsed.warnings) log->Once(w, w);
  if (parsed.options.disabled) {
    log->Once("disabled", "disabled by MEMTRACE_DISABLE=1: not recording");
    return nullptr;
  }
  std::string collector;
  v1::RankIdentity identity;
  std::unique_ptr<Transport> transport = StartTransport(env, log, &collector, &identity);
  if (transport == nullptr) return nullptr;

  std::unique_ptr<Agent> a(new Agent(parsed.options, log));
  a->transport_ = std::move(transport);
  try {
    a->BuildRecorders();
    a->StartSampler();
    a->StartSession();
  } catch (const std::exception& e) {
    // Out of memory while building. Once StartSession has subscribed, CUPTI may call into the
    // agent from any thread, and destroying it under those calls (as the caller's unwinding
    // would, inside cuInit) frees what they use: it is left as it is, never destroyed.
    log->Once("start_failed", absl::StrCat("could not start (", e.what(),
                                           "); recording as far as it got, no drain at exit"));
    static_cast<void>(a.release());
    return nullptr;
  }
  const CuptiSessionState& st = a->session_->state();
  // Activity-only (kineto or Nsight holds the subscriber) needs it too: MARKER records come only
  // through the NVTX injection (../shared/notes/cupti.md §4).
  if (st.callbacks || st.records) HintNvtxInjection(env, log);
  const AgentOptions& o = a->options_;
  log->Once("attached",
            absl::StrCat("attached: job ", identity.job_id(), " rank ", identity.rank(), " pid ",
                         identity.pid(), " -> collector ", collector, "; CUPTI ", st.version,
                         ", records ", st.records ? "on" : "off", ", callbacks ",
                         st.callbacks ? "on" : "off", ", samples every ", o.sample_ms, " ms",
                         st.cupti_libraries.empty() ? "" : ", libcupti ",
                         st.cupti_libraries.empty() ? "" : st.cupti_libraries.front()));
  return a;
}

void Agent::BuildRecorders() {
  const AgentOptions& o = options_;
  EventSink* sink = transport_.get();
  // The flusher exists before any callback can arrive (StartSession makes it first); its thread
  // starts after the session does.
  order_ = std::make_unique<RecordOrder>(sink, kMaxHeldCallbackEvents, [this] {
    if (flusher_ != nullptr) flusher_->Poke();
  });
  // The options were validated by ParseAgentOptions, so this cannot fail; fall back to the
  // defaults all the same rather than trust that.
  absl::StatusOr<RangeClassifier> classifier = RangeClassifier::Create(o.ranges);
  if (!classifier.ok()) classifier = RangeClassifier::Create(RangeClassifierOptions());
  classifier_ = std::make_unique<RangeClassifier>(*classifier);
  nvtx_ = std::make_unique<NvtxTracker>(order_->callbacks(), *classifier, &RealtimeNanos);
  correlation_ = std::make_unique<CorrelationTable>();
  DriverCallbacks::SourceFn source;
  if (o.source == SourceMode::kBacktrace) {
    AllocSourceOptions so;
    for (const std::string& p : o.source_skip) so.skip_prefixes.push_back(p);
    so.max_frames = o.stack_depth;
    so.full_stacks = o.full_stacks;
    sources_ = std::make_unique<AllocSourceResolver>(sink, so);
    AllocSourceResolver* resolver = sources_.get();
    source = [resolver] { return resolver->ResolveCaller(); };
  }
  callbacks_ = std::make_unique<DriverCallbacks>(
      order_->callbacks(), nvtx_.get(), correlation_.get(), std::move(source), &RealtimeNanos);
  translator_ = std::make_unique<RecordTranslator>(order_->records(), correlation_.get(),
                                                   classifier_.get(), TranslatorOptions());
}

void Agent::StartSampler() {
  absl::StatusOr<std::unique_ptr<DriverMemorySource>> devices = DriverMemorySource::Open();
  if (devices.ok()) {
    devices_ = *std::move(devices);
  } else if (options_.sample_ms > 0) {
    log_->Once("devices", absl::StrCat("device samples off: ", devices.status().message()));
  }
  if (options_.sample_ms <= 0) return;
  SamplerOptions so;
  so.period = absl::Milliseconds(options_.sample_ms);
  sampler_ = std::make_unique<Sampler>(transport_.get(), devices_.get(), so, &RealtimeNanos);
}

void Agent::StartSession() {
  CuptiSessionOptions co;
  co.subscribe = options_.subscribe;
  co.allocation_source = options_.source == SourceMode::kCupti;
  co.buffer_bytes = options_.buffer_bytes;
  co.max_buffers = options_.max_buffers;
  BufferFlusherOptions fo;
  fo.period = absl::Milliseconds(options_.flush_ms);
  flusher_ = std::make_unique<BufferFlusher>(
      fo, [this] { session_->Flush(/*forced=*/false); },
      [this](uint64_t mark) { return order_->ReleaseHeldBefore(mark); },
      [this] { return order_->FlushMark(); });
  session_ = CuptiSession::Start(co, this, log_);
  // Without callbacks, NVTX reaches us only as MARKER records.
  translator_->SetMarkersDriveSteps(!session_->state().callbacks);
  // A thread that cannot be made (a pids cgroup or RLIMIT_NPROC limit) leaves the agent without
  // it rather than unwinding an agent CUPTI already calls into.
  const auto start_thread = [this](const char* what, const char* without,
                                   const std::function<void()>& start) {
    try {
      start();
    } catch (const std::system_error& e) {
      log_->Once(what, absl::StrCat("no ", what, " thread (", e.what(), "): ", without));
    }
  };
  if (session_->state().records) {
    CompareClocks();
    start_thread("flusher", "records are delivered as CUPTI's buffers fill",
                 [this] { flusher_->Start(); });
  } else {
    order_->Close();  // no records to wait for
  }
  if (sampler_ != nullptr) {
    start_thread("sampler", "no device samples", [this] { sampler_->Start(); });
  }
}

Agent::Agent(AgentOptions options, AgentLog* log) : options_(std::move(options)), log_(log) {}

Agent::~Agent() { Shutdown(); }

void Agent::CompareClocks() {
  // Records carry CUPTI's timestamps, callback events the agent's CLOCK_REALTIME; RecordOrder
  // compares them. They are one clock on Linux by default (the README's assumption, unverified
  // on a GPU here); when CUPTI's reads otherwise, records are shifted onto CLOCK_REALTIME by
  // the offset measured here, and the offset is logged.
  const int64_t before = RealtimeNanos();
  const std::optional<int64_t> cupti = CuptiSession::Timestamp();
  const int64_t after = RealtimeNanos();
  if (!cupti.has_value()) {
    log_->Once("clock",
               "cuptiGetTimestamp failed: record timestamps cannot be checked against "
               "CLOCK_REALTIME");
    return;
  }
  const int64_t skew = *cupti - (before + (after - before) / 2);
  if (skew <= -kSameClockNs || skew >= kSameClockNs) {
    // cuptiGetTimestamp reads the records' clock (cupti.md): shifted by the offset, records land
    // on CLOCK_REALTIME with steps, phases and samples, to within this measurement (and any
    // drift of the two clocks after it).
    translator_->SetClockShift(-skew);
    log_->Once("clock",
               absl::StrCat("CUPTI's clock reads ", absl::FormatDuration(absl::Nanoseconds(skew)),
                            " from CLOCK_REALTIME: record timestamps are shifted onto "
                            "it by that, measured once at start"));
  }
  order_->set_records_share_clock(true);
}

void Agent::Shutdown() {
  if (shut_down_.exchange(true)) {
    // Another thread is draining (SIGTERM's, term_drain.h) when the application exits: exit()
    // must not run static destructors under it. Waited for as long as a drain may take.
    const absl::Time give_up =
        absl::Now() + absl::Milliseconds(options_.shutdown_timeout_ms) + absl::Seconds(3);
    while (!shutdown_finished_.load() && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    return;
  }
  if (flusher_ != nullptr) flusher_->Stop();
  if (session_ != nullptr) session_->Stop();
  // The forced flush has delivered every record: nothing is left to wait for.
  if (order_ != nullptr) order_->Close();
  if (sampler_ != nullptr) sampler_->Stop();
  // One line of what was seen: it is also how the GPU check reads CUPTI's behaviour.
  const TranslatorStats t = translator_->stats();
  const DriverCallbackStats c = callbacks_->stats();
  const NvtxStats n = nvtx_->stats();
  const RecordOrderStats o = order_->stats();
  log_->Once(
      "summary",
      absl::StrCat(
          "summary: records ", t.records, " (memory ", t.memory_records, ", pool ", t.pool_records,
          ", marker ", t.marker_records, ", vmm_skipped ", t.vmm_records_skipped, ", correlated ",
          t.correlated, ", tagged ", t.tagged, ", other ", t.other_records,
          "); callbacks: alloc_calls ", c.alloc_calls, " (runtime ", c.runtime_alloc_calls,
          ", nested ", c.nested_alloc_calls, "), ooms ", c.ooms, ", vmm_maps ", c.vmm_maps,
          ", vmm_unmaps ", c.vmm_unmaps, ", vmm_unknown_handles ", c.vmm_unknown_handles,
          ", vmm_imported_maps ", c.vmm_imported_maps, ", nvtx_calls ", c.nvtx_calls,
          "; nvtx: pushes ", n.pushes, ", pops_without_push ", n.pops_without_push, ", steps ",
          n.steps, ", phases ", n.phases, ", dropped_at_thread_exit ", n.dropped_at_thread_exit,
          ", phases_ended_at_thread_exit ", n.phases_ended_at_thread_exit, "; order: flushes ",
          flusher_ != nullptr ? flusher_->flushes() : 0, ", held ", o.held, " (released by record ",
          o.released_by_record, ", by flush ", o.released_by_flush, ", when full ",
          o.released_when_full, "), records_behind ", o.records_behind));
  if (transport_ != nullptr) {
    absl::Status s = transport_->Shutdown(absl::Milliseconds(options_.shutdown_timeout_ms));
    TransportStats ts = transport_->stats();
    log_->Once("transport_summary",
               absl::StrCat("transport: recorded ", ts.events_recorded, ", lost ", ts.events_lost,
                            ", durable up to seq ", ts.durable_seq, " of ", ts.last_seq,
                            ", reconnects ", ts.reconnects));
    if (!s.ok()) {
      log_->Once("shutdown", absl::StrCat("at exit: ", s.message(), " (", ts.events_recorded,
                                          " events recorded, durable up to seq ", ts.durable_seq,
                                          " of ", ts.last_seq, ")"));
    }
  }
  // The lines above are written by the agent's stderr thread: a moment for them to come out
  // before the process exits, and no more (stderr may be a pipe nobody reads).
  AgentStderr().Flush(absl::Milliseconds(250));
  shutdown_finished_ = true;
}

void Agent::OnApi(const ApiCall& call) { callbacks_->OnApi(call); }

void Agent::OnNvtx(CUpti_CallbackId cbid, const void* params, const void* return_value) {
  callbacks_->OnNvtx(cbid, params, return_value);
}

void Agent::OnActivityBuffer(uint8_t* buffer, size_t valid_size) {
  translator_->TranslateBuffer(buffer, valid_size);
}

void Agent::OnRecordsDropped(uint64_t n) {
  translator_->RecordDropped(n, RealtimeNanos());
  transport_->CountCuptiRecordsDropped(n);
  log_->Once("dropped", absl::StrCat("CUPTI dropped ", n,
                                     " activity records (reported as LOSS events; raise "
                                     "MEMTRACE_CUPTI_BUFFERS or MEMTRACE_CUPTI_BUFFER_KB)"));
}

}  // namespace cupti
}  // namespace memtrace
