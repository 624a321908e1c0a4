// `memtrace jobs`: the jobs the collector has stored.
#ifndef MEMTRACE_QUERY_CLI_COMMANDS_JOBS_H_
#define MEMTRACE_QUERY_CLI_COMMANDS_JOBS_H_

#include "proto/memtrace/v1/query.pb.h"
#include "query/cli/command.h"
#include "query/cli/output.h"

namespace memtrace::cli {

Command JobsCommand();

// One row per job: id, ranks, events, first/last event time and the span between them.
Table JobsTable(const v1::ListJobsResponse& response);

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_COMMANDS_JOBS_H_
