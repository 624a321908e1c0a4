#include "agent/cupti/agent_log.h"

#include <string>

namespace memtrace {
namespace cupti {

AgentLog::AgentLog(std::FILE* out) : out_(out != nullptr ? out : stderr) {}

bool AgentLog::Once(std::string_view kind, std::string_view message) {
  {
    absl::MutexLock lock(&mu_);
    if (!printed_.insert(std::string(kind)).second) return false;
  }
  Write(message);
  return true;
}

void AgentLog::Always(std::string_view message) { Write(message); }

void AgentLog::Write(std::string_view message) {
  // One fprintf per line so lines from concurrent threads do not interleave mid-line.
  std::fprintf(out_, "memtrace-agent: %.*s\n", static_cast<int>(message.size()), message.data());
  std::fflush(out_);
}

}  // namespace cupti
}  // namespace memtrace
