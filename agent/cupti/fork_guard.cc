#include "agent/cupti/fork_guard.h"

#include <pthread.h>

#include <atomic>
#include <mutex>

namespace memtrace::cupti {
namespace {

std::atomic<bool> g_forked{false};

void MarkForked() { g_forked.store(true, std::memory_order_relaxed); }

}  // namespace

void InstallForkGuard() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, &MarkForked); });
}

bool InForkedChild() { return g_forked.load(std::memory_order_relaxed); }

}  // namespace memtrace::cupti
