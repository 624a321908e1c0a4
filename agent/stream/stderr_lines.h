// The agent's lines on stderr, written by a thread of their own. The agent prints from threads
// that hold locks the application's threads need (the sender holds the transport's lock that
// Record() takes), and stderr may be a pipe nobody drains (a launcher's log pipe, full): a
// blocking write there stalled every training thread's allocation callback, and exit. Here a
// caller only queues its line; the writer thread alone waits on stderr. Bounded: lines beyond
// max_pending_bytes are dropped and counted.
#ifndef MEMTRACE_AGENT_STREAM_STDERR_LINES_H_
#define MEMTRACE_AGENT_STREAM_STDERR_LINES_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace memtrace {

class BackgroundLineWriter {
 public:
  // Writes to `fd` (not owned). The writer thread starts with the first line.
  explicit BackgroundLineWriter(int fd, size_t max_pending_bytes = size_t{1} << 20);
  // Stops the writer thread once its queue is written: only for writers whose fd drains (tests);
  // the agent's stays for the life of the process (AgentStderr).
  ~BackgroundLineWriter();
  BackgroundLineWriter(const BackgroundLineWriter&) = delete;
  BackgroundLineWriter& operator=(const BackgroundLineWriter&) = delete;

  // Queues `line` and a newline; never waits on the fd. Thread-safe. In a child forked from the
  // process that made this writer (no writer thread there, and the lock may have been held by a
  // thread of the parent at the fork) the line is written directly.
  void Write(std::string_view line);

  // Waits until every line queued so far is written, at most `timeout`; false when some are
  // not (the fd blocks). For the last lines before exit.
  bool Flush(absl::Duration timeout);

  // Lines dropped because max_pending_bytes were waiting.
  uint64_t dropped() const;

 private:
  void Run();
  // Starts the writer thread; false (the caller writes directly) when no thread can be made.
  bool StartLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int fd_;
  const size_t max_pending_bytes_;
  const pid_t owner_pid_;
  mutable absl::Mutex mu_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  size_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t written_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool no_thread_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// The process's writer to stderr, for every agent line ("memtrace-agent: ..."). Never destroyed.
BackgroundLineWriter& AgentStderr();

}  // namespace memtrace

#endif  // MEMTRACE_AGENT_STREAM_STDERR_LINES_H_
