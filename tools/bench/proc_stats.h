// What the benchmarks read about this process and the machine: resident memory, CPU time, bytes
// under a directory, and a shell command's output (db_bench, node, sqlite3, npm).
#ifndef MEMTRACE_TOOLS_BENCH_PROC_STATS_H_
#define MEMTRACE_TOOLS_BENCH_PROC_STATS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace memtrace::bench {

// Resident set size now and its peak (VmRSS / VmHWM of /proc/self/status); 0 when unreadable.
uint64_t ResidentBytes();
uint64_t PeakResidentBytes();
// Anonymous resident memory (RssAnon: heap, stacks, not mapped library pages); 0 when unreadable.
uint64_t AnonResidentBytes();

// User + system CPU seconds this process has used (all threads).
double ProcessCpuSeconds();
// The same per thread name (/proc/self/task/*/stat, clock-tick resolution), summed over the
// threads alive now that share a name.
std::map<std::string, double> CpuSecondsByThreadName();

// Sum of the sizes of the regular files under `dir` (recursively); 0 when it does not exist.
uint64_t DirectoryBytes(const std::string& dir);

// One line describing the CPU model, core count and memory, from /proc.
std::string MachineDescription();

struct CommandResult {
  int exit_code = 0;   // the command's exit status; 128 + signal when killed
  std::string output;  // stdout and stderr interleaved
  double seconds = 0;  // wall time
  bool timed_out = false;
};

// Runs `command` with /bin/sh -c, capturing stdout and stderr, and kills its process group when
// it outlives `timeout` (timed_out is then set). Fails only when the process cannot be started.
absl::StatusOr<CommandResult> RunCommand(const std::string& command, absl::Duration timeout);

}  // namespace memtrace::bench

#endif  // MEMTRACE_TOOLS_BENCH_PROC_STATS_H_
