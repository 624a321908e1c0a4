// `memtrace ranks --job J`: each rank's identity, how much of it is stored and the agent's
// health counters.
#ifndef MEMTRACE_QUERY_CLI_COMMANDS_RANKS_H_
#define MEMTRACE_QUERY_CLI_COMMANDS_RANKS_H_

#include "proto/memtrace/v1/query.pb.h"
#include "query/cli/command.h"
#include "query/cli/output.h"

namespace memtrace::cli {

Command RanksCommand();

// One row per rank. `detailed` adds the identity fields too wide for a terminal table
// (world size, pid, device, launcher, first/last event time); json and csv use it.
Table RanksTable(const v1::ListRanksResponse& response, bool detailed);

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_COMMANDS_RANKS_H_
