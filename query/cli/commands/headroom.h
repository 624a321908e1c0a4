// `memtrace headroom --job J [--capacity BYTES]`: when each rank reaches its device's capacity
// at its floor's current trend (Analysis/Headroom).
#ifndef MEMTRACE_QUERY_CLI_COMMANDS_HEADROOM_H_
#define MEMTRACE_QUERY_CLI_COMMANDS_HEADROOM_H_

#include "query/cli/command.h"

namespace memtrace::cli {

Command HeadroomCommand();

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_COMMANDS_HEADROOM_H_
