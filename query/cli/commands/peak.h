// `memtrace peak --job J --by phase|tag|source|rank`: the peak of each group on each rank
// (Analysis/Peak).
#ifndef MEMTRACE_QUERY_CLI_COMMANDS_PEAK_H_
#define MEMTRACE_QUERY_CLI_COMMANDS_PEAK_H_

#include "query/cli/command.h"

namespace memtrace::cli {

Command PeakCommand();

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_COMMANDS_PEAK_H_
