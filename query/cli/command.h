// What a `memtrace` subcommand is, and the pieces every subcommand shares: the common flags
// (--collector, --format, --timeout), help printing and one-line error reporting.
//
// To add a subcommand: write query/cli/commands/<name>.{h,cc} exposing `Command <Name>Command()`
// (jobs.cc is the smallest example), give it a cc_library in query/cli/commands/BUILD.bazel, and
// add it to the table in query/cli/main.cc and to the binary's deps. Nothing else changes.
#ifndef MEMTRACE_QUERY_CLI_COMMAND_H_
#define MEMTRACE_QUERY_CLI_COMMAND_H_

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "query/cli/flags.h"
#include "query/cli/output.h"

namespace memtrace::cli {

// Process exit codes of the CLI.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;  // the request failed (collector down, unknown job, ...)
inline constexpr int kExitUsage = 2;  // bad command line (unknown command, flag or value)

inline constexpr char kDefaultCollector[] = "127.0.0.1:7431";

// The process environment a command runs in; tests make their own.
struct CommandIo {
  std::ostream& out;
  std::ostream& err;
  // --collector's default: $MEMTRACE_COLLECTOR when set, else kDefaultCollector.
  std::string default_collector = kDefaultCollector;
  // "Now" for relative times such as --from now-15m.
  absl::Time now = absl::Now();
};

struct Command {
  std::string name;
  std::string summary;  // one line, shown in `memtrace --help`
  // Synopsis and description shown by `memtrace help NAME` above the list of flags, e.g.
  // "memtrace ranks --job JOB\n\nOne row per rank of the job...".
  std::string usage;
  // Runs the command on the arguments after its name; returns an exit code. Must handle
  // --help (see ParseCommandLine) and report errors through ReportError.
  std::function<int(const std::vector<std::string>& args, CommandIo& io)> run;
};

// The flags every command accepts.
struct CommonOptions {
  std::string collector;
  OutputFormat format = OutputFormat::kTable;
  absl::Duration timeout = absl::Seconds(10);
};

// Registers --collector (default io.default_collector), --format and --timeout on `flags`.
void AddCommonFlags(const CommandIo& io, FlagSet& flags, CommonOptions* options);

// Parses a command's arguments. Returns an exit code when the command must stop here: kExitOk
// after printing help (usage, then the flags) to io.out, kExitUsage after reporting a bad flag
// or an unexpected positional argument. Returns nullopt when the command should go on.
std::optional<int> ParseCommandLine(const Command& command, const FlagSet& flags,
                                    const std::vector<std::string>& args, CommandIo& io);

// Prints "memtrace: <message>" (or "memtrace <command>: <message>" when `command` is not
// empty) as one line on io.err, newlines in the message folded into spaces. Returns
// kExitUsage for INVALID_ARGUMENT, kExitError otherwise.
int ReportError(CommandIo& io, const absl::Status& status, const std::string& command = "");

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_COMMAND_H_
