#include "tools/launch/ray_env_command.h"

#include <unistd.h>

#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "proto/connect/collector_address.h"
#include "query/cli/flags.h"
#include "tools/launch/launch_paths.h"

namespace memtrace::launch {
namespace {

constexpr char kName[] = "ray-env";

constexpr char kUsage[] =
    "memtrace ray-env --collector ADDR [--job NAME] [--agent_lib PATH] [--env NAME=VALUE]...\n"
    "\n"
    "Prints the Ray runtime_env that makes every worker of a Ray job record to the collector:\n"
    "{\"env_vars\": {...}} with CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH (the agent\n"
    "library), MEMTRACE_COLLECTOR, MEMTRACE_JOB_ID (with --job) and the agent settings\n"
    "(MEMTRACE_*) set in this shell. Pass it to the job submission:\n"
    "\n"
    "  ray job submit --runtime-env-json \"$(memtrace ray-env --collector head:7431)\" \\\n"
    "      -- python main.py\n"
    "\n"
    "or from Python, with JobSubmissionClient:\n"
    "\n"
    "  import json, subprocess\n"
    "  from ray.job_submission import JobSubmissionClient\n"
    "  env = json.loads(subprocess.check_output(\n"
    "      [\"memtrace\", \"ray-env\", \"--collector\", \"head:7431\"]))\n"
    "  JobSubmissionClient(\"http://head:8265\").submit_job(\n"
    "      entrypoint=\"python main.py\", runtime_env=env)\n"
    "\n"
    "(memtrace.ray.runtime_env(\"head:7431\") in tools/python builds the same dict without\n"
    "this binary; merge it into a runtime_env that has other keys.)\n"
    "\n"
    "The agent library path must exist on every node (install memtrace at the same path, or\n"
    "pass --agent_lib). Without --job each worker takes the job id from its own environment:\n"
    "MEMTRACE_JOB_ID, else TORCHELASTIC_RUN_ID (a torchrun it runs under), else RAY_JOB_ID,\n"
    "which all workers of one Ray job share. Ranks come from RANK / WORLD_SIZE / LOCAL_RANK\n"
    "where the framework sets them (verl does for its FSDP workers); other workers are named\n"
    "by host + device + pid, as `memtrace ranks` shows in its identified_by column. The\n"
    "collector address must be reachable from the worker nodes: not 127.0.0.1 on a multi-node\n"
    "cluster.";

bool IsLoopback(const std::string& address) {
  return absl::StartsWith(address, "127.") || absl::StartsWith(address, "localhost:") ||
         absl::StartsWith(address, "[::1]");
}

// 0.0.0.0 and [::] are what a collector listens on (every interface), not a place to connect to.
bool IsUnspecified(const std::string& address) {
  return absl::StartsWith(address, "0.0.0.0:") || absl::StartsWith(address, "[::]:");
}

}  // namespace

absl::StatusOr<EnvVars> RayEnvVariables(const RayEnvRequest& request, const EnvLookup& env,
                                        const std::string& exe_path) {
  if (request.collector.empty()) {
    return absl::InvalidArgumentError(
        "--collector ADDR is required: the address Ray workers send to (host:port)");
  }
  if (absl::Status s = connect::CheckCollectorAddress("--collector", request.collector); !s.ok()) {
    return s;
  }
  // A library given (--agent_lib / --nvtx_lib, else $MEMTRACE_AGENT_LIB / $MEMTRACE_NVTX_LIB) is
  // its path on the Ray nodes, which this machine need not have (the command warns when it does
  // not): kept as given, but absolute. Only the default is looked up here.
  struct GivenPath {
    const char* source;
    std::string path;
  };
  auto given = [&env](const char* flag, const std::string& from_flag, const char* variable) {
    if (!from_flag.empty()) return GivenPath{flag, from_flag};
    return GivenPath{variable, EnvNonEmpty(env, variable).value_or("")};
  };
  const GivenPath agent_lib = given("--agent_lib", request.agent_lib, kAgentLibraryEnv);
  const GivenPath nvtx_lib = given("--nvtx_lib", request.nvtx_lib, kNvtxLibraryEnv);
  for (const GivenPath& g : {agent_lib, nvtx_lib}) {
    if (!g.path.empty() && g.path.front() != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat(g.source, " ", g.path,
                       ": give an absolute path (the workers start in their own directories)"));
    }
  }
  absl::StatusOr<std::string> lib = agent_lib.path.empty()
                                        ? FindAgentLibrary("", env, exe_path)
                                        : absl::StatusOr<std::string>(agent_lib.path);
  if (!lib.ok()) {
    return absl::NotFoundError(
        absl::StrCat(lib.status().message(), "; pass --agent_lib with its path on the Ray nodes"));
  }
  const std::string nvtx = nvtx_lib.path.empty() ? *lib : nvtx_lib.path;

  AgentEnvironment agent;
  agent.agent_library = *lib;
  agent.nvtx_library = nvtx;
  agent.collector = request.collector;
  agent.job.explicit_id = request.job;
  EnvVars settings = ForwardedAgentSettings(env);
  for (const auto& [name, value] : request.extra) {
    bool replaced = false;
    for (auto& entry : settings) {
      if (entry.first == name) {
        entry.second = value;
        replaced = true;
      }
    }
    if (!replaced) settings.emplace_back(name, value);
  }
  agent.settings = std::move(settings);
  return ToVariables(agent);
}

cli::Command RayEnvCommand() {
  cli::Command command;
  command.name = kName;
  command.summary = "print the Ray runtime_env JSON that traces a Ray job's workers";
  command.usage = kUsage;
  command.run = [](const std::vector<std::string>& args, cli::CommandIo& io) {
    cli::Command self;
    self.name = kName;
    self.usage = kUsage;
    RayEnvRequest request;
    cli::FlagSet flags;
    flags.AddString("collector", "ADDR",
                    "collector host:port as the workers reach it (default $MEMTRACE_COLLECTOR)",
                    &request.collector);
    flags.AddString("job", "NAME", "job id (default: each worker's own, usually its RAY_JOB_ID)",
                    &request.job);
    flags.AddString("agent_lib", "PATH",
                    "agent library path on the nodes (default $MEMTRACE_AGENT_LIB, else found next "
                    "to memtrace)",
                    &request.agent_lib);
    flags.AddString("nvtx_lib", "PATH",
                    "NVTX_INJECTION64_PATH (default $MEMTRACE_NVTX_LIB, else the agent library)",
                    &request.nvtx_lib);
    flags.AddRepeatable("env", "NAME=VALUE",
                        "one more variable for the workers (repeatable; not a per-worker rank)",
                        [&request](absl::string_view value) {
                          absl::StatusOr<std::pair<std::string, std::string>> parsed =
                              ParseAssignment(std::string(value));
                          if (!parsed.ok()) return parsed.status();
                          request.extra.push_back(*parsed);
                          return absl::OkStatus();
                        });
    if (std::optional<int> done = cli::ParseCommandLine(self, flags, args, io)) return *done;
    // What the flags set wins over --env: refused rather than dropped without a word. (The
    // collector and the injection paths are always set; the job id only with --job.)
    for (size_t i = 0; i < request.extra.size(); ++i) {
      const std::string& name = request.extra[i].first;
      for (size_t j = 0; j < i; ++j) {
        if (request.extra[j].first == name) {
          return cli::ReportError(
              io, absl::InvalidArgumentError(absl::StrCat("--env ", name, " given twice")), kName);
        }
      }
      const char* flag = name == kCollectorVar                       ? "--collector"
                         : name == kCudaInjectionVar                 ? "--agent_lib"
                         : name == kNvtxInjectionVar                 ? "--nvtx_lib"
                         : name == kJobIdVar && !request.job.empty() ? "--job"
                                                                     : nullptr;
      if (flag != nullptr) {
        return cli::ReportError(
            io, absl::InvalidArgumentError(absl::StrCat("--env ", name, ": set by ", flag)), kName);
      }
      for (const auto& [refused, why] : NotForEveryWorker()) {
        if (name == refused) {
          return cli::ReportError(
              io, absl::InvalidArgumentError(absl::StrCat("--env ", name, ": ", why)), kName);
        }
      }
    }
    EnvLookup env = ProcessEnvironment();
    if (request.collector.empty()) {
      request.collector = EnvNonEmpty(env, "MEMTRACE_COLLECTOR").value_or("");
    }
    absl::StatusOr<EnvVars> vars = RayEnvVariables(request, env, CurrentExecutablePath());
    if (!vars.ok()) return cli::ReportError(io, vars.status(), kName);
    for (const auto& [name, value] : request.extra) {
      if (absl::StartsWith(name, "MEMTRACE_") && !AgentReadsVariable(name)) {
        io.err << "memtrace ray-env: warning: " << name
               << " is not in the agent's list of variables (a typo?)\n";
      }
    }
    // A library found here exists; one given may be only on the nodes. The NVTX library is
    // the agent library by default: one path is warned of once.
    std::set<std::string> missing;
    for (const auto& [name, value] : *vars) {
      if (name == "MEMTRACE_TOKEN") {
        io.err << "memtrace ray-env: warning: MEMTRACE_TOKEN goes into the job's runtime_env, "
                  "which Ray keeps and shows with the job: prefer MEMTRACE_TOKEN_FILE naming a "
                  "file on every node\n";
      }
      if ((name == kCudaInjectionVar || name == kNvtxInjectionVar) &&
          ::access(value.c_str(), R_OK) != 0 && missing.insert(value).second) {
        io.err << "memtrace ray-env: warning: " << value
               << " is not on this machine: it must exist at that path on every Ray node\n";
      }
    }
    if (IsLoopback(request.collector)) {
      io.err << "memtrace ray-env: warning: collector " << request.collector
             << " is a loopback address: only workers on this machine can reach it\n";
    } else if (IsUnspecified(request.collector)) {
      io.err << "memtrace ray-env: warning: collector " << request.collector
             << " is a listening address (every interface), not one workers can connect to:"
                " give the collector's host name or IP\n";
    }
    io.out << RuntimeEnvJson(*vars) << "\n";
    return cli::kExitOk;
  };
  return command;
}

}  // namespace memtrace::launch
