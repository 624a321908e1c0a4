// `memtrace diverged --job J`: the earliest rank whose memory left the cohort, at which step, by
// how much, and the ranks that followed (Analysis/Diverged).
#ifndef MEMTRACE_QUERY_CLI_COMMANDS_DIVERGED_H_
#define MEMTRACE_QUERY_CLI_COMMANDS_DIVERGED_H_

#include "query/cli/command.h"

namespace memtrace::cli {

Command DivergedCommand();

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_COMMANDS_DIVERGED_H_
