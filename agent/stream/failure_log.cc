#include "agent/stream/failure_log.h"

#include "absl/strings/str_cat.h"
#include "agent/stream/stderr_lines.h"

namespace memtrace {

const char* FailureName(Failure kind) {
  switch (kind) {
    case Failure::kConnect: return "connect";
    case Failure::kRefused: return "refused";
    case Failure::kStreamBroken: return "stream_broken";
    case Failure::kHelloTimeout: return "hello_timeout";
    case Failure::kAckTimeout: return "ack_timeout";
    case Failure::kRejected: return "rejected";
    case Failure::kQueueFull: return "queue_full";
    case Failure::kSpoolFull: return "spool_full";
    case Failure::kCollectorRegressed: return "collector_regressed";
    case Failure::kStringsRefused: return "strings_refused";
    case Failure::kUndelivered: return "undelivered";
  }
  return "unknown";
}

void FailureLog::Report(Failure kind, std::string_view message) {
  const size_t i = static_cast<size_t>(kind);
  if (i >= kFailureKinds) return;
  const uint64_t before = counts_[i].fetch_add(1, std::memory_order_relaxed);
  if (before == 0 && print_) {
    AgentStderr().Write(
        absl::StrCat("memtrace-agent: ", absl::string_view(message.data(), message.size()),
                     " (further ", FailureName(kind), " failures are counted, not printed)"));
  }
}

uint64_t FailureLog::count(Failure kind) const {
  const size_t i = static_cast<size_t>(kind);
  return i < kFailureKinds ? counts_[i].load(std::memory_order_relaxed) : 0;
}

}  // namespace memtrace
