// `memtrace growth --job J [--by ...]`: which tag, source or rank grows, how fast, and on
// which ranks (Analysis/Growth).
#ifndef MEMTRACE_QUERY_CLI_COMMANDS_GROWTH_H_
#define MEMTRACE_QUERY_CLI_COMMANDS_GROWTH_H_

#include "query/cli/command.h"

namespace memtrace::cli {

Command GrowthCommand();

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_COMMANDS_GROWTH_H_
