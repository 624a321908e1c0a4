// The allocations live on one rank at one moment: the input of `live` and of the leak-candidate
// and phase-survival parts of `leaks`. The collector fills it from its per-rank live set
// (address -> bytes, tag, source, step and phase at allocation). Plain values, no protobuf.
#ifndef MEMTRACE_QUERY_ANALYSIS_LIVE_SET_H_
#define MEMTRACE_QUERY_ANALYSIS_LIVE_SET_H_

#include <cstdint>
#include <string>
#include <vector>

namespace memtrace::analysis {

// The tag of memory that was live before recording began, seeded by an importer as one
// allocation made at the first moment recorded (`memtrace import` of a Kineto trace: Total
// Allocated before its first event). When it was really allocated is unknown, so it is never a
// leak candidate.
inline constexpr char kBeforeTraceTag[] = "kineto:before-trace";

struct LiveAllocation {
  std::string tag;     // innermost NVTX range when allocated; "" = none
  std::string source;  // shared object that asked for the memory; "" = unknown
  std::string phase;   // phase (NVTX phase range) open when allocated; "" = none
  int64_t step_allocated = 0;
  int64_t ts_ns = 0;
  uint64_t address = 0;
  uint64_t bytes = 0;
};

struct RankLiveSet {
  uint32_t rank = 0;
  uint32_t attempt = 0;
  // The moment: the step in progress and its time (collector-aligned ns since the epoch).
  int64_t at_step = 0;
  int64_t at_ns = 0;
  // Phases open at that moment (outermost first).
  std::vector<std::string> open_phases;
  std::vector<LiveAllocation> allocations;
};

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_LIVE_SET_H_
