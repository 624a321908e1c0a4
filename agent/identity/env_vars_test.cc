#include "agent/identity/env_vars.h"

#include <set>
#include <string>

#include "agent/identity/transport_env.h"
#include "gtest/gtest.h"

namespace memtrace {
namespace {

std::set<std::string> DocumentedNames() {
  std::set<std::string> names;
  for (const EnvVarDoc& doc : AgentEnvironmentVariables()) names.insert(std::string(doc.name));
  return names;
}

TEST(EnvVarsTest, NamesAreUniqueAndEachHasOriginAndMeaning) {
  EXPECT_EQ(DocumentedNames().size(), AgentEnvironmentVariables().size());
  const std::set<std::string> origins = {"memtrace", "torchrun", "ray", "mpirun",
                                         "mpiexec",  "slurm",    "cuda"};
  for (const EnvVarDoc& doc : AgentEnvironmentVariables()) {
    EXPECT_EQ(origins.count(std::string(doc.set_by)), 1u) << doc.name;
    EXPECT_FALSE(doc.meaning.empty()) << doc.name;
  }
}

TEST(EnvVarsTest, ListsTheVariablesLaunchersMustForward) {
  std::set<std::string> names = DocumentedNames();
  for (const char* name : {"MEMTRACE_COLLECTOR",
                           "MEMTRACE_JOB_ID",
                           "MEMTRACE_SPOOL_DIR",
                           "MEMTRACE_SPOOL_MAX_BYTES",
                           "MEMTRACE_QUEUE_EVENTS",
                           "RANK",
                           "LOCAL_RANK",
                           "WORLD_SIZE",
                           "LOCAL_WORLD_SIZE",
                           "GROUP_RANK",
                           "TORCHELASTIC_RUN_ID",
                           "TORCHELASTIC_RESTART_COUNT",
                           "RAY_JOB_ID",
                           "RAY_SUBMISSION_ID",
                           "OMPI_COMM_WORLD_RANK",
                           "OMPI_COMM_WORLD_SIZE",
                           "OMPI_COMM_WORLD_LOCAL_RANK",
                           "PMI_RANK",
                           "PMI_SIZE",
                           "MPI_LOCALRANKID",
                           "SLURM_PROCID",
                           "SLURM_NTASKS",
                           "SLURM_LOCALID",
                           "SLURM_JOB_ID",
                           "MEMTRACE_DEVICE",
                           "CUDA_VISIBLE_DEVICES"}) {
    EXPECT_EQ(names.count(name), 1u) << name;
  }
}

// The list must not drift from the code: every name the parsers ask for is documented. An
// empty environment with only a job id makes the parsers walk every fallback.
TEST(EnvVarsTest, EveryVariableTheParsersReadIsDocumented) {
  std::set<std::string> asked;
  EnvLookup base =
      MapEnvironment({{"PMIX_NAMESPACE", "ns"}, {"SLURM_PROCID", "0"}, {"SLURM_TASK_PID", "1"}});
  EnvLookup recording = [&](const std::string& name) {
    asked.insert(name);
    return base(name);
  };
  ASSERT_TRUE(TransportOptionsFromEnvironment(recording, ProcessFacts{"h", 1}).ok());
  // And the torchrun path with SLURM_STEP_ID.
  EnvLookup torch = MapEnvironment({{"RANK", "0"}, {"SLURM_JOB_ID", "1"}, {"SLURM_STEP_ID", "0"},
                                    {"TORCHELASTIC_RUN_ID", "none"}});
  EnvLookup recording2 = [&](const std::string& name) {
    asked.insert(name);
    return torch(name);
  };
  ASSERT_TRUE(TransportOptionsFromEnvironment(recording2, ProcessFacts{"h", 1}).ok());
  std::set<std::string> documented = DocumentedNames();
  for (const std::string& name : asked) EXPECT_EQ(documented.count(name), 1u) << name;
  EXPECT_GT(asked.size(), 25u);
}

}  // namespace
}  // namespace memtrace
