#include "agent/cupti/agent_log.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "agent/stream/stderr_lines.h"

namespace memtrace {
namespace cupti {

AgentLog::AgentLog(std::FILE* out) : out_(out) {}

bool AgentLog::Once(std::string_view kind, std::string_view message) {
  {
    absl::MutexLock lock(&mu_);
    if (!printed_.insert(std::string(kind)).second) return false;
  }
  Write(message);
  return true;
}

void AgentLog::Always(std::string_view message) { Write(message); }

bool AgentLog::Flush(absl::Duration timeout) {
  if (out_ != nullptr) return std::fflush(out_) == 0;  // Write() flushes each line already
  return AgentStderr().Flush(timeout);
}

void AgentLog::Write(std::string_view message) {
  if (out_ == nullptr) {
    AgentStderr().Write(
        absl::StrCat("memtrace-agent: ", absl::string_view(message.data(), message.size())));
    return;
  }
  // One fprintf per line so lines from concurrent threads do not interleave mid-line.
  std::fprintf(out_, "memtrace-agent: %.*s\n", static_cast<int>(message.size()), message.data());
  std::fflush(out_);
}

}  // namespace cupti
}  // namespace memtrace
