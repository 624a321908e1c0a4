#include "agent/identity/env_vars.h"

namespace memtrace {

const std::vector<EnvVarDoc>& AgentEnvironmentVariables() {
  static const std::vector<EnvVarDoc> kVars = {
      {"MEMTRACE_COLLECTOR", "memtrace", "collector address host:port (default 127.0.0.1:7431)"},
      {"MEMTRACE_JOB_ID", "memtrace", "job id; overrides every launcher's id"},
      {"MEMTRACE_ATTEMPT", "memtrace",
       "attempt (restart) number; overrides TORCHELASTIC_RESTART_COUNT (a new process for a "
       "rank whose attempt another, ended process recorded is stored as the next attempt)"},
      {"MEMTRACE_DEVICE", "memtrace",
       "CUDA device ordinal of this process; overrides CUDA_VISIBLE_DEVICES / local rank"},
      {"MEMTRACE_QUEUE_EVENTS", "memtrace",
       "events the in-process queue holds before dropping (default 1048576: 72 MiB, "
       "allocated at start)"},
      {"MEMTRACE_BATCH_EVENTS", "memtrace", "most events per batch sent (default 16384)"},
      {"MEMTRACE_BATCH_DELAY_MS", "memtrace",
       "longest an event waits before its batch is sent, in ms (default 100)"},
      {"MEMTRACE_UNACKED_MAX_BYTES", "memtrace",
       "memory bound for batches not yet acknowledged; oldest dropped beyond it "
       "(default 67108864)"},
      {"MEMTRACE_SPOOL_DIR", "memtrace",
       "directory for the on-disk spool of unacknowledged batches (unset: no spool)"},
      {"MEMTRACE_SPOOL_MAX_BYTES", "memtrace",
       "size bound of the on-disk spool (default 1 GiB; beyond it the oldest are dropped, "
       "counted)"},
      {"MEMTRACE_DEFAULT_JOB_ID", "memtrace",
       "job id used only when no launcher gives one (memtrace run sets it)"},
      {"MEMTRACE_RUN_ID", "memtrace",
       "the memtrace run that started this worker (memtrace run sets it), for its report"},
      // Read by the CUPTI layer (agent/cupti/agent_options.cc); see agent/cupti/README.md.
      {"MEMTRACE_DISABLE", "memtrace", "1: the injected agent does nothing"},
      {"MEMTRACE_SAMPLE_MS", "memtrace", "device/host memory sample period in ms (0 = off)"},
      {"MEMTRACE_SUBSCRIBE", "memtrace", "0: no CUPTI callbacks (activity records only)"},
      {"MEMTRACE_SOURCE", "memtrace", "owner of driver allocations: backtrace, cupti or off"},
      {"MEMTRACE_SOURCE_SKIP", "memtrace", "extra library names to skip when naming the owner"},
      {"MEMTRACE_STACKS", "memtrace", "1: record the full call stack of driver allocations"},
      {"MEMTRACE_STACK_DEPTH", "memtrace", "frames walked per driver allocation"},
      {"MEMTRACE_STEP_PREFIXES", "memtrace", "NVTX range prefixes that set the step number"},
      {"MEMTRACE_STEP_REGEX", "memtrace", "regex with one group: the step number of a range"},
      {"MEMTRACE_PHASES", "memtrace", "NVTX range names that are phases (comma separated)"},
      {"MEMTRACE_PHASE_PREFIX", "memtrace", "range prefix that marks a phase (default phase:)"},
      {"MEMTRACE_CUPTI_BUFFER_KB", "memtrace", "size of one CUPTI activity buffer in KiB"},
      {"MEMTRACE_CUPTI_BUFFERS", "memtrace", "most CUPTI activity buffers held at once"},
      {"MEMTRACE_FLUSH_MS", "memtrace",
       "how often CUPTI's partly filled record buffers are handed over, in ms (default 250)"},
      {"MEMTRACE_SHUTDOWN_TIMEOUT_MS", "memtrace", "how long the agent drains at process exit"},
      {"MEMTRACE_SIGTERM_DRAIN", "memtrace",
       "0: leave SIGTERM alone (default 1: drain, then end by SIGTERM)"},
      // Read by the shared client channel (proto/connect): agent and CLI alike.
      {"MEMTRACE_TOKEN", "memtrace", "bearer token the collector requires"},
      {"MEMTRACE_TOKEN_FILE", "memtrace", "file holding the bearer token"},
      {"MEMTRACE_TLS_CA", "memtrace", "CA certificate: connect to the collector over TLS"},
      {"MEMTRACE_TLS_CERT", "memtrace", "client certificate for mutual TLS"},
      {"MEMTRACE_TLS_KEY", "memtrace", "client key for mutual TLS"},
      {"MEMTRACE_TLS_SERVER_NAME", "memtrace", "server name to verify instead of the host"},
      {"RANK", "torchrun", "global rank"},
      {"LOCAL_RANK", "torchrun", "rank within the node; default device ordinal"},
      {"WORLD_SIZE", "torchrun", "number of ranks in the job"},
      {"LOCAL_WORLD_SIZE", "torchrun", "number of ranks on this node"},
      {"GROUP_RANK", "torchrun", "node index"},
      {"TORCHELASTIC_RUN_ID", "torchrun", "job id (rendezvous id), unless it is 'none'"},
      {"TORCHELASTIC_RESTART_COUNT", "torchrun", "attempt number"},
      {"RAY_JOB_ID", "ray", "job id when no torchrun id is set"},
      {"RAY_SUBMISSION_ID", "ray", "job id when neither torchrun nor RAY_JOB_ID gives one"},
      {"OMPI_COMM_WORLD_RANK", "mpirun", "global rank (when RANK is unset)"},
      {"OMPI_COMM_WORLD_SIZE", "mpirun", "number of ranks"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "mpirun", "rank within the node"},
      {"OMPI_COMM_WORLD_LOCAL_SIZE", "mpirun", "number of ranks on this node"},
      {"PMIX_NAMESPACE", "mpirun", "job id when no other id is set"},
      {"PMI_RANK", "mpiexec",
       "global rank (MPICH / Intel MPI Hydra; when RANK and "
       "OMPI_COMM_WORLD_RANK are unset)"},
      {"PMI_SIZE", "mpiexec", "number of ranks"},
      {"MPI_LOCALRANKID", "mpiexec", "rank within the node"},
      {"MPI_LOCALNRANKS", "mpiexec", "number of ranks on this node"},
      {"SLURM_PROCID", "slurm",
       "global rank (when RANK, OMPI_COMM_WORLD_RANK and PMI_RANK are unset)"},
      {"SLURM_NTASKS", "slurm", "number of ranks"},
      {"SLURM_LOCALID", "slurm", "rank within the node"},
      {"SLURM_NODEID", "slurm", "node index"},
      {"SLURM_TASK_PID", "slurm",
       "pid of the task srun started: Slurm's rank is read only in it (or below a shell or "
       "memtrace run it started)"},
      {"SLURM_JOB_ID", "slurm", "job id (with SLURM_STEP_ID) when no other id is set"},
      {"SLURM_STEP_ID", "slurm", "appended to SLURM_JOB_ID: each srun step is its own job"},
      {"CUDA_VISIBLE_DEVICES", "cuda",
       "one visible device means ordinal 0 (and its UUID when given as GPU-...)"},
  };
  return kVars;
}

}  // namespace memtrace
