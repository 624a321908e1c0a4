// The CUPTI layer's settings, read from MEMTRACE_* environment variables (see README.md).
// A malformed value never stops the job: the default is kept and a warning names the variable
// and the value.
#ifndef MEMTRACE_AGENT_CUPTI_AGENT_OPTIONS_H_
#define MEMTRACE_AGENT_CUPTI_AGENT_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/cupti/range_classifier.h"
#include "agent/identity/env.h"

namespace memtrace {
namespace cupti {

enum class SourceMode {
  kBacktrace,  // our own backtrace + dladdr in the allocation callback (default)
  kCupti,      // cuptiActivityEnableAllocationSource: CUPTI fills CUpti_ActivityMemory4::source
  kOff,
};

struct AgentOptions {
  bool disabled = false;                       // MEMTRACE_DISABLE=1
  int sample_ms = 100;                         // MEMTRACE_SAMPLE_MS, 0 = no sampler
  bool subscribe = true;                       // MEMTRACE_SUBSCRIBE=0: activity records only
  SourceMode source = SourceMode::kBacktrace;  // MEMTRACE_SOURCE=backtrace|cupti|off
  bool full_stacks = false;                    // MEMTRACE_STACKS=1
  int stack_depth = 32;                        // MEMTRACE_STACK_DEPTH
  std::vector<std::string> source_skip;        // MEMTRACE_SOURCE_SKIP=prefix,prefix (added)
  RangeClassifierOptions ranges;               // MEMTRACE_STEP_PREFIXES, MEMTRACE_STEP_REGEX,
                                               // MEMTRACE_PHASES, MEMTRACE_PHASE_PREFIX
  size_t buffer_bytes = 4 << 20;               // MEMTRACE_CUPTI_BUFFER_KB
  size_t max_buffers = 8;                      // MEMTRACE_CUPTI_BUFFERS
  int flush_ms = 250;                          // MEMTRACE_FLUSH_MS (BufferFlusher period)
  int shutdown_timeout_ms = 3000;              // MEMTRACE_SHUTDOWN_TIMEOUT_MS
  bool drain_on_sigterm = true;                // MEMTRACE_SIGTERM_DRAIN=0: leave SIGTERM alone
};

struct ParsedAgentOptions {
  AgentOptions options;
  std::vector<std::string> warnings;  // one per rejected variable
};

// Reads every MEMTRACE_* setting of the CUPTI layer through `env`. Pure given `env`.
ParsedAgentOptions ParseAgentOptions(const EnvLookup& env);

}  // namespace cupti
}  // namespace memtrace

#endif  // MEMTRACE_AGENT_CUPTI_AGENT_OPTIONS_H_
