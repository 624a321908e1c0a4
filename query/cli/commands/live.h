// `memtrace live --job J --rank R (--at T | --at-step S | --at-oom)`: what was live on a rank
// at a moment, next to the other ranks at the same moment (Analysis/Live).
#ifndef MEMTRACE_QUERY_CLI_COMMANDS_LIVE_H_
#define MEMTRACE_QUERY_CLI_COMMANDS_LIVE_H_

#include "query/cli/command.h"

namespace memtrace::cli {

Command LiveCommand();

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_COMMANDS_LIVE_H_
