// Where `memtrace run` and `memtrace ray-env` find the pieces they hand to a job: the injected
// agent library (CUDA_INJECTION64_PATH), the library NVTX loads (NVTX_INJECTION64_PATH) and the
// collector binary started for a local run.
//
// Each is looked up in this order: an explicit flag, an environment variable, then the layouts
// memtrace is used from: an install (bin/memtrace beside bin/memtrace-collector, lib/ beside
// bin/) and a Bazel output tree (bazel-bin/query/cli/memtrace with bazel-bin/agent/... and
// bazel-bin/collector/...). A missing file is an error that lists every place looked at.
#ifndef MEMTRACE_TOOLS_LAUNCH_LAUNCH_PATHS_H_
#define MEMTRACE_TOOLS_LAUNCH_LAUNCH_PATHS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/identity/env.h"

namespace memtrace::launch {

inline constexpr char kAgentLibraryName[] = "libmemtrace_agent.so";
inline constexpr char kCollectorBinaryName[] = "memtrace-collector";
// Environment overrides.
inline constexpr char kAgentLibraryEnv[] = "MEMTRACE_AGENT_LIB";
inline constexpr char kNvtxLibraryEnv[] = "MEMTRACE_NVTX_LIB";
inline constexpr char kCollectorBinaryEnv[] = "MEMTRACE_COLLECTOR_BIN";

// The absolute path of the running executable (/proc/self/exe), "" when unreadable.
std::string CurrentExecutablePath();

// The places, in order, where a component may sit relative to the memtrace binary at
// `exe_path`: its own directory, ../lib and ../lib/memtrace (installs), and
// ../../<bazel_package> (a Bazel output tree, memtrace being <bin>/query/cli/memtrace).
std::vector<std::string> CandidatePaths(const std::string& exe_path, const std::string& file,
                                        const std::string& bazel_package);

// `flag_value` when not empty, else $`env_name` when set, else the first existing candidate.
// An explicit path (flag or variable) that does not exist is NOT_FOUND naming it; nothing found
// is NOT_FOUND listing the candidates and how to override. The result is absolute, because
// workers may change directory before CUDA loads the library.
absl::StatusOr<std::string> FindComponent(const std::string& what, const std::string& flag_value,
                                          const char* env_name, const EnvLookup& env,
                                          const std::vector<std::string>& candidates);

// FindComponent for the agent library (flag --agent_lib, MEMTRACE_AGENT_LIB).
absl::StatusOr<std::string> FindAgentLibrary(const std::string& flag_value, const EnvLookup& env,
                                             const std::string& exe_path);

// The library for NVTX_INJECTION64_PATH: `flag_value`, else $MEMTRACE_NVTX_LIB, else the agent
// library itself (it exports InitializeInjectionNvtx2 and forwards to the libcupti it links; see
// agent/cupti/injection.cc), so NVTX ranges reach the same CUPTI instance the agent uses.
absl::StatusOr<std::string> NvtxLibrary(const std::string& flag_value, const EnvLookup& env,
                                        const std::string& agent_library);

// FindComponent for the collector binary (MEMTRACE_COLLECTOR_BIN).
absl::StatusOr<std::string> FindCollectorBinary(const EnvLookup& env, const std::string& exe_path);

}  // namespace memtrace::launch

#endif  // MEMTRACE_TOOLS_LAUNCH_LAUNCH_PATHS_H_
