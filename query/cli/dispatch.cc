#include "query/cli/dispatch.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

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
                  "defaults, e.g. the analyses: table|json, 30s; import/export/run have their "
                  "own --format\nand flags):\n",
                  common.Describe(),
                  "\nRun 'memtrace help COMMAND' for a command's own flags.\nErrors print one line "
                  "on stderr; exit code 1 for a failed request, 2 for a "
                  "bad command line.\n");
  return out;
}

int RunCli(absl::Span<const Command> commands, const std::vector<std::string>& args,
           CommandIo& io) {
  std::vector<std::string> leading;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      io.out << TopLevelHelp(commands, io);
      return kExitOk;
    }
    if (IsCommonFlagInline(arg)) {
      leading.push_back(arg);
    } else if (IsCommonFlagWithValue(arg)) {
      leading.push_back(arg);
      if (i + 1 < args.size()) leading.push_back(args[++i]);
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
    if (rest.empty()) {
      io.out << TopLevelHelp(commands, io);
      return kExitOk;
    }
    const Command* command = FindCommand(commands, rest.front());
    if (command == nullptr) return ReportError(io, UnknownCommand(rest.front()));
    return command->run({"--help"}, io);
  }
  const Command* command = FindCommand(commands, name);
  if (command == nullptr) return ReportError(io, UnknownCommand(name));
  // Leading common flags go first so that the same flag after the command name wins.
  leading.insert(leading.end(), rest.begin(), rest.end());
  return command->run(leading, io);
}

}  // namespace memtrace::cli
