// `memtrace run [flags] -- CMD ARGS...`: runs a job with the agent injected into every CUDA
// process it starts, recording to a collector (a local one started for the run when none is
// given), and returns the job's own exit code.
#ifndef MEMTRACE_TOOLS_LAUNCH_RUN_COMMAND_H_
#define MEMTRACE_TOOLS_LAUNCH_RUN_COMMAND_H_

#include "query/cli/command.h"

namespace memtrace::launch {

cli::Command RunCommand();

}  // namespace memtrace::launch

#endif  // MEMTRACE_TOOLS_LAUNCH_RUN_COMMAND_H_
