#include "query/cli/dispatch.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace memtrace::cli {
namespace {

const Command* FindCommand(absl::Span<const Command> commands, absl::string_view name) {
  for (const Command& command : commands) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

absl::Status UnknownCommand(absl::string_view name) {
  return absl::InvalidArgumentError(
      absl::StrCat("unknown command '", name, "' (run 'memtrace --help' for the list)"));
}

// The flag names AddCommonFlags registers, which may also come before the command name.
bool IsCommonFlagWithValue(absl::string_view arg) {
  for (absl::string_view name : {"--collector", "--format", "--timeout"}) {
    if (arg == name) return true;
  }
  return false;
}

bool IsCommonFlagInline(absl::string_view arg) {
  for (absl::string_view name : {"--collector=", "--format=", "--timeout="}) {
    if (absl::StartsWith(arg, name)) return true;
  }
  return false;
}

// Whether a command's own arguments set --`name` (as -name or --name, with or without =value)
// before any "--".
bool SetsFlag(const std::vector<std::string>& args, absl::string_view name) {
  for (absl::string_view arg : args) {
    if (arg == "--") return false;
    if (!absl::ConsumePrefix(&arg, "--")) absl::ConsumePrefix(&arg, "-");
    if (arg == name || absl::StartsWith(arg, absl::StrCat(name, "="))) return true;
  }
  return false;
}

}  // namespace

std::string TopLevelHelp(absl::Span<const Command> commands, const CommandIo& io) {
  size_t width = 4;  // "help"
  for (const Command& command : commands) width = std::max(width, command.name.size());
  std::string out =
      "memtrace: cluster-wide GPU memory tracing of training jobs (queries go to a collector)\n"
      "\n"
      "Usage: memtrace [common flags] COMMAND [flags]\n"
      "\n"
      "Commands:\n";
  auto line = [&](absl::string_view name, absl::string_view summary) {
    absl::StrAppend(&out, "  ", name, std::string(width - name.size() + 3, ' '), summary, "\n");
  };
  for (const Command& command : commands) line(command.name, command.summary);
  line("help", "show a command's usage and flags: memtrace help COMMAND");
  FlagSet common;
  CommonOptions unused;
  AddCommonFlags(io, common, &unused);
  absl::StrAppend(&out,
                  "\nCommon flags (the query commands; some take a subset or other\n"
                  "defaults, e.g. the analyses: table|json, 30s; import and export have their "
                  "own --format,\nrun, ray-env and plot flags of their own):\n",
                  common.Describe(),
                  "\nRun 'memtrace help COMMAND' for a command's own flags.\nErrors print one line "
                  "on stderr; exit code 1 for a failed request, 2 for a "
                  "bad command line.\n");
  return out;
}

int RunCli(absl::Span<const Command> commands, const std::vector<std::string>& args,
           CommandIo& io) {
  // Each common flag before the command name: its name and its words ("--collector", "h:1").
  std::vector<std::pair<std::string, std::vector<std::string>>> leading;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      io.out << TopLevelHelp(commands, io);
      return kExitOk;
    }
    if (IsCommonFlagInline(arg)) {
      leading.push_back({arg.substr(2, arg.find('=') - 2), {arg}});
    } else if (IsCommonFlagWithValue(arg)) {
      leading.push_back({arg.substr(2), {arg}});
      if (i + 1 < args.size()) leading.back().second.push_back(args[++i]);
    } else if (absl::StartsWith(arg, "-")) {
      return ReportError(io,
                         absl::InvalidArgumentError(absl::StrCat(
                             "unknown flag ", arg, " before the command (run 'memtrace --help')")));
    } else {
      break;
    }
  }
  if (i == args.size()) {
    ReportError(io, absl::InvalidArgumentError("no command given (run 'memtrace --help')"));
    return kExitUsage;
  }
  const std::string& name = args[i];
  std::vector<std::string> rest(args.begin() + i + 1, args.end());
  if (name == "help") {
    // "help --help" as every other command takes it.
    if (rest.empty() || rest.front() == "help" || rest.front() == "--help" ||
        rest.front() == "-h") {
      io.out << TopLevelHelp(commands, io);
      return kExitOk;
    }
    const Command* command = FindCommand(commands, rest.front());
    if (command == nullptr) return ReportError(io, UnknownCommand(rest.front()));
    return command->run({"--help"}, io);
  }
  const Command* command = FindCommand(commands, name);
  if (command == nullptr) return ReportError(io, UnknownCommand(name));
  // Leading common flags go first, less those the command's own arguments set again: the one
  // after the command name wins ("memtrace --collector a:1 jobs --collector b:2"), where a flag
  // given twice would be a usage error.
  std::vector<std::string> command_args;
  for (const auto& [flag, words] : leading) {
    if (!SetsFlag(rest, flag)) command_args.insert(command_args.end(), words.begin(), words.end());
  }
  command_args.insert(command_args.end(), rest.begin(), rest.end());
  return command->run(command_args, io);
}

}  // namespace memtrace::cli
