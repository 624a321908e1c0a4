#include "agent/identity/identity.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace memtrace {

namespace {

// How far up the process tree ancestor_pids goes: a worker's engine may be a few levels down
// (worker -> forkserver -> engine), and the launcher and shells above it are not walked for ever.
constexpr size_t kMaxAncestors = 8;

// What /proc/PID/stat says of a process: its parent and its start (field 22, clock ticks since
// boot), which with the pid names the process for as long as the machine runs.
struct ProcStat {
  uint32_t ppid = 0;
  uint64_t start_ticks = 0;
};

// "pid (comm) state ppid ... starttime ..."; comm may hold spaces and parentheses, so the
// fields are counted after its last ')'. nullopt when it cannot be read.
std::optional<ProcStat> ReadProcStat(const std::string& pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  std::getline(in, stat);
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(close + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state): ppid is field 4, starttime field 22.
  ProcStat out;
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[1], &out.ppid) ||
      !absl::SimpleAtoi(fields[19], &out.start_ticks)) {
    return std::nullopt;
  }
  return out;
}

// `parent`, its parent, ...: at most kMaxAncestors, ending at pid 1 (init, or a container's
// entry process: the trainer itself in some containers) or where /proc cannot tell; each with
// its start (0 where unknown).
void ReadAncestors(uint32_t parent, ProcessFacts* facts) {
  for (uint32_t pid = parent; pid != 0 && facts->ancestor_pids.size() < kMaxAncestors;) {
    const std::optional<ProcStat> stat = ReadProcStat(absl::StrCat(pid));
    facts->ancestor_pids.push_back(pid);
    facts->ancestor_start_ticks.push_back(stat.has_value() ? stat->start_ticks : 0);
    if (pid == 1 || !stat.has_value() || stat->ppid == pid) break;
    pid = stat->ppid;
  }
}

// Which processes a launcher's variables describe, given that every process below the one a
// launcher started inherits them.
enum class Scope {
  kAnywhere,       // torchrun's and Open MPI's: read wherever they are set
  kTaskUnderSrun,  // under srun (SLURM_TASK_PID set), only in the task; elsewhere anywhere
  kTaskOnly,       // only in the task srun started (Slurm sets them for the batch script too)
};

// The variables one launcher uses for the rank fields; empty name = the launcher has none.
struct RankVariables {
  const char* launcher;
  const char* rank;
  const char* local_rank;
  const char* world_size;
  const char* local_world_size;
  const char* group_rank;
  Scope scope;
};

// Checked in this order; the first whose rank variable is set wins, so torchrun started inside
// a Slurm allocation is identified by torchrun's RANK, not by Slurm's task id.
constexpr RankVariables kRankSources[] = {
    {"env", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", Scope::kAnywhere},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_SIZE", "", Scope::kAnywhere},
    // MPICH's and Intel MPI's Hydra (mpiexec); also set by Slurm's PMI plugins for a task.
    {"mpiexec", "PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE", "MPI_LOCALNRANKS", "",
     Scope::kTaskUnderSrun},
    {"slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "", "SLURM_NODEID",
     Scope::kTaskOnly},
};

struct RankFields {
  int32_t rank = -1;
  int32_t local_rank = -1;
  int32_t world_size = 0;
  int32_t local_world_size = 0;
  int32_t group_rank = -1;
  const char* launcher = "env";
};

absl::StatusOr<std::optional<int64_t>> NonNegative(const EnvLookup& env, const char* name) {
  if (name[0] == '\0') return std::optional<int64_t>();
  return EnvInteger(env, name, 0, INT32_MAX);
}

// Whether this process is the task srun started, or run by it through a shell or `memtrace
// run`: the only processes Slurm's rank variables describe (the rest inherit them).
bool IsSlurmTask(const EnvLookup& env, const ProcessFacts& facts) {
  std::optional<std::string> task = EnvNonEmpty(env, "SLURM_TASK_PID");
  uint32_t task_pid = 0;
  if (!task.has_value() || !absl::SimpleAtoi(*task, &task_pid) || task_pid == 0) return false;
  if (task_pid == facts.pid) return true;
  static constexpr const char* kPassThrough[] = {"sh", "bash", "dash", "zsh", "ksh", "memtrace"};
  return task_pid == facts.parent_pid && std::find(std::begin(kPassThrough), std::end(kPassThrough),
                                                   facts.parent_name) != std::end(kPassThrough);
}

// Whether `vars` describe this process rather than one above it (see Scope).
bool Describes(const RankVariables& vars, const EnvLookup& env, const ProcessFacts& facts) {
  switch (vars.scope) {
    case Scope::kAnywhere:
      return true;
    case Scope::kTaskUnderSrun:
      return !EnvNonEmpty(env, "SLURM_TASK_PID").has_value() || IsSlurmTask(env, facts);
    case Scope::kTaskOnly:
      return IsSlurmTask(env, facts);
  }
  return false;
}

absl::StatusOr<RankFields> ReadRankFields(const EnvLookup& env, const ProcessFacts& facts) {
  RankFields out;
  for (const RankVariables& vars : kRankSources) {
    if (!Describes(vars, env, facts)) continue;
    absl::StatusOr<std::optional<int64_t>> rank = NonNegative(env, vars.rank);
    if (!rank.ok()) return rank.status();
    if (!rank->has_value()) continue;
    absl::StatusOr<std::optional<int64_t>> local_rank = NonNegative(env, vars.local_rank);
    if (!local_rank.ok()) return local_rank.status();
    absl::StatusOr<std::optional<int64_t>> world = NonNegative(env, vars.world_size);
    if (!world.ok()) return world.status();
    absl::StatusOr<std::optional<int64_t>> local_world = NonNegative(env, vars.local_world_size);
    if (!local_world.ok()) return local_world.status();
    absl::StatusOr<std::optional<int64_t>> group = NonNegative(env, vars.group_rank);
    if (!group.ok()) return group.status();

    if (world->has_value() && **world == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(vars.world_size, "='0' is out of range: a job has at least one rank"));
    }
    if (world->has_value() && **rank >= **world) {
      return absl::InvalidArgumentError(absl::StrCat(
          vars.rank, "='", **rank, "' is out of range: ", vars.world_size, " is ", **world));
    }
    if (local_world->has_value() && **local_world == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          vars.local_world_size, "='0' is out of range: a node has at least one rank"));
    }
    if (local_world->has_value() && local_rank->has_value() && **local_rank >= **local_world) {
      return absl::InvalidArgumentError(absl::StrCat(vars.local_rank, "='", **local_rank,
                                                     "' is out of range: ", vars.local_world_size,
                                                     " is ", **local_world));
    }
    out.launcher = vars.launcher;
    out.rank = static_cast<int32_t>(**rank);
    if (local_rank->has_value()) out.local_rank = static_cast<int32_t>(**local_rank);
    if (world->has_value()) out.world_size = static_cast<int32_t>(**world);
    if (local_world->has_value()) out.local_world_size = static_cast<int32_t>(**local_world);
    if (group->has_value()) out.group_rank = static_cast<int32_t>(**group);
    return out;
  }
  return out;
}

absl::StatusOr<std::string> ReadJobId(const EnvLookup& env) {
  if (auto v = EnvNonEmpty(env, "MEMTRACE_JOB_ID")) return *v;
  std::optional<std::string> torch = EnvNonEmpty(env, "TORCHELASTIC_RUN_ID");
  if (torch.has_value() && *torch != "none") return *torch;
  if (auto v = EnvNonEmpty(env, "RAY_JOB_ID")) return *v;
  if (auto v = EnvNonEmpty(env, "RAY_SUBMISSION_ID")) return *v;
  if (auto v = EnvNonEmpty(env, "SLURM_JOB_ID")) {
    if (auto step = EnvNonEmpty(env, "SLURM_STEP_ID")) return absl::StrCat(*v, ".", *step);
    return *v;
  }
  if (auto v = EnvNonEmpty(env, "PMIX_NAMESPACE")) return *v;
  // Last: a launcher wrapper's fallback must not override the id torchrun/Ray/Slurm give.
  if (auto v = EnvNonEmpty(env, "MEMTRACE_DEFAULT_JOB_ID")) return *v;
  std::string why = torch.has_value()
                        ? " (TORCHELASTIC_RUN_ID is 'none', torchrun's default --rdzv_id, which "
                          "every job shares: pass --rdzv_id or --standalone)"
                        : "";
  return absl::InvalidArgumentError(absl::StrCat(
      "no job id: none of MEMTRACE_JOB_ID, TORCHELASTIC_RUN_ID, RAY_JOB_ID, RAY_SUBMISSION_ID, "
      "SLURM_JOB_ID, PMIX_NAMESPACE, MEMTRACE_DEFAULT_JOB_ID is set",
      why, "; set MEMTRACE_JOB_ID"));
}

// The entries CUDA would use: it stops at the first negative index ("-1" hides every device).
std::vector<std::string> VisibleDevices(const std::string& value) {
  std::vector<std::string> out;
  for (absl::string_view entry : absl::StrSplit(value, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    if (entry.empty() || absl::StartsWith(entry, "-")) break;
    out.emplace_back(entry);
  }
  return out;
}

absl::StatusOr<std::optional<int64_t>> DeviceOverride(const EnvLookup& env) {
  return EnvInteger(env, "MEMTRACE_DEVICE", 0, INT32_MAX);
}

absl::StatusOr<std::optional<int64_t>> AttemptOverride(const EnvLookup& env) {
  return EnvInteger(env, "MEMTRACE_ATTEMPT", 0, UINT32_MAX);
}

absl::Status ReadDevice(const EnvLookup& env, int32_t local_rank, v1::RankIdentity* id) {
  absl::StatusOr<std::optional<int64_t>> explicit_device = DeviceOverride(env);
  if (!explicit_device.ok()) return explicit_device.status();
  if (explicit_device->has_value()) {
    id->set_device_index(static_cast<int32_t>(**explicit_device));
    return absl::OkStatus();
  }
  std::optional<std::string> visible_var = env("CUDA_VISIBLE_DEVICES");
  std::optional<std::vector<std::string>> visible;
  if (visible_var.has_value()) visible = VisibleDevices(*visible_var);
  if (visible.has_value() && visible->size() == 1) {
    id->set_device_index(0);
    const std::string& entry = (*visible)[0];
    if (absl::StartsWith(entry, "GPU-") || absl::StartsWith(entry, "MIG-")) {
      id->set_device_uuid(entry);
    }
    return absl::OkStatus();
  }
  if (local_rank >= 0 &&
      (!visible.has_value() || static_cast<size_t>(local_rank) < visible->size())) {
    id->set_device_index(local_rank);
    return absl::OkStatus();
  }
  id->set_device_index(-1);
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckIdentityOverrides(const EnvLookup& env) {
  if (absl::StatusOr<std::optional<int64_t>> a = AttemptOverride(env); !a.ok()) return a.status();
  if (absl::StatusOr<std::optional<int64_t>> d = DeviceOverride(env); !d.ok()) return d.status();
  return absl::OkStatus();
}

ProcessFacts CurrentProcessFacts() {
  ProcessFacts facts;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) facts.host = host;
  facts.pid = static_cast<uint32_t>(getpid());
  facts.parent_pid = static_cast<uint32_t>(getppid());
  ReadAncestors(facts.parent_pid, &facts);
  if (std::optional<ProcStat> self = ReadProcStat("self")) facts.start_ticks = self->start_ticks;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::getline(boot, facts.boot_id);
  std::ifstream comm(absl::StrCat("/proc/", facts.parent_pid, "/comm"));
  std::getline(comm, facts.parent_name);
  static const uint64_t start_ns = static_cast<uint64_t>(absl::GetCurrentTimeNanos());
  facts.start_ns = start_ns;
  return facts;
}

absl::StatusOr<v1::RankIdentity> IdentityFromEnvironment(const EnvLookup& env,
                                                         const ProcessFacts& facts) {
  absl::StatusOr<RankFields> ranks = ReadRankFields(env, facts);
  if (!ranks.ok()) return ranks.status();
  absl::StatusOr<std::string> job_id = ReadJobId(env);
  if (!job_id.ok()) return job_id.status();

  absl::StatusOr<std::optional<int64_t>> attempt = AttemptOverride(env);
  if (!attempt.ok()) return attempt.status();
  if (!attempt->has_value()) {
    attempt = EnvInteger(env, "TORCHELASTIC_RESTART_COUNT", 0, UINT32_MAX);
    if (!attempt.ok()) return attempt.status();
  }

  v1::RankIdentity id;
  id.set_job_id(*job_id);
  id.set_rank(ranks->rank);
  id.set_local_rank(ranks->local_rank);
  id.set_world_size(ranks->world_size);
  id.set_local_world_size(ranks->local_world_size);
  id.set_group_rank(ranks->group_rank);
  id.set_attempt(attempt->has_value() ? static_cast<uint32_t>(**attempt) : 0);
  id.set_host(facts.host);
  id.set_pid(facts.pid);
  for (uint32_t pid : facts.ancestor_pids) id.add_ancestor_pids(pid);
  for (uint64_t ticks : facts.ancestor_start_ticks) id.add_ancestor_start_ticks(ticks);
  id.set_start_ticks(facts.start_ticks);
  id.set_boot_id(facts.boot_id);
  id.set_process_start_ns(facts.start_ns);
  if (std::optional<std::string> run = EnvNonEmpty(env, "MEMTRACE_RUN_ID")) id.set_run_id(*run);
  if (absl::Status s = ReadDevice(env, ranks->local_rank, &id); !s.ok()) return s;

  std::string launcher = ranks->launcher;
  if (EnvNonEmpty(env, "TORCHELASTIC_RUN_ID").has_value()) {
    launcher = "torchrun";
  } else if (EnvNonEmpty(env, "RAY_JOB_ID").has_value() ||
             EnvNonEmpty(env, "RAY_SUBMISSION_ID").has_value()) {
    launcher = "ray";
  }
  id.set_launcher(launcher);
  id.set_agent_version(kAgentVersion);
  return id;
}

std::string LocalJobId(const ProcessFacts& facts, int64_t world_size) {
  const uint32_t pid = world_size > 1 && facts.parent_pid > 1 ? facts.parent_pid : facts.pid;
  return absl::StrCat("local-", facts.host, "-", pid);
}

absl::StatusOr<v1::RankIdentity> IdentityFromEnvironment(const EnvLookup& env) {
  return IdentityFromEnvironment(env, CurrentProcessFacts());
}

}  // namespace memtrace
