// `memtrace compare --job A --job B`: the analyses of two jobs side by side and what changed
// (Analysis/Compare).
#ifndef MEMTRACE_QUERY_CLI_COMMANDS_COMPARE_H_
#define MEMTRACE_QUERY_CLI_COMMANDS_COMPARE_H_

#include "query/cli/command.h"

namespace memtrace::cli {

Command CompareCommand();

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_COMMANDS_COMPARE_H_
