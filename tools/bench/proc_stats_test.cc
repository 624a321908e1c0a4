#include "tools/bench/proc_stats.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "query/cli/text_escape.h"
#include "tests/util/test_dirs.h"

namespace memtrace::bench {
namespace {

TEST(ProcStatsTest, ResidentMemoryGrowsWhenPagesAreTouched) {
  const uint64_t before = ResidentBytes();
  ASSERT_GT(before, 0u);
  std::vector<char> block(64 << 20, 1);  // value-initialized: every page written
  const uint64_t after = ResidentBytes();
  EXPECT_GE(after, before + (48u << 20));
  EXPECT_GE(PeakResidentBytes(), after);
  EXPECT_GT(AnonResidentBytes(), 48u << 20);
  EXPECT_EQ(block[12345], 1);
}

TEST(ProcStatsTest, CpuTimeAdvancesWithWork) {
  const double before = ProcessCpuSeconds();
  volatile uint64_t x = 0;
  for (uint64_t i = 0; i < 200'000'000; ++i) x += i;
  EXPECT_GT(ProcessCpuSeconds(), before);
}

TEST(ProcStatsTest, DirectoryBytesSumsFilesRecursively) {
  const std::string dir = test_util::TmpPath("sizes");
  std::filesystem::create_directories(dir + "/sub");
  std::ofstream(dir + "/a") << std::string(1000, 'a');
  std::ofstream(dir + "/sub/b") << std::string(234, 'b');
  EXPECT_EQ(DirectoryBytes(dir), 1234u);
  EXPECT_EQ(DirectoryBytes(dir + "/missing"), 0u);
}

TEST(ProcStatsTest, CommandOutputAndExitCodeAreCaptured) {
  absl::StatusOr<CommandResult> r =
      RunCommand("echo out; echo err 1>&2; exit 3", absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_NE(r->output.find("out"), std::string::npos);
  EXPECT_NE(r->output.find("err"), std::string::npos);
  EXPECT_FALSE(r->timed_out);
}

TEST(ProcStatsTest, CommandPastItsTimeoutIsKilled) {
  absl::StatusOr<CommandResult> r = RunCommand("sleep 30", absl::Milliseconds(300));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_LT(r->seconds, 5);
}

TEST(ProcStatsTest, AShellWordReachesTheCommandAsGiven) {
  absl::StatusOr<CommandResult> r =
      RunCommand("printf %s " + cli::ShellWord("it's a \"test\" $HOME"), absl::Seconds(10));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->output, "it's a \"test\" $HOME");
}

TEST(ProcStatsTest, MachineDescriptionNamesCores) {
  EXPECT_NE(MachineDescription().find(" x "), std::string::npos);
}

}  // namespace
}  // namespace memtrace::bench
