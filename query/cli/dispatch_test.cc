#include "query/cli/dispatch.h"

#include <sstream>

#include "gtest/gtest.h"

namespace memtrace::cli {
namespace {

// A command that records the arguments it got and handles --help like the real ones.
struct Recorder {
  std::vector<std::vector<std::string>> calls;
};

Command RecordingCommand(std::string name, Recorder* recorder) {
  Command command{name, "summary of " + name, "Usage: memtrace " + name, nullptr};
  command.run = [recorder, self = command](const std::vector<std::string>& args, CommandIo& io) {
    recorder->calls.push_back(args);
    FlagSet flags;
    CommonOptions common;
    AddCommonFlags(io, flags, &common);
    if (std::optional<int> exit = ParseCommandLine(self, flags, args, io)) return *exit;
    io.out << "ran " << self.name << " against " << common.collector << "\n";
    return kExitOk;
  };
  return command;
}

class DispatchTest : public ::testing::Test {
 protected:
  int Run(std::vector<std::string> args) {
    out_.str("");
    err_.str("");
    CommandIo io{out_, err_, "10.0.0.1:7431"};
    return RunCli(commands_, args, io);
  }

  Recorder recorder_;
  std::vector<Command> commands_ = {RecordingCommand("jobs", &recorder_),
                                    RecordingCommand("ranks", &recorder_)};
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(DispatchTest, RunsTheNamedCommandWithTheRestOfTheArguments) {
  EXPECT_EQ(Run({"ranks", "--collector", "h:1"}), kExitOk);
  ASSERT_EQ(recorder_.calls.size(), 1u);
  EXPECT_EQ(recorder_.calls[0], (std::vector<std::string>{"--collector", "h:1"}));
  EXPECT_EQ(out_.str(), "ran ranks against h:1\n");
  EXPECT_EQ(err_.str(), "");
}

TEST_F(DispatchTest, PassesCommonFlagsGivenBeforeTheCommandAndLetsLaterOnesWin) {
  EXPECT_EQ(Run({"--collector", "a:1", "--format=json", "jobs"}), kExitOk);
  EXPECT_EQ(out_.str(), "ran jobs against a:1\n");
  EXPECT_EQ(Run({"--collector", "a:1", "jobs", "--collector", "b:2"}), kExitOk);
  EXPECT_EQ(out_.str(), "ran jobs against b:2\n");
  EXPECT_EQ(Run({"--collector=a:1", "--format", "json", "jobs", "-collector=b:2"}), kExitOk);
  EXPECT_EQ(out_.str(), "ran jobs against b:2\n");
  EXPECT_EQ(recorder_.calls.back(),
            (std::vector<std::string>{"--format", "json", "-collector=b:2"}));
}

TEST_F(DispatchTest, ACommonFlagGivenTwiceBeforeTheCommandIsAUsageError) {
  EXPECT_EQ(Run({"--collector", "a:1", "--collector", "b:2", "jobs"}), kExitUsage);
  EXPECT_EQ(err_.str(), "memtrace jobs: --collector given more than once (it takes one value)\n");
}

TEST_F(DispatchTest, UsesTheDefaultCollectorFromTheEnvironment) {
  EXPECT_EQ(Run({"jobs"}), kExitOk);
  EXPECT_EQ(out_.str(), "ran jobs against 10.0.0.1:7431\n");
}

TEST_F(DispatchTest, TopLevelHelpListsEveryCommandAndTheCommonFlags) {
  for (std::vector<std::string> args : {std::vector<std::string>{"--help"},
                                        {"-h"},
                                        {"help"},
                                        {"help", "help"},
                                        {"help", "--help"},
                                        {"help", "-h"}}) {
    EXPECT_EQ(Run(args), kExitOk);
    const std::string help = out_.str();
    EXPECT_NE(help.find("  jobs    summary of jobs\n"), std::string::npos) << help;
    EXPECT_NE(help.find("  ranks   summary of ranks\n"), std::string::npos) << help;
    EXPECT_NE(help.find("  help    "), std::string::npos) << help;
    EXPECT_NE(help.find("--collector ADDR"), std::string::npos) << help;
    EXPECT_NE(help.find("now 10.0.0.1:7431"), std::string::npos) << help;
    EXPECT_NE(help.find("--format table|json|csv"), std::string::npos) << help;
    EXPECT_TRUE(recorder_.calls.empty());
  }
}

TEST_F(DispatchTest, HelpForACommandPrintsItsUsageAndFlags) {
  EXPECT_EQ(Run({"help", "ranks"}), kExitOk);
  EXPECT_EQ(out_.str().rfind("Usage: memtrace ranks\n\nFlags:\n  --collector ADDR", 0), 0u)
      << out_.str();
  EXPECT_EQ(Run({"jobs", "--help"}), kExitOk);
  EXPECT_EQ(out_.str().rfind("Usage: memtrace jobs\n", 0), 0u);
}

TEST_F(DispatchTest, UnknownCommandIsAOneLineUsageError) {
  EXPECT_EQ(Run({"frob", "--x"}), kExitUsage);
  EXPECT_EQ(err_.str(), "memtrace: unknown command 'frob' (run 'memtrace --help' for the list)\n");
  EXPECT_EQ(Run({"help", "frob"}), kExitUsage);
  EXPECT_EQ(err_.str(), "memtrace: unknown command 'frob' (run 'memtrace --help' for the list)\n");
  EXPECT_TRUE(recorder_.calls.empty());
}

TEST_F(DispatchTest, MissingCommandAndUnknownLeadingFlagAreUsageErrors) {
  EXPECT_EQ(Run({}), kExitUsage);
  EXPECT_EQ(err_.str(), "memtrace: no command given (run 'memtrace --help')\n");
  EXPECT_EQ(Run({"--collector", "a:1"}), kExitUsage);
  EXPECT_EQ(Run({"--verbose", "jobs"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "memtrace: unknown flag --verbose before the command (run 'memtrace --help')\n");
}

TEST_F(DispatchTest, BadFlagOfACommandIsReportedByTheCommandOnOneLine) {
  EXPECT_EQ(Run({"jobs", "--format", "yaml"}), kExitUsage);
  EXPECT_EQ(err_.str(), "memtrace jobs: --format: 'yaml' is not one of table, json, csv\n");
  EXPECT_EQ(out_.str(), "");
}

}  // namespace
}  // namespace memtrace::cli
