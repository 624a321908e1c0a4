#include "tools/launch/worker_env.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/identity/env_vars.h"
#include "query/cli/text_escape.h"

namespace memtrace::launch {
namespace {

bool IsVariableName(const std::string& name) {
  if (name.empty() || absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

}  // namespace

namespace {

// They describe one process (its device, its restart), not the job: a value set in the
// launching shell would give every worker the same one. Each with why, for NotForEveryWorker.
const std::pair<const char*, const char*> kPerProcessVariables[] = {
    {"MEMTRACE_DEVICE", "one process's device; every worker would name the same one"},
    {"MEMTRACE_ATTEMPT",
     "one process's attempt; every worker would claim the same one (the collector numbers a "
     "restarted worker's attempt itself)"},
};

}  // namespace

bool IsPerProcessVariable(const std::string& name) {
  for (const auto& [per_process, why] : kPerProcessVariables) {
    if (name == per_process) return true;
  }
  return false;
}

std::string GenerateJobId(absl::Time now, uint32_t random) {
  return absl::StrCat("job-", absl::FormatTime("%Y%m%d-%H%M%S", now, absl::LocalTimeZone()), "-",
                      absl::StrFormat("%06x", random & 0xffffff));
}

namespace {

// torchrun's own arguments: from after "torchrun" (or "-m torch.distributed.run") to its
// training script, after which every argument is the script's (`train.py --standalone` is the
// script's flag). [0, 0) when `command` is not torchrun.
std::pair<size_t, size_t> TorchrunOwnArguments(const std::vector<std::string>& command) {
  if (command.empty()) return {0, 0};
  size_t begin = 0;
  if (absl::EndsWith(command[0], "/torchrun") || command[0] == "torchrun") begin = 1;
  for (size_t i = 1; i + 1 < command.size() && begin == 0; ++i) {
    // Python's own options come before -m; the module's arguments after it.
    if (command[i] == "-m") {
      if (command[i + 1] != "torch.distributed.run" &&
          command[i + 1] != "torch.distributed.launch") {
        break;
      }
      begin = i + 2;
    }
  }
  if (begin == 0) return {0, 0};
  // torchrun's options without a value (torch.distributed.run's argparse, both spellings); every
  // other option takes one, unless given as --name=value.
  static const std::set<std::string, std::less<>> kNoValue = {"-h",
                                                              "--help",
                                                              "--standalone",
                                                              "-m",
                                                              "--module",
                                                              "--no_python",
                                                              "--no-python",
                                                              "--run_path",
                                                              "--run-path",
                                                              "--use_env",
                                                              "--use-env",
                                                              "--virtual-local-rank",
                                                              "--virtual_local_rank"};
  size_t i = begin;
  while (i < command.size()) {
    const std::string& arg = command[i];
    if (arg == "--" || !absl::StartsWith(arg, "-") || arg == "-") break;  // the script
    i += (absl::StrContains(arg, '=') || kNoValue.count(arg) > 0) ? 1 : 2;
  }
  return {begin, std::min(i, command.size())};
}

}  // namespace

std::string TorchrunRendezvousId(const std::vector<std::string>& command) {
  const auto [begin, end] = TorchrunOwnArguments(command);
  if (begin == end) return "";
  // --standalone replaces the id with a fresh UUID (torch.distributed.run), whatever --rdzv_id
  // says: the workers' job is unknown here.
  if (std::find(command.begin() + begin, command.begin() + end, "--standalone") !=
      command.begin() + end) {
    return "";
  }
  for (size_t i = begin; i < end; ++i) {
    for (const absl::string_view flag : {"--rdzv_id", "--rdzv-id"}) {
      std::string id;
      if (command[i] == flag && i + 1 < end) {
        id = command[i + 1];
      } else if (absl::StartsWith(command[i], absl::StrCat(flag, "="))) {
        id = command[i].substr(flag.size() + 1);
      } else {
        continue;
      }
      return id == "none" ? "" : id;  // "none": torchrun's default, shared by every run
    }
  }
  return "";
}

JobIdChoice ChooseJobId(const std::string& flag_job, const EnvLookup& env, absl::Time now,
                        uint32_t random) {
  JobIdChoice choice;
  if (!flag_job.empty()) {
    choice.explicit_id = flag_job;
    choice.source = "--job";
  } else if (std::optional<std::string> id = EnvNonEmpty(env, kJobIdVar)) {
    choice.explicit_id = *id;
    choice.source = kJobIdVar;
  } else if (std::optional<std::string> run = EnvNonEmpty(env, "TORCHELASTIC_RUN_ID");
             run.has_value() && *run != "none") {
    choice.explicit_id = *run;
    choice.source = "TORCHELASTIC_RUN_ID";
  } else if (std::optional<std::string> fallback = EnvNonEmpty(env, kDefaultJobIdVar)) {
    // The user's own fallback (used only where no launcher gives an id), kept as it is.
    choice.fallback_id = *fallback;
    choice.source = kDefaultJobIdVar;
  } else {
    choice.fallback_id = GenerateJobId(now, random);
    choice.source = "generated";
  }
  return choice;
}

bool AgentReadsVariable(const std::string& name) {
  for (const EnvVarDoc& doc : AgentEnvironmentVariables()) {
    if (doc.name == name) return true;
  }
  return false;
}

const std::vector<std::string>& PerWorkerVariables() {
  static const std::vector<std::string> kPerWorker = {"RANK",
                                                      "LOCAL_RANK",
                                                      "GROUP_RANK",
                                                      "OMPI_COMM_WORLD_RANK",
                                                      "OMPI_COMM_WORLD_LOCAL_RANK",
                                                      "SLURM_PROCID",
                                                      "SLURM_LOCALID",
                                                      "SLURM_NODEID",
                                                      "SLURM_TASK_PID",
                                                      "PMI_RANK",
                                                      "MPI_LOCALRANKID"};
  return kPerWorker;
}

const std::vector<std::pair<std::string, std::string>>& NotForEveryWorker() {
  static const std::vector<std::pair<std::string, std::string>>* const kAll = [] {
    auto* all = new std::vector<std::pair<std::string, std::string>>;
    for (const std::string& name : PerWorkerVariables()) {
      all->emplace_back(name,
                        "it is set per worker (by the launcher: torchrun, Slurm, MPI, or the code "
                        "that starts the Ray actor); one value for every worker would give them "
                        "all the same identity, and the collector keeps only one");
    }
    for (const auto& [name, why] : kPerProcessVariables) all->emplace_back(name, why);
    for (const char* name :
         {"RAY_JOB_ID", "RAY_SUBMISSION_ID", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
          "SLURM_JOB_ID", "SLURM_STEP_ID", "PMIX_NAMESPACE"}) {
      all->emplace_back(name,
                        "the launcher sets it for each job or restart; one value would file "
                        "every job under it (--job names this job)");
    }
    all->emplace_back("MEMTRACE_RUN_ID", "memtrace run sets it for the workers it starts");
    return all;
  }();
  return *kAll;
}

bool IsPerWorkerVariable(const std::string& name) {
  const std::vector<std::string>& all = PerWorkerVariables();
  return std::find(all.begin(), all.end(), name) != all.end();
}

EnvVars ToVariables(const AgentEnvironment& environment) {
  EnvVars vars;
  if (!environment.agent_library.empty()) {
    vars.emplace_back(kCudaInjectionVar, environment.agent_library);
  }
  if (!environment.nvtx_library.empty()) {
    vars.emplace_back(kNvtxInjectionVar, environment.nvtx_library);
  }
  if (!environment.collector.empty()) vars.emplace_back(kCollectorVar, environment.collector);
  if (!environment.job.explicit_id.empty()) {
    vars.emplace_back(kJobIdVar, environment.job.explicit_id);
  } else if (!environment.job.fallback_id.empty()) {
    // An agent that does not know the fallback variable would find no job id at all in a
    // worker without a launcher id; MEMTRACE_JOB_ID then carries it (and overrides launchers).
    vars.emplace_back(AgentReadsVariable(kDefaultJobIdVar) ? kDefaultJobIdVar : kJobIdVar,
                      environment.job.fallback_id);
  }
  if (!environment.run_id.empty() && AgentReadsVariable(kRunIdVar)) {
    vars.emplace_back(kRunIdVar, environment.run_id);
  }
  for (const auto& [name, value] : environment.settings) {
    bool duplicate = false;
    for (const auto& existing : vars) duplicate = duplicate || existing.first == name;
    if (!duplicate) vars.emplace_back(name, value);
  }
  return vars;
}

EnvVars ForwardedAgentSettings(const EnvLookup& env) {
  EnvVars vars;
  for (const EnvVarDoc& doc : AgentEnvironmentVariables()) {
    if (doc.set_by != "memtrace") continue;
    const std::string name(doc.name);
    // memtrace run's own id (set in a shell inside a `memtrace run`) is not this job's: ray-env
    // refuses it in --env, and copied from the shell it gave every Ray worker that run's id.
    if (name == kCollectorVar || name == kJobIdVar || name == kDefaultJobIdVar ||
        name == kRunIdVar) {
      continue;
    }
    if (IsPerProcessVariable(name)) continue;
    if (std::optional<std::string> value = EnvNonEmpty(env, name)) {
      vars.emplace_back(name, *value);
    }
  }
  return vars;
}

absl::StatusOr<std::pair<std::string, std::string>> ParseAssignment(const std::string& text) {
  size_t eq = text.find('=');
  if (eq == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not NAME=VALUE"));
  }
  std::string name = text.substr(0, eq);
  if (!IsVariableName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' in '", text, "' is not a variable name"));
  }
  return std::make_pair(name, text.substr(eq + 1));
}

std::string RuntimeEnvJson(const EnvVars& vars) {
  std::string out = "{\"env_vars\": {";
  for (size_t i = 0; i < vars.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", cli::JsonQuoted(vars[i].first), ": ",
                    cli::JsonQuoted(vars[i].second));
  }
  out += "}}";
  return out;
}

}  // namespace memtrace::launch
