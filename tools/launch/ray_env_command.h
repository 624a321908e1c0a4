// `memtrace ray-env --collector ADDR [--job NAME]`: prints the Ray runtime_env
// ({"env_vars": {...}}) that makes every worker of a Ray job record to the collector.
#ifndef MEMTRACE_TOOLS_LAUNCH_RAY_ENV_COMMAND_H_
#define MEMTRACE_TOOLS_LAUNCH_RAY_ENV_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/identity/env.h"
#include "query/cli/command.h"
#include "tools/launch/worker_env.h"

namespace memtrace::launch {

cli::Command RayEnvCommand();

struct RayEnvRequest {
  std::string collector;
  std::string job;        // empty: each worker uses RAY_JOB_ID (or its launcher's id)
  std::string agent_lib;  // empty: found as `memtrace run` finds it
  std::string nvtx_lib;   // empty: $MEMTRACE_NVTX_LIB, else the agent library
  EnvVars extra;          // --env NAME=VALUE, last
};

// The variables of the runtime_env, in order: CUDA_INJECTION64_PATH, NVTX_INJECTION64_PATH,
// MEMTRACE_COLLECTOR, MEMTRACE_JOB_ID (with --job), the agent settings set in `env`
// (ForwardedAgentSettings), then `extra` (which replaces a forwarded value of the same name).
// INVALID_ARGUMENT without a collector; NOT_FOUND when the agent library is not found.
absl::StatusOr<EnvVars> RayEnvVariables(const RayEnvRequest& request, const EnvLookup& env,
                                        const std::string& exe_path);

}  // namespace memtrace::launch

#endif  // MEMTRACE_TOOLS_LAUNCH_RAY_ENV_COMMAND_H_
