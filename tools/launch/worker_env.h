// The environment memtrace gives a job so that every process it starts records: the injection
// libraries, the collector address, the job id and any agent settings. `memtrace run` adds it to
// the command it runs; `memtrace ray-env` prints it as a Ray runtime_env.
//
// Which variables exist comes from the agent itself (AgentEnvironmentVariables() in
// agent/identity/env_vars.h): settings are forwarded only if the agent lists them, so this file
// holds no second list of the agent's variables.
#ifndef MEMTRACE_TOOLS_LAUNCH_WORKER_ENV_H_
#define MEMTRACE_TOOLS_LAUNCH_WORKER_ENV_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/identity/env.h"

namespace memtrace::launch {

// Ordered (name, value) pairs; a name appears at most once.
using EnvVars = std::vector<std::pair<std::string, std::string>>;

// The variables the CUDA driver and the NVTX loader read; not read by the agent, so not in its
// list, but the agent is never loaded without them.
inline constexpr char kJobIdVar[] = "MEMTRACE_JOB_ID";
inline constexpr char kCollectorVar[] = "MEMTRACE_COLLECTOR";
inline constexpr char kCudaInjectionVar[] = "CUDA_INJECTION64_PATH";
inline constexpr char kNvtxInjectionVar[] = "NVTX_INJECTION64_PATH";
// A job id used only when no launcher gives one (torchrun's TORCHELASTIC_RUN_ID, Ray, Slurm,
// Open MPI win over it); used when the agent lists it, else MEMTRACE_JOB_ID carries the id.
inline constexpr char kDefaultJobIdVar[] = "MEMTRACE_DEFAULT_JOB_ID";
inline constexpr char kRunIdVar[] = "MEMTRACE_RUN_ID";

// How the job id of a run was decided.
struct JobIdChoice {
  // Set on every worker as MEMTRACE_JOB_ID, overriding launcher ids; empty when not chosen.
  std::string explicit_id;
  // Used only when a worker has no launcher id (see kDefaultJobIdVar); empty with explicit_id.
  std::string fallback_id;
  // Where the id came from: "--job", "MEMTRACE_JOB_ID", "TORCHELASTIC_RUN_ID" or "generated".
  std::string source;
};

// The job id, the first that applies: `flag_job`; $MEMTRACE_JOB_ID; $TORCHELASTIC_RUN_ID (unless
// "none", torchrun's shared default) of the environment memtrace itself runs in; else a fallback
// GenerateJobId(now, random).
JobIdChoice ChooseJobId(const std::string& flag_job, const EnvLookup& env, absl::Time now,
                        uint32_t random);

// The job id torchrun gives its workers (TORCHELASTIC_RUN_ID) when `command` is torchrun (or
// python -m torch.distributed.run / .launch) with --rdzv_id / --rdzv-id; "" otherwise, for
// "none", torchrun's default, which every run shares, and with --standalone, which replaces the
// id with a random one.
std::string TorchrunRendezvousId(const std::vector<std::string>& command);

// "job-<yyyymmdd>-<hhmmss>-<6 hex digits of random>" in local time, e.g.
// "job-20261202-171500-03fa2c".
std::string GenerateJobId(absl::Time now, uint32_t random);

// What a job needs in its environment.
struct AgentEnvironment {
  std::string agent_library;  // CUDA_INJECTION64_PATH; empty: no agent (nothing is recorded)
  std::string nvtx_library;   // NVTX_INJECTION64_PATH; empty: not set
  std::string collector;      // MEMTRACE_COLLECTOR
  JobIdChoice job;
  std::string run_id;  // MEMTRACE_RUN_ID: this run, for its report; empty: not set
  // Further variables (agent settings), in order; they come last and may not repeat the above.
  EnvVars settings;
};

// Whether the agent's own list (AgentEnvironmentVariables) has `name`.
bool AgentReadsVariable(const std::string& name);

// Whether `name` is a variable a launcher sets to a different value in each worker (RANK,
// LOCAL_RANK, SLURM_PROCID, ...): one value given to every worker would give them all the same
// identity.
bool IsPerWorkerVariable(const std::string& name);
// All of them, for tools/python's generated list.
const std::vector<std::string>& PerWorkerVariables();

// Variables a Ray runtime_env must not set to one value for every worker, each with why: the
// per-worker ranks above, one process's settings (IsPerProcessVariable), the ids launchers set
// for each job or restart (RAY_JOB_ID, TORCHELASTIC_RESTART_COUNT, ...), and memtrace run's own
// MEMTRACE_RUN_ID. `memtrace ray-env --env` and runtime_env(extra=) refuse them.
const std::vector<std::pair<std::string, std::string>>& NotForEveryWorker();

// The variables of `environment`, in this order: CUDA_INJECTION64_PATH, NVTX_INJECTION64_PATH,
// MEMTRACE_COLLECTOR, MEMTRACE_JOB_ID or the fallback id variable, then `settings`.
EnvVars ToVariables(const AgentEnvironment& environment);

// The agent settings set in `env` that a job should inherit: every variable of the agent's list
// that memtrace's user sets (set_by "memtrace") and `env` has non-empty, except
// MEMTRACE_COLLECTOR and MEMTRACE_JOB_ID (chosen by flags), the fallback id and the per-process
// ones (IsPerProcessVariable). Launcher-set variables (RANK, RAY_JOB_ID, ...) are never
// forwarded: each worker gets its own.
EnvVars ForwardedAgentSettings(const EnvLookup& env);

// MEMTRACE_DEVICE and MEMTRACE_ATTEMPT: settings of one process that must not be copied to all.
bool IsPerProcessVariable(const std::string& name);

// Parses "NAME=VALUE" (--env). INVALID_ARGUMENT when there is no '=' or NAME is empty or not a
// valid variable name.
absl::StatusOr<std::pair<std::string, std::string>> ParseAssignment(const std::string& text);

// `{"env_vars": {"NAME": "VALUE", ...}}`: a Ray runtime_env, on one line, keys in order.
std::string RuntimeEnvJson(const EnvVars& vars);

}  // namespace memtrace::launch

#endif  // MEMTRACE_TOOLS_LAUNCH_WORKER_ENV_H_
