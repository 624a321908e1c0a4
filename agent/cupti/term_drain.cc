#include "agent/cupti/term_drain.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

namespace memtrace::cupti {
namespace {

std::atomic<bool> g_installed{false};
int g_pipe[2] = {-1, -1};
pid_t g_owner = 0;
std::atomic<int> g_terms{0};
std::function<void()>* g_drain = nullptr;  // leaked: the thread may outlive any owner

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
  // Another process (a fork that inherited the handler), or a second SIGTERM: no drain.
  if (getpid() != g_owner || g_terms.fetch_add(1) > 0) EndByDefaultTerm();
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
  (*g_drain)();
  EndByDefaultTerm();
}

}  // namespace

absl::Status InstallTermDrain(std::function<void()> drain) {
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
  g_drain = new std::function<void()>(std::move(drain));
  try {
    std::thread(&Drainer).detach();
  } catch (const std::system_error& e) {
    return absl::UnavailableError(absl::StrCat("no drain thread: ", e.what()));
  }
  struct sigaction handler {};
  handler.sa_handler = &OnTerm;
  sigemptyset(&handler.sa_mask);
  handler.sa_flags = SA_RESTART;
  if (sigaction(SIGTERM, &handler, nullptr) != 0) {
    return absl::UnavailableError(absl::StrCat("sigaction: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace memtrace::cupti
