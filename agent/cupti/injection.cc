// The entry points the CUDA driver and the NVTX loader call; the only exported symbols of
// libmemtrace_agent.so (see //agent:exports.lds).
//
// - InitializeInjection: the CUDA driver dlopens CUDA_INJECTION64_PATH and calls it inside the
//   first cuInit. Idempotent, never exits, never throws, always returns 1 ("initialized") even
//   when the agent decided not to record: the process must run exactly as without us.
// - InitializeInjectionNvtx2: lets NVTX_INJECTION64_PATH point at this library instead of
//   libcupti (cupti.md section 4, option b); it forwards to the libcupti.so.13 this library
//   links, which is what turns NVTX calls into CUPTI NVTX callbacks and MARKER records.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/cupti/agent.h"
#include "agent/cupti/agent_log.h"
#include "agent/cupti/term_drain.h"
#include "agent/identity/env.h"

namespace memtrace {
namespace cupti {
namespace {

// The process-wide injection state: the one global the style allows. Never destroyed: CUPTI
// and the driver may call into the agent during process teardown, after static destructors
// would have run, so the state and the agent are deliberately leaked.
struct Injection {
  std::mutex mu;
  bool started = false;
  pid_t pid = 0;
  AgentLog log;
  Agent* agent = nullptr;  // owned; leaked on purpose (see above)
};

Injection& TheInjection() {
  static Injection* const injection = std::make_unique<Injection>().release();
  return *injection;
}

void AtExit() {
  Injection& inj = TheInjection();
  // A forked child inherits the atexit handler but not the agent's threads: leave it alone.
  if (inj.agent == nullptr || getpid() != inj.pid) return;
  try {
    inj.agent->Shutdown();
  } catch (...) {
  }
}

}  // namespace
}  // namespace cupti
}  // namespace memtrace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  using memtrace::cupti::TheInjection;
  try {
    auto& inj = TheInjection();
    std::lock_guard<std::mutex> lock(inj.mu);
    if (inj.started) return 1;
    inj.started = true;
    inj.pid = getpid();
    std::unique_ptr<memtrace::cupti::Agent> agent =
        memtrace::cupti::Agent::Start(memtrace::ProcessEnvironment(), &inj.log);
    if (agent != nullptr) {
      inj.agent = agent.release();
      std::atexit(&memtrace::cupti::AtExit);
      // The same drain when a launcher ends the worker by SIGTERM (torchrun, when another rank
      // failed), which skips atexit. MEMTRACE_SIGTERM_DRAIN=0 leaves SIGTERM alone.
      if (inj.agent->options().drain_on_sigterm) {
        absl::Status s = memtrace::cupti::InstallTermDrain(
            &memtrace::cupti::AtExit,
            absl::Milliseconds(inj.agent->options().shutdown_timeout_ms) + absl::Seconds(2));
        if (!s.ok() && s.code() != absl::StatusCode::kFailedPrecondition) {
          inj.log.Once("sigterm", absl::StrCat("no drain on SIGTERM: ", s.message()));
        }
      }
    } else {
      // Why nothing is recorded is the one thing this process will hear from us: without an
      // agent there is no drain at exit, and a short run ended before the line was written.
      // Bounded, so a stderr nobody drains delays the start by at most this.
      inj.log.Flush(absl::Milliseconds(250));
    }
  } catch (...) {
    // Never let an exception reach the driver.
  }
  return 1;
}

// int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t), with the function type left opaque
// so that no NVTX header is needed here.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    const void* (*get_export_table)(uint32_t)) {
  using Fn = int (*)(const void* (*)(uint32_t));
  void* cupti = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
  if (cupti == nullptr) return 0;  // 0 tells the NVTX loader to unload us and stay a no-op
  auto forward = reinterpret_cast<Fn>(dlsym(cupti, "InitializeInjectionNvtx2"));
  int result = forward != nullptr ? forward(get_export_table) : 0;
  // Keep the reference: libcupti stays loaded anyway (we link it), and NVTX now calls into it.
  return result;
}
