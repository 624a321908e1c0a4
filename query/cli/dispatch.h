// The `memtrace` entry point: picks a command from the table by name and runs it, and answers
// `memtrace --help`, `memtrace help` and `memtrace help COMMAND` from the same table.
#ifndef MEMTRACE_QUERY_CLI_DISPATCH_H_
#define MEMTRACE_QUERY_CLI_DISPATCH_H_

#include <string>
#include <vector>

#include "absl/types/span.h"
#include "query/cli/command.h"

namespace memtrace::cli {

// Runs `args` (argv without the program name) against `commands`; returns the exit code.
// Common flags given before the command name ("memtrace --collector H:P jobs") are passed on
// to the command. Unknown commands and a missing command are usage errors (kExitUsage).
int RunCli(absl::Span<const Command> commands, const std::vector<std::string>& args, CommandIo& io);

// The text of `memtrace --help`: commands with their summaries, then the common flags.
std::string TopLevelHelp(absl::Span<const Command> commands, const CommandIo& io);

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_DISPATCH_H_
