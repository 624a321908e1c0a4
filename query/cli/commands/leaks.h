// `memtrace leaks --job J [--rank R]`: plateau / spikes / leak per rank, the live allocations
// that look leaked, and memory that outlives its phase (Analysis/Leaks).
#ifndef MEMTRACE_QUERY_CLI_COMMANDS_LEAKS_H_
#define MEMTRACE_QUERY_CLI_COMMANDS_LEAKS_H_

#include "query/cli/command.h"

namespace memtrace::cli {

Command LeaksCommand();

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_COMMANDS_LEAKS_H_
