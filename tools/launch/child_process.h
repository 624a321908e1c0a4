// Starting the processes `memtrace run` supervises (the user's command, a local collector) with
// fork/exec, the way a shell would: PATH lookup, exit codes 127 (not found) and 126 (not
// executable), and 128 + signal for a child killed by a signal.
#ifndef MEMTRACE_TOOLS_LAUNCH_CHILD_PROCESS_H_
#define MEMTRACE_TOOLS_LAUNCH_CHILD_PROCESS_H_

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/launch/worker_env.h"

namespace memtrace::launch {

inline constexpr int kExitCommandNotFound = 127;
inline constexpr int kExitNotExecutable = 126;

// The file execvp would run for `name`: `name` itself when it contains a '/', else the first
// executable `<dir>/<name>` of the ':'-separated `path` (empty entries mean "."). NOT_FOUND
// ("command not found: NAME") or PERMISSION_DENIED ("NAME: permission denied") otherwise.
absl::StatusOr<std::string> ResolveCommand(const std::string& name, const std::string& path);

// The exit code a shell reports for a command that failed to start with `status`:
// kExitCommandNotFound for NOT_FOUND, kExitNotExecutable for anything else.
int ExitCodeForStartFailure(const absl::Status& status);

struct SpawnOptions {
  // argv[0] is the program: resolved with ResolveCommand against the PATH of the child's
  // environment.
  std::vector<std::string> argv;
  // Added to (or replacing in) the calling process's environment for the child.
  EnvVars env;
  // The signal mask the child starts with (the caller may block signals it waits for).
  sigset_t signal_mask;
  // Own process group, so that nothing sent to the caller's group (a terminal's Ctrl-C,
  // `kill -INT -PGID`) reaches the child. One sent there between fork and the child's setpgid
  // that the calling thread blocks is dropped in the child, not delivered at exec: the caller
  // got it too and takes it afterwards. The child leads its group before Spawn returns.
  bool new_process_group = false;
  // SIGTERM to the child when the calling thread's process dies.
  bool die_with_parent = false;
  // When set, stdout and stderr go to this file (created or appended).
  std::string output_path;
};

// Forks and execs. Returns the child's pid once exec succeeded; a failed exec (reported back
// through a close-on-exec pipe) is NOT_FOUND / PERMISSION_DENIED / INTERNAL naming the program,
// and the child is reaped. Nothing in the child between fork and exec allocates.
absl::StatusOr<pid_t> Spawn(const SpawnOptions& options);

// The shell's exit code for a waitpid status: the exit code, or 128 + the signal number.
int ExitCodeOf(int wait_status);

// "exited with code 3", "killed by signal 9 (Killed)".
std::string DescribeWaitStatus(int wait_status);

}  // namespace memtrace::launch

#endif  // MEMTRACE_TOOLS_LAUNCH_CHILD_PROCESS_H_
