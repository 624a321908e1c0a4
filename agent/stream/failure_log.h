// Failures of the agent's transport: each kind is printed once to stderr (prefix
// "memtrace-agent: ") and counted every time, so a collector outage does not flood the
// application's log.
#ifndef MEMTRACE_AGENT_STREAM_FAILURE_LOG_H_
#define MEMTRACE_AGENT_STREAM_FAILURE_LOG_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace memtrace {

enum class Failure : uint8_t {
  kConnect = 0,         // a stream ended before its Hello was answered (unreachable)
  kRefused,             // the collector refused the Hello (token, admission, limits)
  kStreamBroken,        // an established stream ended with an error
  kHelloTimeout,        // no Hello ack within hello_timeout
  kAckTimeout,          // unacknowledged batches and no ack within ack_timeout
  kRejected,            // the collector rejected what we sent (INVALID_ARGUMENT)
  kQueueFull,           // Record() dropped events
  kSpoolFull,           // unacknowledged batches dropped (max_unacked_bytes)
  kCollectorRegressed,  // the collector acknowledged less than it had before
  kStringsRefused,      // Intern() beyond max_strings
  kUndelivered,         // shutdown with events the collector never acknowledged
};
inline constexpr size_t kFailureKinds = 11;

const char* FailureName(Failure kind);

class FailureLog {
 public:
  // `print` = false counts without printing (tests, or an embedder with its own reporting).
  explicit FailureLog(bool print) : print_(print) {}

  // Counts one failure of `kind`; prints "memtrace-agent: <message>" the first time.
  // Thread-safe; never waits on stderr (AgentStderr).
  void Report(Failure kind, std::string_view message);

  uint64_t count(Failure kind) const;

 private:
  const bool print_;
  std::atomic<uint64_t> counts_[kFailureKinds] = {};
};

}  // namespace memtrace

#endif  // MEMTRACE_AGENT_STREAM_FAILURE_LOG_H_
