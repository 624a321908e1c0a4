#include "agent/cupti/term_drain.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace memtrace::cupti {
namespace {

std::atomic<bool> g_installed{false};
int g_pipe[2] = {-1, -1};
pid_t g_owner = 0;
std::atomic<int64_t> g_first_term_ns{0};   // CLOCK_MONOTONIC of the first SIGTERM; 0: none yet
std::function<void()>* g_drain = nullptr;  // leaked: the thread may outlive any owner
absl::Duration g_bound;

// A second SIGTERM this soon after the first is the same shutdown sent twice (scancel and the
// launcher both signalling the process group), not a hurry: it does not cut the drain short.
constexpr int64_t kRepeatNs = 1'000'000'000;

int64_t MonotonicNs() {  // async-signal-safe
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

// Ends the process by SIGTERM with its default action. Async-signal-safe.
void EndByDefaultTerm() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGTERM, &dfl, nullptr);
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &term, nullptr);
  raise(SIGTERM);
}

void OnTerm(int) {
  const int saved_errno = errno;
  // Another process (a fork that inherited the handler): no drain of ours.
  if (getpid() != g_owner) EndByDefaultTerm();
  const int64_t now = MonotonicNs();
  int64_t first = 0;
  if (!g_first_term_ns.compare_exchange_strong(first, now)) {
    if (now - first >= kRepeatNs) EndByDefaultTerm();  // a second one, later: at once
    errno = saved_errno;
    return;
  }
  const char byte = 1;
  if (write(g_pipe[1], &byte, 1) != 1) EndByDefaultTerm();
  errno = saved_errno;
}

void Drainer() {
  pthread_setname_np(pthread_self(), "memtrace-term");
  char byte = 0;
  for (;;) {
    const ssize_t n = read(g_pipe[0], &byte, 1);
    if (n == 1) break;
    if (n < 0 && errno == EINTR) continue;
    return;  // the pipe is gone: nothing will come
  }
  // The drain is bounded on its own (the transport's timeout), but not all of it is (a CUPTI
  // flush on a wedged GPU, the very case in which torchrun ends the other ranks): past the bound
  // the process ends regardless, as it would have without the agent.
  try {
    std::thread([] {
      absl::SleepFor(g_bound);
      EndByDefaultTerm();
    }).detach();
  } catch (const std::system_error&) {
    EndByDefaultTerm();  // no watchdog: no drain either
  }
  (*g_drain)();
  EndByDefaultTerm();
}

void ClosePipe() {
  close(g_pipe[0]);
  close(g_pipe[1]);
  g_pipe[0] = g_pipe[1] = -1;
}

}  // namespace

absl::Status InstallTermDrain(std::function<void()> drain, absl::Duration bound) {
  if (g_installed.exchange(true)) return absl::AlreadyExistsError("installed already");
  struct sigaction current {};
  if (sigaction(SIGTERM, nullptr, &current) != 0 || current.sa_handler != SIG_DFL ||
      (current.sa_flags & SA_SIGINFO) != 0) {
    return absl::FailedPreconditionError(
        "SIGTERM has a handler (or is ignored): left to the application");
  }
  if (pipe2(g_pipe, O_CLOEXEC) != 0) {
    return absl::UnavailableError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  g_owner = getpid();
  g_bound = bound;
  g_drain = new std::function<void()>(std::move(drain));
  try {
    std::thread(&Drainer).detach();
  } catch (const std::system_error& e) {
    ClosePipe();
    return absl::UnavailableError(absl::StrCat("no drain thread: ", e.what()));
  }
  struct sigaction handler {};
  handler.sa_handler = &OnTerm;
  sigemptyset(&handler.sa_mask);
  handler.sa_flags = SA_RESTART;
  struct sigaction before {};
  if (sigaction(SIGTERM, &handler, &before) != 0) {
    ClosePipe();  // the drain thread's read ends: it returns
    return absl::UnavailableError(absl::StrCat("sigaction: ", std::strerror(errno)));
  }
  if (before.sa_handler != SIG_DFL || (before.sa_flags & SA_SIGINFO) != 0) {
    // Another thread installed the application's own between the check and ours: it stays.
    sigaction(SIGTERM, &before, nullptr);
    ClosePipe();
    return absl::FailedPreconditionError(
        "SIGTERM got a handler meanwhile: left to the application");
  }
  return absl::OkStatus();
}

}  // namespace memtrace::cupti
