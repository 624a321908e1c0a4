// The agent's diagnostics on stderr: every line starts with "memtrace-agent: ", and each kind of
// message is printed once per process, so a hot path that keeps failing cannot flood the log of
// the training job it is attached to.
#ifndef MEMTRACE_AGENT_CUPTI_AGENT_LOG_H_
#define MEMTRACE_AGENT_CUPTI_AGENT_LOG_H_

#include <cstdio>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace memtrace {
namespace cupti {

class AgentLog {
 public:
  // Writes to `out`, not owned; when null, to stderr through AgentStderr(), which never waits
  // on it (callers hold locks the application's threads need).
  explicit AgentLog(std::FILE* out = nullptr);

  // Prints "memtrace-agent: <message>" unless a message of this `kind` was printed before.
  // Returns whether it printed. Thread-safe.
  bool Once(std::string_view kind, std::string_view message);

  // Prints unconditionally (for the few lines that must always appear, e.g. the start banner).
  void Always(std::string_view message);

  // Waits until the lines printed so far are on stderr, at most `timeout`; false when some are
  // not (stderr blocks). For the last lines of a process that exits soon after them: one whose
  // agent did not start (MEMTRACE_DISABLE=1, a configuration error) has no drain at exit, and a
  // short-lived one ended before the writer thread wrote why it records nothing.
  bool Flush(absl::Duration timeout);

 private:
  void Write(std::string_view message);

  std::FILE* out_;  // null: AgentStderr()
  absl::Mutex mu_;
  absl::flat_hash_set<std::string> printed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cupti
}  // namespace memtrace

#endif  // MEMTRACE_AGENT_CUPTI_AGENT_LOG_H_
