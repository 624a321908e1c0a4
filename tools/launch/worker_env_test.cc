#include "tools/launch/worker_env.h"

#include <map>
#include <string>

#include "agent/identity/env_vars.h"
#include "gtest/gtest.h"
#include "simdjson.h"

namespace memtrace::launch {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1764700000);

std::map<std::string, std::string> AsMap(const EnvVars& vars) {
  return std::map<std::string, std::string>(vars.begin(), vars.end());
}

TEST(TorchrunRendezvousIdTest, ReadsTheIdTorchrunGivesItsWorkers) {
  EXPECT_EQ(TorchrunRendezvousId({"torchrun", "--nnodes", "2", "--rdzv_id", "exp-7", "train.py"}),
            "exp-7");
  EXPECT_EQ(TorchrunRendezvousId({"/usr/bin/torchrun", "--rdzv-id=exp-8", "train.py"}), "exp-8");
  EXPECT_EQ(TorchrunRendezvousId(
                {"python3", "-m", "torch.distributed.run", "--rdzv_id", "exp-9", "train.py"}),
            "exp-9");
  // torchrun's default id is shared by every run; other launchers' flags are not torchrun's.
  EXPECT_EQ(TorchrunRendezvousId({"torchrun", "--rdzv_id", "none", "train.py"}), "");
  EXPECT_EQ(TorchrunRendezvousId({"torchrun", "--standalone", "train.py"}), "");
  // --standalone gives the workers a random id, whatever --rdzv_id says.
  EXPECT_EQ(TorchrunRendezvousId({"torchrun", "--standalone", "--rdzv_id", "exp9", "train.py"}),
            "");
  EXPECT_EQ(TorchrunRendezvousId({"mpirun", "--rdzv_id", "x", "train.py"}), "");
  EXPECT_EQ(TorchrunRendezvousId({"torchrun", "--rdzv_id"}), "");
  EXPECT_EQ(TorchrunRendezvousId({}), "");
}

// After the training script every argument is the script's: its own --standalone or --rdzv_id
// says nothing of torchrun's.
TEST(TorchrunRendezvousIdTest, ReadsOnlyTorchrunsOwnArguments) {
  EXPECT_EQ(TorchrunRendezvousId({"torchrun", "--rdzv_id", "exp-7", "train.py", "--standalone"}),
            "exp-7");
  EXPECT_EQ(TorchrunRendezvousId({"torchrun", "--nproc_per_node", "2", "--standalone",
                                  "--max_restarts=1", "train.py", "--rdzv_id", "mine"}),
            "");
  EXPECT_EQ(TorchrunRendezvousId({"torchrun", "--nnodes", "1", "train.py", "--rdzv_id", "mine"}),
            "");
  // Options without a value do not take the script for theirs.
  EXPECT_EQ(TorchrunRendezvousId(
                {"torchrun", "--no_python", "--rdzv_id", "exp-8", "./train", "--rdzv_id", "mine"}),
            "exp-8");
  EXPECT_EQ(
      TorchrunRendezvousId({"torchrun", "--rdzv-id", "exp-9", "-m", "pkg.train", "--standalone"}),
      "exp-9");
  EXPECT_EQ(TorchrunRendezvousId({"python3", "-u", "-m", "torch.distributed.run", "--rdzv_id",
                                  "exp-10", "train.py", "--rdzv_id", "mine"}),
            "exp-10");
  // python -m of another module: not torchrun, whatever its arguments say.
  EXPECT_EQ(TorchrunRendezvousId(
                {"python3", "-m", "trainer", "-m", "torch.distributed.run", "--rdzv_id", "x"}),
            "");
}

TEST(JobIdTest, FlagThenMemtraceJobIdThenTorchelasticRunIdThenGenerated) {
  EnvLookup all = MapEnvironment({{"MEMTRACE_JOB_ID", "m"}, {"TORCHELASTIC_RUN_ID", "t"}});
  EXPECT_EQ(ChooseJobId("flag", all, kNow, 1).explicit_id, "flag");
  EXPECT_EQ(ChooseJobId("", all, kNow, 1).explicit_id, "m");
  EXPECT_EQ(ChooseJobId("", MapEnvironment({{"TORCHELASTIC_RUN_ID", "t"}}), kNow, 1).source,
            "TORCHELASTIC_RUN_ID");
  JobIdChoice generated = ChooseJobId("", MapEnvironment({}), kNow, 0xabcdef);
  EXPECT_TRUE(generated.explicit_id.empty());
  EXPECT_EQ(generated.fallback_id, GenerateJobId(kNow, 0xabcdef));
  EXPECT_EQ(generated.source, "generated");
}

TEST(JobIdTest, AUsersOwnDefaultJobIdIsTheFallbackInsteadOfAGeneratedOne) {
  JobIdChoice choice =
      ChooseJobId("", MapEnvironment({{"MEMTRACE_DEFAULT_JOB_ID", "mine"}}), kNow, 7);
  EXPECT_TRUE(choice.explicit_id.empty());  // launchers' own ids still come first in workers
  EXPECT_EQ(choice.fallback_id, "mine");
  EXPECT_EQ(choice.source, "MEMTRACE_DEFAULT_JOB_ID");
  EXPECT_EQ(ChooseJobId("", MapEnvironment({{"MEMTRACE_DEFAULT_JOB_ID", ""}}), kNow, 7).source,
            "generated");
  EXPECT_EQ(
      ChooseJobId(
          "", MapEnvironment({{"MEMTRACE_DEFAULT_JOB_ID", "mine"}, {"TORCHELASTIC_RUN_ID", "t"}}),
          kNow, 7)
          .explicit_id,
      "t");
}

TEST(JobIdTest, TorchrunDefaultRunIdNoneIsNotAJobId) {
  JobIdChoice choice = ChooseJobId("", MapEnvironment({{"TORCHELASTIC_RUN_ID", "none"}}), kNow, 7);
  EXPECT_TRUE(choice.explicit_id.empty());
  EXPECT_FALSE(choice.fallback_id.empty());
}

TEST(JobIdTest, GeneratedIdHasDateTimeAndSixHexDigits) {
  std::string id = GenerateJobId(kNow, 0x1234567);
  ASSERT_EQ(id.size(), std::string("job-20261202-171500-234567").size()) << id;
  EXPECT_EQ(id.substr(0, 4), "job-");
  EXPECT_EQ(id.substr(id.size() - 6), "234567");
  EXPECT_NE(GenerateJobId(kNow, 1), GenerateJobId(kNow, 2));
}

TEST(ToVariablesTest, InjectionCollectorAndJobInOrder) {
  AgentEnvironment env;
  env.agent_library = "/a/libmemtrace_agent.so";
  env.nvtx_library = "/a/libmemtrace_agent.so";
  env.collector = "h:1";
  env.job.explicit_id = "j";
  env.settings = {{"MEMTRACE_BATCH_EVENTS", "10"}, {"MEMTRACE_COLLECTOR", "ignored"}};
  EnvVars vars = ToVariables(env);
  ASSERT_EQ(vars.size(), 5u);
  EXPECT_EQ(vars[0], (std::pair<std::string, std::string>{"CUDA_INJECTION64_PATH",
                                                          "/a/libmemtrace_agent.so"}));
  EXPECT_EQ(vars[1].first, "NVTX_INJECTION64_PATH");
  EXPECT_EQ(vars[2], (std::pair<std::string, std::string>{"MEMTRACE_COLLECTOR", "h:1"}));
  EXPECT_EQ(vars[3], (std::pair<std::string, std::string>{"MEMTRACE_JOB_ID", "j"}));
  EXPECT_EQ(vars[4].first, "MEMTRACE_BATCH_EVENTS");
}

TEST(ToVariablesTest, TheRunIdFollowsTheJobId) {
  AgentEnvironment env;
  env.collector = "h:1";
  env.job.explicit_id = "j";
  env.run_id = "00c0ffee00c0ffee";
  EnvVars vars = ToVariables(env);
  ASSERT_EQ(vars.size(), 3u);
  EXPECT_EQ(vars[2], (std::pair<std::string, std::string>{"MEMTRACE_RUN_ID", "00c0ffee00c0ffee"}));
}

TEST(ToVariablesTest, WithoutAgentNoInjectionVariables) {
  AgentEnvironment env;
  env.collector = "h:1";
  std::map<std::string, std::string> vars = AsMap(ToVariables(env));
  EXPECT_EQ(vars.count("CUDA_INJECTION64_PATH"), 0u);
  EXPECT_EQ(vars.count("NVTX_INJECTION64_PATH"), 0u);
}

TEST(ToVariablesTest, FallbackIdGoesWhereTheAgentReadsIt) {
  AgentEnvironment env;
  env.job.fallback_id = "job-x";
  std::map<std::string, std::string> vars = AsMap(ToVariables(env));
  if (AgentReadsVariable(kDefaultJobIdVar)) {
    EXPECT_EQ(vars[kDefaultJobIdVar], "job-x");
    EXPECT_EQ(vars.count("MEMTRACE_JOB_ID"), 0u);
  } else {
    EXPECT_EQ(vars["MEMTRACE_JOB_ID"], "job-x");
  }
}

TEST(ForwardedAgentSettingsTest, ForwardsEveryMemtraceSettingOfTheAgentListAndNoLauncherVar) {
  std::map<std::string, std::string> all;
  for (const EnvVarDoc& doc : AgentEnvironmentVariables()) {
    all[std::string(doc.name)] = "v-" + std::string(doc.name);
  }
  std::map<std::string, std::string> forwarded = AsMap(ForwardedAgentSettings(MapEnvironment(all)));
  for (const EnvVarDoc& doc : AgentEnvironmentVariables()) {
    const std::string name(doc.name);
    const bool expected = doc.set_by == "memtrace" && name != "MEMTRACE_COLLECTOR" &&
                          name != "MEMTRACE_JOB_ID" && name != kDefaultJobIdVar &&
                          name != kRunIdVar && !IsPerProcessVariable(name);
    EXPECT_EQ(forwarded.count(name), expected ? 1u : 0u) << name;
  }
  EXPECT_EQ(forwarded.count("RANK"), 0u);
  EXPECT_EQ(forwarded.count("RAY_JOB_ID"), 0u);
  EXPECT_EQ(forwarded.count("MEMTRACE_DEVICE"), 0u);
  // A `memtrace run`'s own id, when ray-env is called inside one: not the Ray job's.
  EXPECT_EQ(forwarded.count("MEMTRACE_RUN_ID"), 0u);
  EXPECT_EQ(forwarded.count("MEMTRACE_BATCH_EVENTS"), 1u);
}

TEST(ForwardedAgentSettingsTest, UnsetAndEmptyValuesAreNotForwarded) {
  EXPECT_TRUE(ForwardedAgentSettings(MapEnvironment({{"MEMTRACE_BATCH_EVENTS", ""}})).empty());
  EXPECT_TRUE(ForwardedAgentSettings(MapEnvironment({})).empty());
}

TEST(ParseAssignmentTest, SplitsAtFirstEqualsAndRejectsBadNames) {
  auto ok = ParseAssignment("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,x=y");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->first, "PYTORCH_CUDA_ALLOC_CONF");
  EXPECT_EQ(ok->second, "expandable_segments:True,x=y");
  EXPECT_EQ(ParseAssignment("A=")->second, "");
  EXPECT_EQ(ParseAssignment("novalue").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseAssignment("=x").ok());
  EXPECT_FALSE(ParseAssignment("1A=x").ok());
  EXPECT_FALSE(ParseAssignment("A B=x").ok());
}

TEST(RuntimeEnvJsonTest, IsValidJsonWithEveryValueIntact) {
  EnvVars vars = {{"A", "plain"}, {"B", "quote\" back\\slash\nnewline\x01"}, {"C", "ü"}};
  std::string json = RuntimeEnvJson(vars);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
  simdjson::dom::object env_vars;
  ASSERT_EQ(doc["env_vars"].get(env_vars), simdjson::SUCCESS);
  size_t n = 0;
  for (auto field : env_vars) {
    std::string_view value;
    ASSERT_EQ(field.value.get(value), simdjson::SUCCESS);
    EXPECT_EQ(value, vars[n].second);
    EXPECT_EQ(field.key, vars[n].first);
    ++n;
  }
  EXPECT_EQ(n, vars.size());
}

}  // namespace
}  // namespace memtrace::launch
