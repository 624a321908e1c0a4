// The list of every environment variable the agent reads, with its meaning: what launchers
// forward to workers and what the Ray runtime_env generator writes.
#ifndef MEMTRACE_AGENT_IDENTITY_ENV_VARS_H_
#define MEMTRACE_AGENT_IDENTITY_ENV_VARS_H_

#include <string_view>
#include <vector>

namespace memtrace {

struct EnvVarDoc {
  std::string_view name;
  // Who normally sets it: "memtrace" (the user or a memtrace launcher), "torchrun", "ray",
  // "mpirun", "slurm" or "cuda".
  std::string_view set_by;
  // One line: what the agent does with it.
  std::string_view meaning;
};

// Every variable read by IdentityFromEnvironment and TransportOptionsFromEnvironment, in a
// stable order (memtrace's own first). Thread-safe; the list lives for the whole process.
const std::vector<EnvVarDoc>& AgentEnvironmentVariables();

}  // namespace memtrace

#endif  // MEMTRACE_AGENT_IDENTITY_ENV_VARS_H_
