// Who this process is in its job: the RankIdentity an agent sends in its Hello, read from the
// environment a launcher (torchrun, Ray, mpirun, srun) gave the process.
//
// Rank fields, from the first launcher whose rank variable is set:
//   torchrun / generic: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK
//   mpirun (Open MPI):  OMPI_COMM_WORLD_RANK, _LOCAL_RANK, _SIZE, _LOCAL_SIZE
//   mpiexec (MPICH / Intel MPI Hydra): PMI_RANK, MPI_LOCALRANKID, PMI_SIZE, MPI_LOCALNRANKS
//                       (under srun, only in the task, as Slurm's below)
//   srun (Slurm):       SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS, SLURM_NODEID (node index),
//                       only in the task srun started (SLURM_TASK_PID is this process, or its
//                       parent when that is a shell or `memtrace run`): every process below a
//                       task inherits them — Ray workers under `srun ray start`, the workers a
//                       Python launcher spawns — and would all claim the task's rank.
// With none of them: rank = -1 (the collector names the worker by host + device + pid).
// Unknown fields are -1 (rank, local_rank, group_rank) or 0 (world_size, local_world_size).
// An empty value counts as unset.
//
// launcher: "torchrun" when TORCHELASTIC_RUN_ID is set, else "ray" when RAY_JOB_ID or
// RAY_SUBMISSION_ID is set, else "mpirun" / "mpiexec" / "slurm" by the rank variables used,
// else "env".
//
// job_id, the first that is set: MEMTRACE_JOB_ID, TORCHELASTIC_RUN_ID (unless it is "none",
// torchrun's default --rdzv_id, which is the same for every job), RAY_JOB_ID (every worker of
// a Ray job sees the same one), RAY_SUBMISSION_ID, SLURM_JOB_ID (+ "." + SLURM_STEP_ID when
// set, so that two srun steps of one allocation are two jobs), PMIX_NAMESPACE (Open MPI).
//
// attempt: MEMTRACE_ATTEMPT, else TORCHELASTIC_RESTART_COUNT, else 0.
//
// device_index (the CUDA ordinal inside this process), the first rule that applies:
//   1. MEMTRACE_DEVICE;
//   2. CUDA_VISIBLE_DEVICES lists exactly one device: 0 (the only ordinal the process has;
//      this is how Ray pins a GPU to an actor), and device_uuid = that entry when it is a
//      "GPU-..." or "MIG-..." UUID;
//   3. the local rank, when known (torchrun's convention: local rank i uses cuda:i), unless
//      CUDA_VISIBLE_DEVICES lists fewer devices than that;
//   4. -1.
#ifndef MEMTRACE_AGENT_IDENTITY_IDENTITY_H_
#define MEMTRACE_AGENT_IDENTITY_IDENTITY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "agent/identity/env.h"
#include "proto/memtrace/v1/events.pb.h"

namespace memtrace {

// The version string agents put in RankIdentity.agent_version.
inline constexpr char kAgentVersion[] = "0.1.0";

// Facts about the process that do not come from the environment.
struct ProcessFacts {
  std::string host;
  uint32_t pid = 0;
  uint64_t start_ns = 0;  // RankIdentity.process_start_ns
  uint32_t parent_pid = 0;
  // parent_pid, its parent, ... (RankIdentity.ancestor_pids): at most 8, ending at pid 1 or
  // where /proc cannot tell; and each one's start (ancestor_start_ticks, 0 where unknown).
  std::vector<uint32_t> ancestor_pids;
  std::vector<uint64_t> ancestor_start_ticks;
  // This process's start in clock ticks since boot (/proc/self/stat), and the boot
  // (/proc/sys/kernel/random/boot_id): RankIdentity.start_ticks and boot_id.
  uint64_t start_ticks = 0;
  std::string boot_id;
  std::string parent_name;  // the parent's /proc/PID/comm ("bash", "memtrace", ...)
};

// gethostname(), getpid() and getppid() of the calling process, its parent's name, and the
// time of the first call in it (the same on every call).
ProcessFacts CurrentProcessFacts();

// Builds the identity by the rules above. Errors (INVALID_ARGUMENT) name the variable and its
// value: a non-integer or negative number, RANK >= WORLD_SIZE, LOCAL_RANK >= LOCAL_WORLD_SIZE,
// WORLD_SIZE = 0; or, when no job id can be found, every variable that was looked for.
absl::StatusOr<v1::RankIdentity> IdentityFromEnvironment(const EnvLookup& env,
                                                         const ProcessFacts& facts);

// The same with CurrentProcessFacts().
absl::StatusOr<v1::RankIdentity> IdentityFromEnvironment(const EnvLookup& env);

// The overrides memtrace's own launcher passes on to every worker (MEMTRACE_ATTEMPT,
// MEMTRACE_DEVICE), checked as IdentityFromEnvironment reads them: a value it would refuse is
// an error (INVALID_ARGUMENT, naming the variable and its range) before any worker starts.
absl::Status CheckIdentityOverrides(const EnvLookup& env);

// The job id of a process whose environment names none: "local-<host>-<pid>" for a process of
// its own, "local-<host>-<parent pid>" for a rank of a world of several (world_size > 1), so
// that the ranks one launcher (torchrun's agent, srun's step daemon, mpirun's daemon) started
// on a host share a job rather than each making one of its own. Ranks on several hosts still
// need a job id given to share one.
std::string LocalJobId(const ProcessFacts& facts, int64_t world_size);

}  // namespace memtrace

#endif  // MEMTRACE_AGENT_IDENTITY_IDENTITY_H_
