#include "agent/identity/identity.h"

#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace memtrace {
namespace {

ProcessFacts MakeFacts() {
  ProcessFacts f;
  f.host = "node-7";
  f.pid = 4242;
  f.start_ns = 1'700'000'000'000'000'123;
  f.parent_pid = 4100;
  f.ancestor_pids = {4100, 4000, 1};
  f.ancestor_start_ticks = {900, 500, 2};
  f.start_ticks = 950;
  f.boot_id = "boot-7";
  return f;
}
const ProcessFacts kFacts = MakeFacts();

absl::StatusOr<v1::RankIdentity> FromMap(std::map<std::string, std::string> vars) {
  return IdentityFromEnvironment(MapEnvironment(std::move(vars)), kFacts);
}

void ExpectInvalid(const absl::StatusOr<v1::RankIdentity>& id, const std::string& fragment) {
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << id.status();
  EXPECT_NE(id.status().message().find(fragment), std::string::npos)
      << "message '" << id.status().message() << "' lacks '" << fragment << "'";
}

// What the real torchrun gave each worker (see shared/notes/launchers.md).
std::map<std::string, std::string> TorchrunEnv() {
  return {{"RANK", "5"},
          {"LOCAL_RANK", "1"},
          {"WORLD_SIZE", "8"},
          {"LOCAL_WORLD_SIZE", "4"},
          {"GROUP_RANK", "1"},
          {"TORCHELASTIC_RUN_ID", "3f1c-uuid"},
          {"TORCHELASTIC_RESTART_COUNT", "2"},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", "29500"}};
}

TEST(IdentityTest, ReadsEveryTorchrunField) {
  absl::StatusOr<v1::RankIdentity> id = FromMap(TorchrunEnv());
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->job_id(), "3f1c-uuid");
  EXPECT_EQ(id->rank(), 5);
  EXPECT_EQ(id->local_rank(), 1);
  EXPECT_EQ(id->world_size(), 8);
  EXPECT_EQ(id->local_world_size(), 4);
  EXPECT_EQ(id->group_rank(), 1);
  EXPECT_EQ(id->attempt(), 2u);
  EXPECT_EQ(id->host(), "node-7");
  EXPECT_EQ(id->pid(), 4242u);
  // What tells the collector a subprocess that inherited RANK from a process above it.
  EXPECT_EQ(std::vector<uint32_t>(id->ancestor_pids().begin(), id->ancestor_pids().end()),
            (std::vector<uint32_t>{4100, 4000, 1}));
  EXPECT_EQ(
      std::vector<uint64_t>(id->ancestor_start_ticks().begin(), id->ancestor_start_ticks().end()),
      (std::vector<uint64_t>{900, 500, 2}));
  EXPECT_EQ(id->start_ticks(), 950u);
  EXPECT_EQ(id->boot_id(), "boot-7");
  EXPECT_EQ(id->process_start_ns(), kFacts.start_ns);
  EXPECT_EQ(id->device_index(), 1);  // LOCAL_RANK, no CUDA_VISIBLE_DEVICES
  EXPECT_EQ(id->launcher(), "torchrun");
  EXPECT_EQ(id->agent_version(), kAgentVersion);
  EXPECT_EQ(id->run_id(), "");  // no memtrace run started it
}

TEST(IdentityTest, CarriesTheMemtraceRunThatStartedIt) {
  std::map<std::string, std::string> env = TorchrunEnv();
  env["MEMTRACE_RUN_ID"] = "00c0ffee00c0ffee";
  absl::StatusOr<v1::RankIdentity> id = FromMap(env);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->run_id(), "00c0ffee00c0ffee");
}

// Without a job id in the environment: a process of its own is its own job; the ranks of a
// world of several that one launcher started share the launcher's (their parent's) job.
TEST(IdentityTest, ALocalJobIdIsTheLaunchersForARankOfSeveral) {
  ProcessFacts facts;
  facts.host = "node-3";
  facts.pid = 4242;
  facts.parent_pid = 4000;
  EXPECT_EQ(LocalJobId(facts, 0), "local-node-3-4242");
  EXPECT_EQ(LocalJobId(facts, 1), "local-node-3-4242");
  EXPECT_EQ(LocalJobId(facts, 8), "local-node-3-4000");
  facts.parent_pid = 1;  // reparented to init: no launcher left to share
  EXPECT_EQ(LocalJobId(facts, 8), "local-node-3-4242");
}

TEST(IdentityTest, MemtraceJobIdOverridesTorchrunRunId) {
  auto env = TorchrunEnv();
  env["MEMTRACE_JOB_ID"] = "my-job";
  absl::StatusOr<v1::RankIdentity> id = FromMap(env);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->job_id(), "my-job");
  EXPECT_EQ(id->launcher(), "torchrun");
}

TEST(IdentityTest, DefaultJobIdYieldsToLauncherIds) {
  auto env = TorchrunEnv();
  env["MEMTRACE_DEFAULT_JOB_ID"] = "job-generated";
  absl::StatusOr<v1::RankIdentity> id = FromMap(env);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->job_id(), "3f1c-uuid");
  absl::StatusOr<v1::RankIdentity> plain =
      FromMap({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MEMTRACE_DEFAULT_JOB_ID", "job-generated"}});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->job_id(), "job-generated");
}

TEST(IdentityTest, MemtraceAttemptOverridesRestartCount) {
  auto env = TorchrunEnv();
  env["MEMTRACE_ATTEMPT"] = "9";
  absl::StatusOr<v1::RankIdentity> id = FromMap(env);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->attempt(), 9u);
}

// memtrace run checks the overrides its workers inherit with the agent's own ranges: it kept a
// copy of them, which could drift from what the agent refuses.
TEST(IdentityTest, CheckIdentityOverridesRefusesWhatTheIdentityWould) {
  EXPECT_TRUE(CheckIdentityOverrides(MapEnvironment({})).ok());
  EXPECT_TRUE(CheckIdentityOverrides(
                  MapEnvironment({{"MEMTRACE_ATTEMPT", "4294967295"}, {"MEMTRACE_DEVICE", "7"}}))
                  .ok());
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"MEMTRACE_ATTEMPT", "4294967296"},
                                                        {"MEMTRACE_ATTEMPT", "abc"},
                                                        {"MEMTRACE_DEVICE", "-1"},
                                                        {"MEMTRACE_DEVICE", "2147483648"}}) {
    auto env = TorchrunEnv();
    env[name] = value;
    const absl::Status checked = CheckIdentityOverrides(MapEnvironment(env));
    EXPECT_EQ(checked.code(), absl::StatusCode::kInvalidArgument) << name << "=" << value;
    EXPECT_NE(checked.message().find(name), std::string::npos) << checked;
    EXPECT_FALSE(FromMap(env).ok()) << name << "=" << value;  // the identity refuses it too
  }
}

TEST(IdentityTest, TorchrunDefaultRunIdNoneIsNotAJobId) {
  auto env = TorchrunEnv();
  env["TORCHELASTIC_RUN_ID"] = "none";
  ExpectInvalid(FromMap(env), "TORCHELASTIC_RUN_ID is 'none'");
  env["SLURM_JOB_ID"] = "777";
  absl::StatusOr<v1::RankIdentity> id = FromMap(env);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->job_id(), "777");
  EXPECT_EQ(id->rank(), 5);  // torchrun's RANK still wins over Slurm's task id
}

TEST(IdentityTest, RayActorWithoutRankGetsMinusOneAndRayJobId) {
  absl::StatusOr<v1::RankIdentity> id =
      FromMap({{"RAY_JOB_ID", "02000000"}, {"CUDA_VISIBLE_DEVICES", "3"}});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->job_id(), "02000000");
  EXPECT_EQ(id->launcher(), "ray");
  EXPECT_EQ(id->rank(), -1);
  EXPECT_EQ(id->local_rank(), -1);
  EXPECT_EQ(id->world_size(), 0);
  EXPECT_EQ(id->group_rank(), -1);
  EXPECT_EQ(id->device_index(), 0);  // one visible device: ordinal 0
  EXPECT_EQ(id->host(), "node-7");
  EXPECT_EQ(id->pid(), 4242u);
}

TEST(IdentityTest, RaySubmissionIdIsUsedWhenRayJobIdIsMissing) {
  absl::StatusOr<v1::RankIdentity> id = FromMap({{"RAY_SUBMISSION_ID", "raysubmit_abc"}});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->job_id(), "raysubmit_abc");
  EXPECT_EQ(id->launcher(), "ray");
}

TEST(IdentityTest, RayWorkerWithRankFromTheTrainerKeepsRankAndRayLauncher) {
  // verl-style: the trainer puts RANK/WORLD_SIZE into each actor's environment.
  absl::StatusOr<v1::RankIdentity> id = FromMap({{"RAY_JOB_ID", "03000000"},
                                                 {"RANK", "3"},
                                                 {"WORLD_SIZE", "4"},
                                                 {"LOCAL_RANK", "3"},
                                                 {"CUDA_VISIBLE_DEVICES", "GPU-5a7b-uuid"}});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->rank(), 3);
  EXPECT_EQ(id->launcher(), "ray");
  EXPECT_EQ(id->device_index(), 0);  // single visible device beats LOCAL_RANK
  EXPECT_EQ(id->device_uuid(), "GPU-5a7b-uuid");
}

TEST(IdentityTest, TorchrunRunIdBeatsRayJobId) {
  auto env = TorchrunEnv();
  env["RAY_JOB_ID"] = "01000000";
  absl::StatusOr<v1::RankIdentity> id = FromMap(env);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->job_id(), "3f1c-uuid");
  EXPECT_EQ(id->launcher(), "torchrun");
}

TEST(IdentityTest, ReadsOpenMpiVariables) {
  absl::StatusOr<v1::RankIdentity> id = FromMap({{"OMPI_COMM_WORLD_RANK", "6"},
                                                 {"OMPI_COMM_WORLD_SIZE", "16"},
                                                 {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                                 {"OMPI_COMM_WORLD_LOCAL_SIZE", "8"},
                                                 {"PMIX_NAMESPACE", "prterun-host-123@1"}});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->rank(), 6);
  EXPECT_EQ(id->world_size(), 16);
  EXPECT_EQ(id->local_rank(), 2);
  EXPECT_EQ(id->local_world_size(), 8);
  EXPECT_EQ(id->job_id(), "prterun-host-123@1");
  EXPECT_EQ(id->launcher(), "mpirun");
  EXPECT_EQ(id->device_index(), 2);
}

std::map<std::string, std::string> SlurmTaskEnv(const std::string& task_pid) {
  return {{"SLURM_PROCID", "9"},       {"SLURM_NTASKS", "12"},   {"SLURM_LOCALID", "1"},
          {"SLURM_NODEID", "4"},       {"SLURM_JOB_ID", "5551"}, {"SLURM_STEP_ID", "2"},
          {"SLURM_TASK_PID", task_pid}};
}

TEST(IdentityTest, SlurmsRankIsReadOnlyInTheTaskSrunStartedOrBelowAShellItRan) {
  // srun python train.py: the task itself.
  ProcessFacts task = kFacts;
  EXPECT_EQ(IdentityFromEnvironment(MapEnvironment(SlurmTaskEnv("4242")), task)->rank(), 9);
  // srun bash -c 'python train.py', srun memtrace run -- python train.py: below the task.
  ProcessFacts below = kFacts;
  below.parent_pid = 1000;
  for (const char* parent : {"bash", "memtrace"}) {
    below.parent_name = parent;
    EXPECT_EQ(IdentityFromEnvironment(MapEnvironment(SlurmTaskEnv("1000")), below)->rank(), 9)
        << parent;
  }
  // Workers a Python launcher spawned, Ray workers under `srun ray start`: they inherit the
  // task's variables, and would all claim its rank (one stream, the rest dropped as resends).
  below.parent_name = "python3";
  absl::StatusOr<v1::RankIdentity> inherited =
      IdentityFromEnvironment(MapEnvironment(SlurmTaskEnv("1000")), below);
  ASSERT_TRUE(inherited.ok()) << inherited.status();
  EXPECT_EQ(inherited->rank(), -1);
  EXPECT_EQ(inherited->launcher(), "env");
  EXPECT_EQ(inherited->job_id(), "5551.2");
  EXPECT_EQ(IdentityFromEnvironment(MapEnvironment(SlurmTaskEnv("77")), kFacts)->rank(), -1);
  std::map<std::string, std::string> no_task = SlurmTaskEnv("");
  EXPECT_EQ(IdentityFromEnvironment(MapEnvironment(no_task), kFacts)->rank(), -1);
}

TEST(IdentityTest, ReadsSlurmVariablesAndSeparatesSteps) {
  absl::StatusOr<v1::RankIdentity> id = FromMap(SlurmTaskEnv("4242"));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->rank(), 9);
  EXPECT_EQ(id->world_size(), 12);
  EXPECT_EQ(id->local_rank(), 1);
  EXPECT_EQ(id->group_rank(), 4);
  EXPECT_EQ(id->job_id(), "5551.2");
  EXPECT_EQ(id->launcher(), "slurm");
}

TEST(IdentityTest, ReadsMpichHydraVariables) {
  absl::StatusOr<v1::RankIdentity> id = FromMap({{"PMI_RANK", "5"},
                                                 {"PMI_SIZE", "8"},
                                                 {"MPI_LOCALRANKID", "1"},
                                                 {"MPI_LOCALNRANKS", "4"},
                                                 {"MEMTRACE_JOB_ID", "hydra"}});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->rank(), 5);
  EXPECT_EQ(id->world_size(), 8);
  EXPECT_EQ(id->local_rank(), 1);
  EXPECT_EQ(id->local_world_size(), 4);
  EXPECT_EQ(id->launcher(), "mpiexec");
  EXPECT_EQ(id->device_index(), 1);
  // Under srun (Slurm's PMI plugin sets PMI_RANK for the task), a process below the task
  // inherited it: not its rank.
  ProcessFacts below = kFacts;
  below.parent_pid = 1000;
  below.parent_name = "python3";
  absl::StatusOr<v1::RankIdentity> inherited =
      IdentityFromEnvironment(MapEnvironment({{"PMI_RANK", "5"},
                                              {"PMI_SIZE", "8"},
                                              {"SLURM_TASK_PID", "1000"},
                                              {"MEMTRACE_JOB_ID", "hydra"}}),
                              below);
  ASSERT_TRUE(inherited.ok()) << inherited.status();
  EXPECT_EQ(inherited->rank(), -1);
  // OMPI's variables win over PMI's (Open MPI under srun may set both).
  EXPECT_EQ(FromMap({{"OMPI_COMM_WORLD_RANK", "2"}, {"PMI_RANK", "5"}, {"MEMTRACE_JOB_ID", "j"}})
                ->launcher(),
            "mpirun");
}

TEST(IdentityTest, GenericRankWithMemtraceJobIdIsLauncherEnv) {
  absl::StatusOr<v1::RankIdentity> id =
      FromMap({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MEMTRACE_JOB_ID", "j"}});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->launcher(), "env");
  EXPECT_EQ(id->rank(), 0);
  EXPECT_EQ(id->device_index(), -1);  // no local rank, no visible-device list
}

TEST(IdentityTest, NoJobIdIsAnErrorNamingEveryVariableLookedFor) {
  absl::StatusOr<v1::RankIdentity> id = FromMap({{"RANK", "0"}});
  ASSERT_FALSE(id.ok());
  for (const char* name : {"MEMTRACE_JOB_ID", "TORCHELASTIC_RUN_ID", "RAY_JOB_ID",
                           "RAY_SUBMISSION_ID", "SLURM_JOB_ID", "PMIX_NAMESPACE"}) {
    EXPECT_NE(id.status().message().find(name), std::string::npos) << name;
  }
}

TEST(IdentityTest, EmptyValuesCountAsUnset) {
  absl::StatusOr<v1::RankIdentity> id =
      FromMap({{"MEMTRACE_JOB_ID", "j"}, {"RANK", ""}, {"WORLD_SIZE", ""}});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->rank(), -1);
  ExpectInvalid(FromMap({{"MEMTRACE_JOB_ID", ""}}), "no job id");
}

TEST(IdentityTest, RejectsNonIntegerRank) {
  ExpectInvalid(FromMap({{"MEMTRACE_JOB_ID", "j"}, {"RANK", "abc"}}), "RANK='abc'");
}

TEST(IdentityTest, RejectsNegativeRank) {
  ExpectInvalid(FromMap({{"MEMTRACE_JOB_ID", "j"}, {"RANK", "-1"}}), "RANK='-1'");
}

TEST(IdentityTest, RejectsRankAtOrAboveWorldSize) {
  ExpectInvalid(FromMap({{"MEMTRACE_JOB_ID", "j"}, {"RANK", "8"}, {"WORLD_SIZE", "8"}}),
                "RANK='8' is out of range: WORLD_SIZE is 8");
}

TEST(IdentityTest, RejectsLocalRankAtOrAboveLocalWorldSize) {
  ExpectInvalid(FromMap({{"MEMTRACE_JOB_ID", "j"},
                         {"RANK", "1"},
                         {"LOCAL_RANK", "4"},
                         {"LOCAL_WORLD_SIZE", "4"}}),
                "LOCAL_RANK='4' is out of range: LOCAL_WORLD_SIZE is 4");
}

TEST(IdentityTest, RejectsZeroWorldSizeAndBadAttemptAndBadDevice) {
  ExpectInvalid(FromMap({{"MEMTRACE_JOB_ID", "j"}, {"RANK", "0"}, {"WORLD_SIZE", "0"}}),
                "WORLD_SIZE='0'");
  ExpectInvalid(FromMap({{"MEMTRACE_JOB_ID", "j"}, {"TORCHELASTIC_RESTART_COUNT", "x"}}),
                "TORCHELASTIC_RESTART_COUNT='x'");
  ExpectInvalid(FromMap({{"MEMTRACE_JOB_ID", "j"}, {"MEMTRACE_DEVICE", "-2"}}),
                "MEMTRACE_DEVICE='-2'");
  ExpectInvalid(FromMap({{"OMPI_COMM_WORLD_RANK", "x1"}, {"MEMTRACE_JOB_ID", "j"}}),
                "OMPI_COMM_WORLD_RANK='x1'");
}

TEST(IdentityTest, DeviceRuleExplicitThenSingleVisibleThenLocalRank) {
  auto env = TorchrunEnv();  // LOCAL_RANK 1
  env["MEMTRACE_DEVICE"] = "3";
  env["CUDA_VISIBLE_DEVICES"] = "7";
  EXPECT_EQ(FromMap(env)->device_index(), 3);
  env.erase("MEMTRACE_DEVICE");
  EXPECT_EQ(FromMap(env)->device_index(), 0);
  env["CUDA_VISIBLE_DEVICES"] = "4,5,6,7";
  EXPECT_EQ(FromMap(env)->device_index(), 1);
  env["CUDA_VISIBLE_DEVICES"] = "";
  EXPECT_EQ(FromMap(env)->device_index(), -1);  // no device visible at all
  env["CUDA_VISIBLE_DEVICES"] = "0,-1,2";       // CUDA stops at the first negative entry
  EXPECT_EQ(FromMap(env)->device_index(), 0);
  env["LOCAL_RANK"] = "3";
  env["CUDA_VISIBLE_DEVICES"] = "0,1";
  EXPECT_EQ(FromMap(env)->device_index(), -1);  // local rank beyond the visible list
}

TEST(IdentityTest, CurrentProcessFactsNamesThisProcess) {
  ProcessFacts facts = CurrentProcessFacts();
  EXPECT_FALSE(facts.host.empty());
  EXPECT_EQ(facts.pid, static_cast<uint32_t>(getpid()));
  // The start: a time, and the same on every call (it names the process, not the call).
  EXPECT_GT(facts.start_ns, 1'600'000'000'000'000'000u);
  absl::SleepFor(absl::Milliseconds(2));
  EXPECT_EQ(CurrentProcessFacts().start_ns, facts.start_ns);
}

// The ancestors from /proc: a child's first is this process, with this process's own start,
// its second this one's parent.
TEST(IdentityTest, CurrentProcessFactsListsTheAncestorsFromProc) {
  const uint32_t self = static_cast<uint32_t>(getpid());
  const uint32_t parent = static_cast<uint32_t>(getppid());
  const ProcessFacts mine = CurrentProcessFacts();
  ASSERT_GT(mine.start_ticks, 0u);
  ASSERT_FALSE(mine.boot_id.empty());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const ProcessFacts facts = CurrentProcessFacts();
    const std::vector<uint32_t>& a = facts.ancestor_pids;
    const std::vector<uint64_t>& t = facts.ancestor_start_ticks;
    const bool ok = a.size() >= 2 && a.size() <= 8 && a[0] == self && a[1] == parent &&
                    (a.back() == 1 || a.size() == 8) && t.size() == a.size() &&
                    t[0] == mine.start_ticks && facts.start_ticks >= mine.start_ticks &&
                    facts.boot_id == mine.boot_id;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child's ancestors did not start with this process (" << self << ") and its parent ("
      << parent << ")";
}

}  // namespace
}  // namespace memtrace
