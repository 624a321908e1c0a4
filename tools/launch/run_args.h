// Splitting `memtrace run`'s arguments into its own flags and the command to run.
#ifndef MEMTRACE_TOOLS_LAUNCH_RUN_ARGS_H_
#define MEMTRACE_TOOLS_LAUNCH_RUN_ARGS_H_

#include <set>
#include <string>
#include <vector>

namespace memtrace::launch {

struct SplitArguments {
  std::vector<std::string> flags;    // memtrace's own, '-' in flag names turned into '_'
  std::vector<std::string> command;  // the command and its arguments, untouched
};

// The command starts after the first "--", or, without one, at the first argument that is
// neither a flag nor the value of one of `flags_with_values` ("--job NAME"). So both
// `memtrace run --job x -- torchrun --nproc_per_node 4 train.py` and
// `memtrace run --job x torchrun --nproc_per_node 4 train.py` work; torchrun's flags are never
// taken for memtrace's. "--no-agent" is accepted for "--no_agent" (memtrace's flags use '_').
SplitArguments SplitRunArguments(const std::vector<std::string>& args,
                                 const std::set<std::string>& flags_with_values);

}  // namespace memtrace::launch

#endif  // MEMTRACE_TOOLS_LAUNCH_RUN_ARGS_H_
