#include "tools/launch/ray_env_command.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>

#include "gtest/gtest.h"
#include "simdjson.h"
#include "tests/util/test_dirs.h"

namespace memtrace::launch {
namespace {

std::string MakeAgent() {
  std::string dir = test_util::UniqueDir("ray");
  std::string path = dir + "/libmemtrace_agent.so";
  std::ofstream(path) << "x";
  return path;
}

std::map<std::string, std::string> AsMap(const EnvVars& vars) {
  return std::map<std::string, std::string>(vars.begin(), vars.end());
}

TEST(RayEnvVariablesTest, CarriesInjectionCollectorJobForwardedSettingsAndExtras) {
  std::string agent = MakeAgent();
  RayEnvRequest request;
  request.collector = "head:7431";
  request.job = "rl-exp";
  request.agent_lib = agent;
  request.extra = {{"MEMTRACE_BATCH_EVENTS", "99"}, {"PYTORCH_CUDA_ALLOC_CONF", "a:b"}};
  EnvLookup env = MapEnvironment({{"MEMTRACE_BATCH_EVENTS", "10"},
                                  {"MEMTRACE_BATCH_DELAY_MS", "50"},
                                  {"RANK", "3"},
                                  {"RAY_JOB_ID", "02000000"}});
  absl::StatusOr<EnvVars> vars = RayEnvVariables(request, env, "");
  ASSERT_TRUE(vars.ok()) << vars.status();
  std::map<std::string, std::string> m = AsMap(*vars);
  EXPECT_EQ(m["CUDA_INJECTION64_PATH"], agent);
  EXPECT_EQ(m["NVTX_INJECTION64_PATH"], agent);
  EXPECT_EQ(m["MEMTRACE_COLLECTOR"], "head:7431");
  EXPECT_EQ(m["MEMTRACE_JOB_ID"], "rl-exp");
  EXPECT_EQ(m["MEMTRACE_BATCH_EVENTS"], "99") << "--env replaces the forwarded value";
  EXPECT_EQ(m["MEMTRACE_BATCH_DELAY_MS"], "50");
  EXPECT_EQ(m["PYTORCH_CUDA_ALLOC_CONF"], "a:b");
  EXPECT_EQ(m.count("RANK"), 0u) << "per-worker variables are never fixed for all workers";
  EXPECT_EQ(m.count("RAY_JOB_ID"), 0u);
  EXPECT_EQ(m.size(), vars->size()) << "no duplicates";
}

TEST(RayEnvVariablesTest, WithoutJobEveryWorkerUsesItsRayJobId) {
  RayEnvRequest request;
  request.collector = "head:7431";
  request.agent_lib = MakeAgent();
  std::map<std::string, std::string> m = AsMap(*RayEnvVariables(request, MapEnvironment({}), ""));
  EXPECT_EQ(m.count("MEMTRACE_JOB_ID"), 0u);
  EXPECT_EQ(m.count("MEMTRACE_DEFAULT_JOB_ID"), 0u);
  // A job id given as an extra variable (no --job) reaches the workers.
  request.extra = {{"MEMTRACE_JOB_ID", "from-env"}};
  m = AsMap(*RayEnvVariables(request, MapEnvironment({}), ""));
  EXPECT_EQ(m["MEMTRACE_JOB_ID"], "from-env");
}

TEST(RayEnvVariablesTest, CollectorIsRequiredAndAMissingAgentIsNotFound) {
  RayEnvRequest request;
  request.agent_lib = MakeAgent();
  EXPECT_EQ(RayEnvVariables(request, MapEnvironment({}), "").status().code(),
            absl::StatusCode::kInvalidArgument);
  // Without --agent_lib, one must be found here.
  request.collector = "head:7431";
  request.agent_lib = "";
  absl::StatusOr<EnvVars> vars = RayEnvVariables(request, MapEnvironment({}), "/nowhere/memtrace");
  EXPECT_EQ(vars.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(vars.status().message().find("--agent_lib"), std::string::npos);
  // --agent_lib is the path on the Ray nodes: taken as given, but absolute.
  request.agent_lib = "/opt/memtrace/lib/libmemtrace_agent.so";
  vars = RayEnvVariables(request, MapEnvironment({}), "");
  ASSERT_TRUE(vars.ok()) << vars.status();
  bool found = false;
  for (const auto& [name, value] : *vars) {
    if (name == "CUDA_INJECTION64_PATH") found = value == request.agent_lib;
  }
  EXPECT_TRUE(found);
  request.agent_lib = "lib/libmemtrace_agent.so";
  EXPECT_EQ(RayEnvVariables(request, MapEnvironment({}), "").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// $MEMTRACE_AGENT_LIB / $MEMTRACE_NVTX_LIB stand for --agent_lib / --nvtx_lib, and are taken
// as those are (as memtrace.ray.runtime_env takes them): paths on the nodes, kept as given
// without this machine having them, but absolute.
TEST(RayEnvVariablesTest, LibraryVariablesAreTakenAsTheFlagsAre) {
  RayEnvRequest request;
  request.collector = "head:7431";
  EnvLookup env = MapEnvironment({{"MEMTRACE_AGENT_LIB", "/opt/m/libmemtrace_agent.so"},
                                  {"MEMTRACE_NVTX_LIB", "/opt/m/libnvtx_inject.so"}});
  absl::StatusOr<EnvVars> vars = RayEnvVariables(request, env, "/nowhere/memtrace");
  ASSERT_TRUE(vars.ok()) << vars.status();
  std::map<std::string, std::string> m = AsMap(*vars);
  EXPECT_EQ(m["CUDA_INJECTION64_PATH"], "/opt/m/libmemtrace_agent.so");
  EXPECT_EQ(m["NVTX_INJECTION64_PATH"], "/opt/m/libnvtx_inject.so");
  // The flags win over the variables.
  request.agent_lib = "/flag/libmemtrace_agent.so";
  m = AsMap(*RayEnvVariables(request, env, ""));
  EXPECT_EQ(m["CUDA_INJECTION64_PATH"], "/flag/libmemtrace_agent.so");
  EXPECT_EQ(m["NVTX_INJECTION64_PATH"], "/opt/m/libnvtx_inject.so");
  request.agent_lib = "";
  vars = RayEnvVariables(request, MapEnvironment({{"MEMTRACE_AGENT_LIB", "rel/lib.so"}}), "");
  EXPECT_EQ(vars.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(vars.status().message().find("MEMTRACE_AGENT_LIB rel/lib.so: give an absolute path"),
            std::string::npos)
      << vars.status();
}

// An address gRPC would dial on another port (99999 wraps) or on port 0 is refused by name.
TEST(RayEnvVariablesTest, ACollectorAddressWithoutAValidPortIsRefused) {
  RayEnvRequest request;
  request.agent_lib = MakeAgent();
  for (const char* address : {"head", "head:99999"}) {
    request.collector = address;
    absl::StatusOr<EnvVars> vars = RayEnvVariables(request, MapEnvironment({}), "");
    EXPECT_EQ(vars.status().code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_NE(vars.status().message().find(address), std::string::npos) << vars.status();
  }
}

TEST(RayEnvCommandTest, PrintsOneLineOfValidRuntimeEnvJson) {
  setenv("MEMTRACE_AGENT_LIB", MakeAgent().c_str(), 1);
  std::ostringstream out, err;
  cli::CommandIo io{out, err};
  int code = RayEnvCommand().run({"--collector", "10.0.0.1:7431", "--env", "A=\"q\""}, io);
  ASSERT_EQ(code, 0) << err.str();
  std::string json = out.str();
  ASSERT_EQ(json.back(), '\n');
  EXPECT_EQ(json.find('\n'), json.size() - 1);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
  std::string_view collector, a;
  ASSERT_EQ(doc["env_vars"]["MEMTRACE_COLLECTOR"].get(collector), simdjson::SUCCESS);
  EXPECT_EQ(collector, "10.0.0.1:7431");
  ASSERT_EQ(doc["env_vars"]["A"].get(a), simdjson::SUCCESS);
  EXPECT_EQ(a, "\"q\"");
  EXPECT_TRUE(err.str().empty()) << err.str();
}

TEST(RayEnvCommandTest, WarnsAboutLoopbackCollectorAndUnknownMemtraceVariable) {
  setenv("MEMTRACE_AGENT_LIB", MakeAgent().c_str(), 1);
  std::ostringstream out, err;
  cli::CommandIo io{out, err};
  int code =
      RayEnvCommand().run({"--collector", "127.0.0.1:7431", "--env", "MEMTRACE_BATCH_EVENT=1"}, io);
  EXPECT_EQ(code, 0);
  EXPECT_NE(err.str().find("loopback"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("MEMTRACE_BATCH_EVENT is not in the agent's list"), std::string::npos);
}

TEST(RayEnvCommandTest, WarnsAboutAListeningAddressAndRefusesAVariableGivenTwice) {
  setenv("MEMTRACE_AGENT_LIB", MakeAgent().c_str(), 1);
  std::ostringstream out, err;
  cli::CommandIo io{out, err};
  EXPECT_EQ(RayEnvCommand().run({"--collector", "0.0.0.0:7431"}, io), 0);
  EXPECT_NE(err.str().find("0.0.0.0:7431 is a listening address"), std::string::npos)
      << err.str();
  std::ostringstream out2, err2;
  cli::CommandIo io2{out2, err2};
  EXPECT_EQ(RayEnvCommand().run({"--collector", "h:1", "--env", "X=1", "--env", "X=2"}, io2), 2);
  EXPECT_EQ(err2.str(), "memtrace ray-env: --env X given twice\n");
  EXPECT_EQ(out2.str(), "");
}

// The NVTX library defaults to the agent library: one missing path was warned of twice.
TEST(RayEnvCommandTest, AnAgentLibraryNotOnThisMachineIsWarnedOfOnce) {
  std::ostringstream out, err;
  cli::CommandIo io{out, err};
  EXPECT_EQ(RayEnvCommand().run({"--collector", "h:1", "--agent_lib", "/y/a.so"}, io), 0)
      << err.str();
  EXPECT_EQ(err.str(),
            "memtrace ray-env: warning: /y/a.so is not on this machine: it must exist at that "
            "path on every Ray node\n");
}

// Inside a `memtrace run`, its MEMTRACE_RUN_ID was copied to every Ray worker.
TEST(RayEnvCommandTest, DoesNotForwardAMemtraceRunsOwnId) {
  setenv("MEMTRACE_AGENT_LIB", MakeAgent().c_str(), 1);
  setenv("MEMTRACE_RUN_ID", "00c0ffee00c0ffee", 1);
  std::ostringstream out, err;
  cli::CommandIo io{out, err};
  EXPECT_EQ(RayEnvCommand().run({"--collector", "10.0.0.1:7431"}, io), 0) << err.str();
  unsetenv("MEMTRACE_RUN_ID");
  EXPECT_EQ(out.str().find("MEMTRACE_RUN_ID"), std::string::npos) << out.str();
}

TEST(RayEnvCommandTest, BadEnvFlagIsAUsageError) {
  std::ostringstream out, err;
  cli::CommandIo io{out, err};
  EXPECT_EQ(RayEnvCommand().run({"--collector", "h:1", "--env", "nonsense"}, io), 2);
  // A variable a flag sets would have been dropped without a word.
  std::ostringstream out2, err2;
  cli::CommandIo io2{out2, err2};
  EXPECT_EQ(RayEnvCommand().run({"--collector", "h:1", "--env", "MEMTRACE_COLLECTOR=x:1"}, io2), 2);
  EXPECT_NE(err2.str().find("--env MEMTRACE_COLLECTOR: set by --collector"), std::string::npos)
      << err2.str();
  EXPECT_EQ(out2.str(), "");
  // The job id only when --job sets it too; alone, --env carries it to the workers.
  std::ostringstream out3, err3;
  cli::CommandIo io3{out3, err3};
  EXPECT_EQ(
      RayEnvCommand().run({"--collector", "h:1", "--job", "a", "--env", "MEMTRACE_JOB_ID=b"}, io3),
      2);
  EXPECT_NE(err3.str().find("set by --job"), std::string::npos) << err3.str();
  EXPECT_NE(err.str().find("--env"), std::string::npos) << err.str();
  // A variable the launcher sets per worker would give every worker the same rank.
  std::ostringstream out4, err4;
  cli::CommandIo io4{out4, err4};
  EXPECT_EQ(RayEnvCommand().run({"--collector", "h:1", "--env", "RANK=3"}, io4), 2);
  EXPECT_NE(err4.str().find("--env RANK: it is set per worker (by the launcher"), std::string::npos)
      << err4.str();
  // So would a launcher's job id (every Ray job filed under one), or one process's attempt.
  for (const auto& [assignment, why] :
       {std::pair{"RAY_JOB_ID=1", "--env RAY_JOB_ID: the launcher sets it for each job"},
        std::pair{"TORCHELASTIC_RESTART_COUNT=1", "the launcher sets it for each job or restart"},
        std::pair{"MEMTRACE_ATTEMPT=2", "--env MEMTRACE_ATTEMPT: one process's attempt"},
        std::pair{"MEMTRACE_DEVICE=1", "--env MEMTRACE_DEVICE: one process's device"}}) {
    std::ostringstream out5, err5;
    cli::CommandIo io5{out5, err5};
    EXPECT_EQ(RayEnvCommand().run({"--collector", "h:1", "--env", assignment}, io5), 2)
        << assignment;
    EXPECT_NE(err5.str().find(why), std::string::npos) << err5.str();
    EXPECT_TRUE(out5.str().empty()) << out5.str();
  }
}

}  // namespace
}  // namespace memtrace::launch
