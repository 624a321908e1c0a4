#include "tools/launch/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "absl/time/clock.h"

namespace memtrace::launch {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

// Sent by a process (kill, sigqueue, tgkill), as opposed to the kernel on behalf of a
// terminal.
bool SentByProcess(const siginfo_t& info) {
  return info.si_code == SI_USER || info.si_code == SI_QUEUE || info.si_code == SI_TKILL;
}

// A job in its own group hears nothing of what reaches memtrace run's group, so then all are
// passed on. A job in memtrace's group got the terminal's signals itself, and a shell's
// hangup: a shell (bash, zsh) whose terminal closes sends SIGHUP to each of its jobs' groups.
bool ShouldPassOn(const siginfo_t& info, const SuperviseOptions& options) {
  if (options.job_group == JobGroup::kOwn) return true;
  if (!SentByProcess(info)) return false;
  const std::vector<pid_t>& shells = options.hangup_senders;
  return info.si_signo != SIGHUP ||
         std::find(shells.begin(), shells.end(), info.si_pid) == shells.end();
}

// A job of its own group gets the signal in its whole group: one sent to memtrace run's group
// would have reached every process there without memtrace (torchrun's workers too, which count
// on it as on a terminal's Ctrl-C). One sent to memtrace's pid alone looks the same (SI_USER)
// and goes the same way. A job in memtrace's group gets it in its own process only, as before:
// its group is memtrace's.
void PassOn(pid_t job, int sig, JobGroup group) { kill(group == JobGroup::kOwn ? -job : job, sig); }

timespec WaitTimespec(absl::Duration d) {
  d = std::max(d, absl::Milliseconds(1));
  timespec ts;
  ts.tv_sec = static_cast<time_t>(absl::ToInt64Seconds(d));
  ts.tv_nsec = static_cast<long>(absl::ToInt64Nanoseconds(d - absl::Seconds(ts.tv_sec)));
  return ts;
}

}  // namespace

JobGroup ChooseJobGroup() {
  // /dev/tty is the controlling terminal however stdin, stdout and stderr are redirected (a run
  // logging to a file still gets the terminal's Ctrl-C); it does not open without one.
  const int tty = open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC);
  if (tty < 0) return JobGroup::kOwn;
  close(tty);
  // In the background too: `fg` gives the terminal to the group memtrace run is in (whichever
  // process leads it: a shell's `&`, a subshell, a wrapper), and a job of a group of its own
  // would never get it (reading the terminal, it would stop for good on SIGTTIN).
  return JobGroup::kShared;
}

ScopedSignalBlock::ScopedSignalBlock() {
  sigemptyset(&blocked_);
  for (int sig : kForwarded) sigaddset(&blocked_, sig);
  sigaddset(&blocked_, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &blocked_, &original_);
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(SIGCHLD, &default_action, &original_sigchld_);
}

ScopedSignalBlock::~ScopedSignalBlock() {
  const timespec zero = {0, 0};
  while (sigtimedwait(&blocked_, nullptr, &zero) > 0) {
  }
  sigaction(SIGCHLD, &original_sigchld_, nullptr);
  pthread_sigmask(SIG_SETMASK, &original_, nullptr);
}

std::optional<int> ScopedSignalBlock::TakeStopRequest() {
  sigset_t pending;
  if (sigpending(&pending) != 0) return std::nullopt;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    if (sigismember(&pending, sig) != 1) continue;
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    const timespec zero = {0, 0};
    if (sigtimedwait(&one, nullptr, &zero) == sig) return sig;
  }
  return std::nullopt;
}

int SuperviseJob(pid_t job, const ScopedSignalBlock& signals, const SuperviseOptions& options) {
  absl::Time next_tick = absl::Now() + options.tick;
  while (true) {
    int status = 0;
    pid_t r = waitpid(job, &status, WNOHANG);
    if (r == job) return status;
    // Not our child any more (reaped elsewhere): its exit code is unknown, which is not success.
    if (r < 0 && errno != EINTR) return 1 << 8;

    absl::Time now = absl::Now();
    if (now >= next_tick) {
      if (options.on_tick) options.on_tick();
      next_tick = absl::Now() + options.tick;
      continue;
    }
    // Wake at least every 200 ms: SIGCHLD of another child (a local collector) is taken here
    // too, and a job's exit must not wait for the next tick.
    timespec wait = WaitTimespec(std::min(next_tick - now, absl::Milliseconds(200)));
    siginfo_t info;
    int sig = sigtimedwait(&signals.blocked(), &info, &wait);
    if (sig <= 0 || sig == SIGCHLD) continue;
    if (ShouldPassOn(info, options)) {
      PassOn(job, sig, options.job_group);
      if (options.on_forward) options.on_forward(sig, info.si_pid);
    }
  }
}

}  // namespace memtrace::launch
