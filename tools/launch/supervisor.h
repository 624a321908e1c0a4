// Waiting for a job while passing signals on to it, without signal handlers or globals: the
// signals are blocked in every thread (block them before any thread starts, gRPC's included)
// and taken synchronously with sigtimedwait.
//
// Forwarding (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2) depends on where the job runs
// (JobGroup), so that a signal reaches it once: a second SIGINT makes launchers such as torchrun
// abort their own orderly shutdown.
#ifndef MEMTRACE_TOOLS_LAUNCH_SUPERVISOR_H_
#define MEMTRACE_TOOLS_LAUNCH_SUPERVISOR_H_

#include <signal.h>
#include <sys/types.h>

#include <functional>
#include <optional>
#include <vector>

#include "absl/time/time.h"

namespace memtrace::launch {

// Which process group the job runs in.
enum class JobGroup {
  // memtrace run's own, which a shell gives the terminal to (the foreground group, or one the
  // shell can `fg`): a terminal's Ctrl-C or Ctrl-\ reaches the job directly and is not passed
  // on; only signals a process sent to memtrace (kill, Slurm, Kubernetes) are, to the job's
  // process.
  kShared,
  // One the job leads: nothing sent to memtrace run's group reaches it, so every forwarded
  // signal is passed on, whoever sent it, to the job's whole group.
  kOwn,
};

// kShared when this process has a controlling terminal, in the foreground or not, so that the
// terminal's signals and job control (Ctrl-C, Ctrl-Z, fg, reading the terminal after fg) reach
// the job as they would without memtrace. kOwn without one (a batch scheduler, setsid, a
// container), where signals come from processes, and one sent to memtrace's whole group would
// otherwise reach a job in that group twice: directly and passed on. Async-signal-safe.
JobGroup ChooseJobGroup();

// Blocks the forwarded signals and SIGCHLD in the calling thread for its lifetime (threads
// created meanwhile inherit the mask), and sets SIGCHLD's disposition to the default: one
// inherited as ignored (SIG_IGN) makes the kernel reap children itself, and their exit codes
// are lost. On destruction, signals still pending are discarded and the old mask and SIGCHLD
// disposition are restored. Not thread-safe; one per process at a time.
class ScopedSignalBlock {
 public:
  ScopedSignalBlock();
  ~ScopedSignalBlock();
  ScopedSignalBlock(const ScopedSignalBlock&) = delete;
  ScopedSignalBlock& operator=(const ScopedSignalBlock&) = delete;

  // A SIGINT, SIGTERM, SIGHUP or SIGQUIT that arrived while blocked (Ctrl-C while the local
  // collector was starting), taken off the pending set; nullopt when none. Before the job is
  // spawned it is the user's stop, which SuperviseJob would otherwise drop as a terminal signal
  // the job already got.
  std::optional<int> TakeStopRequest();

  // The mask from before: what child processes should start with.
  const sigset_t& original_mask() const { return original_; }
  const sigset_t& blocked() const { return blocked_; }

 private:
  sigset_t blocked_;
  sigset_t original_;
  struct sigaction original_sigchld_;
};

struct SuperviseOptions {
  // Called about every `tick` while the job runs (health checks, a local collector's state).
  std::function<void()> on_tick;
  absl::Duration tick = absl::Seconds(5);
  // Called for each signal passed on to the job: (signal number, sender pid).
  std::function<void(int, pid_t)> on_forward;
  // Where the job was spawned (a kOwn job leads its group): decides which signals are passed
  // on, and to whom.
  JobGroup job_group = JobGroup::kShared;
  // kShared: processes whose SIGHUP is not passed on, because they sent it to the whole group
  // (the shell that started memtrace run and its session's leader, which pass a terminal's
  // hangup on to their jobs' groups). Noted at the start: a shell exits right after.
  std::vector<pid_t> hangup_senders;
};

// Waits until `job` ends and returns its waitpid status; forwards signals (see JobGroup) while
// waiting. Requires a live ScopedSignalBlock `signals` in the calling thread. A job that is no
// longer this process's child (reaped by someone else) reads as exit code 1: unknown.
int SuperviseJob(pid_t job, const ScopedSignalBlock& signals, const SuperviseOptions& options);

}  // namespace memtrace::launch

#endif  // MEMTRACE_TOOLS_LAUNCH_SUPERVISOR_H_
