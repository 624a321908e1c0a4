#include "tools/launch/launch_paths.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"

namespace memtrace::launch {
namespace {

class LaunchPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test_util::UniqueDir("paths");
    ASSERT_FALSE(root_.empty());
  }
  std::string Make(const std::string& relative) {
    std::string path = root_ + "/" + relative;
    for (size_t i = root_.size() + 1; i < path.size(); ++i) {
      if (path[i] == '/') mkdir(path.substr(0, i).c_str(), 0755);
    }
    std::ofstream(path) << "x";
    return path;
  }
  std::string root_;
};

TEST_F(LaunchPathsTest, FindsAgentInBazelOutputTreeBesideTheCli) {
  std::string exe = Make("bin/query/cli/memtrace");
  std::string agent = Make("bin/agent/libmemtrace_agent.so");
  absl::StatusOr<std::string> found = FindAgentLibrary("", MapEnvironment({}), exe);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, agent);
}

TEST_F(LaunchPathsTest, PrefersInstallLayoutLibDirOverBazelLayout) {
  std::string exe = Make("prefix/bin/memtrace");
  std::string agent = Make("prefix/lib/libmemtrace_agent.so");
  absl::StatusOr<std::string> found = FindAgentLibrary("", MapEnvironment({}), exe);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, agent);
}

TEST_F(LaunchPathsTest, FlagWinsOverEnvironmentAndEnvironmentOverLayout) {
  std::string exe = Make("bin/memtrace");
  Make("bin/libmemtrace_agent.so");
  std::string from_env = Make("env/libmemtrace_agent.so");
  std::string from_flag = Make("flag/libmemtrace_agent.so");
  EnvLookup env = MapEnvironment({{"MEMTRACE_AGENT_LIB", from_env}});
  EXPECT_EQ(*FindAgentLibrary(from_flag, env, exe), from_flag);
  EXPECT_EQ(*FindAgentLibrary("", env, exe), from_env);
}

TEST_F(LaunchPathsTest, MissingExplicitPathIsAnErrorNamingItNotAFallback) {
  std::string exe = Make("bin/memtrace");
  Make("bin/libmemtrace_agent.so");
  EnvLookup env = MapEnvironment({{"MEMTRACE_AGENT_LIB", root_ + "/nope.so"}});
  absl::StatusOr<std::string> found = FindAgentLibrary("", env, exe);
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(found.status().message().find("nope.so"), std::string::npos);
  EXPECT_NE(found.status().message().find("MEMTRACE_AGENT_LIB"), std::string::npos);
}

TEST_F(LaunchPathsTest, NothingFoundListsEveryPlaceLookedAt) {
  std::string exe = Make("bin/memtrace");
  absl::StatusOr<std::string> found = FindAgentLibrary("", MapEnvironment({}), exe);
  ASSERT_FALSE(found.ok());
  for (const std::string& candidate : CandidatePaths(exe, kAgentLibraryName, "agent")) {
    EXPECT_NE(found.status().message().find(candidate), std::string::npos) << candidate;
  }
}

TEST_F(LaunchPathsTest, RelativePathsBecomeAbsolute) {
  std::string agent = Make("rel/libmemtrace_agent.so");
  ASSERT_EQ(chdir(root_.c_str()), 0);
  absl::StatusOr<std::string> found =
      FindAgentLibrary("rel/libmemtrace_agent.so", MapEnvironment({}), "");
  ASSERT_TRUE(found.ok()) << found.status();
  char real[4096];
  ASSERT_NE(realpath(agent.c_str(), real), nullptr);
  EXPECT_EQ(*found, real);
}

TEST_F(LaunchPathsTest, NvtxLibraryDefaultsToTheAgentAndHonoursOverrides) {
  std::string nvtx = Make("cupti/libcupti.so.13");
  EXPECT_EQ(*NvtxLibrary("", MapEnvironment({}), "/x/libmemtrace_agent.so"),
            "/x/libmemtrace_agent.so");
  EXPECT_EQ(*NvtxLibrary("", MapEnvironment({{"MEMTRACE_NVTX_LIB", nvtx}}), "/x/agent.so"), nvtx);
  EXPECT_FALSE(NvtxLibrary(root_ + "/missing.so", MapEnvironment({}), "/x/agent.so").ok());
}

TEST_F(LaunchPathsTest, FindsCollectorBinaryBesideAnInstalledCli) {
  std::string exe = Make("bin/memtrace");
  std::string collector = Make("bin/memtrace-collector");
  EXPECT_EQ(*FindCollectorBinary(MapEnvironment({}), exe), collector);
}

TEST(CurrentExecutablePathTest, NamesThisTestBinary) {
  EXPECT_NE(CurrentExecutablePath().find("launch_paths_test"), std::string::npos);
}

}  // namespace
}  // namespace memtrace::launch
