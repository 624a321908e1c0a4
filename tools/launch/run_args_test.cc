#include "tools/launch/run_args.h"

#include "gtest/gtest.h"

namespace memtrace::launch {
namespace {

using Args = std::vector<std::string>;
const std::set<std::string> kWithValues = {"collector", "job"};

TEST(SplitRunArgumentsTest, DoubleDashSeparatesOurFlagsFromTheCommand) {
  SplitArguments s = SplitRunArguments(
      {"--job", "x", "--", "torchrun", "--nproc_per_node", "4", "--", "a"}, kWithValues);
  EXPECT_EQ(s.flags, (Args{"--job", "x"}));
  EXPECT_EQ(s.command, (Args{"torchrun", "--nproc_per_node", "4", "--", "a"}));
}

TEST(SplitRunArgumentsTest, WithoutDoubleDashTheFirstNonFlagStartsTheCommand) {
  SplitArguments s = SplitRunArguments(
      {"--collector", "h:1", "--no_agent", "--job=j", "torchrun", "--standalone"}, kWithValues);
  EXPECT_EQ(s.flags, (Args{"--collector", "h:1", "--no_agent", "--job=j"}));
  EXPECT_EQ(s.command, (Args{"torchrun", "--standalone"}));
}

TEST(SplitRunArgumentsTest, DashesInOurFlagNamesBecomeUnderscoresValuesUntouched) {
  SplitArguments s =
      SplitRunArguments({"--no-agent", "--agent-lib=/a-b/c", "--", "x-y"}, kWithValues);
  EXPECT_EQ(s.flags, (Args{"--no_agent", "--agent_lib=/a-b/c"}));
  EXPECT_EQ(s.command, (Args{"x-y"}));
}

TEST(SplitRunArgumentsTest, NoCommandAndHelp) {
  EXPECT_TRUE(SplitRunArguments({"--job", "x"}, kWithValues).command.empty());
  SplitArguments help = SplitRunArguments({"--help"}, kWithValues);
  EXPECT_EQ(help.flags, (Args{"--help"}));
  EXPECT_TRUE(help.command.empty());
}

}  // namespace
}  // namespace memtrace::launch
