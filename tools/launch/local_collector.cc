#include "tools/launch/local_collector.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "collector/security/server_security.h"
#include "tools/launch/child_process.h"

namespace memtrace::launch {
namespace {

absl::Status MakeDirs(const std::string& path) {
  std::string partial;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || (path[i] == '/' && i > 0)) {
      partial = path.substr(0, i);
      if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
        return absl::FailedPreconditionError(
            absl::StrCat("cannot create directory ", partial, ": ", strerror(errno)));
      }
    }
  }
  return absl::OkStatus();
}

std::optional<int> ReadPort(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  std::string content = text.str();
  // Only a complete line counts: the collector may be half way through writing it.
  if (content.empty() || content.back() != '\n') return std::nullopt;
  int port = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(content), &port) || port <= 0) {
    return std::nullopt;
  }
  return port;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalCollector>> LocalCollector::Start(
    const LocalCollectorOptions& options) {
  if (absl::Status s = MakeDirs(options.data_dir); !s.ok()) return s;
  std::unique_ptr<LocalCollector> collector(new LocalCollector());
  const size_t colon = options.listen.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address '", options.listen, "' is not HOST:PORT"));
  }
  collector->host_ = options.listen.substr(0, colon);
  // The collector serves plaintext only on loopback unless told it may: a run that asked for a
  // network address (workers on other nodes) gets it in plaintext, and says so.
  collector->plaintext_on_network_ = !security::IsLoopbackHost(collector->host_);
  if (collector->host_ == "0.0.0.0" || collector->host_ == "[::]") {
    char name[256] = {};
    collector->host_ = gethostname(name, sizeof(name) - 1) == 0 ? name : "localhost";
  }
  collector->log_path_ = absl::StrCat(options.work_dir, "/collector.log");
  const std::string port_file = absl::StrCat(options.work_dir, "/collector.port");
  unlink(port_file.c_str());

  SpawnOptions spawn;
  spawn.argv = {options.binary,   "--listen",    options.listen, "--data",
                options.data_dir, "--port_file", port_file};
  if (collector->plaintext_on_network_) spawn.argv.push_back("--insecure");
  spawn.signal_mask = options.signal_mask;
  spawn.new_process_group = true;
  spawn.die_with_parent = true;
  spawn.output_path = collector->log_path_;
  absl::StatusOr<pid_t> pid = Spawn(spawn);
  if (!pid.ok()) return pid.status();
  collector->pid_ = *pid;

  const absl::Time deadline = absl::Now() + options.start_timeout;
  while (true) {
    if (std::optional<int> port = ReadPort(port_file)) {
      collector->port_ = *port;
      return collector;
    }
    if (std::optional<int> status = collector->Poll()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the local collector (", options.binary, " --data ", options.data_dir, ") ",
                       DescribeWaitStatus(*status),
                       " before it was ready; its log ends: ", collector->LogTail(600)));
    }
    if (absl::Now() > deadline) {
      collector->Stop(absl::Seconds(1));
      return absl::DeadlineExceededError(
          absl::StrCat("the local collector did not report its port in ",
                       absl::FormatDuration(options.start_timeout), " (", port_file,
                       "); its log ends: ", collector->LogTail(600)));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

LocalCollector::~LocalCollector() { Stop(absl::Seconds(5)); }

std::string LocalCollector::address() const { return absl::StrCat(host_, ":", port_); }

std::optional<int> LocalCollector::Poll() {
  if (wait_status_.has_value() || pid_ <= 0) return wait_status_;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) wait_status_ = status;
  return wait_status_;
}

int LocalCollector::Stop(absl::Duration grace) {
  if (pid_ <= 0) return 0;
  if (Poll().has_value()) return *wait_status_;
  kill(pid_, SIGTERM);
  const absl::Time deadline = absl::Now() + grace;
  while (!Poll().has_value() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  if (!wait_status_.has_value()) {
    kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    wait_status_ = status;
  }
  return *wait_status_;
}

std::string LocalCollector::LogTail(size_t max_bytes) const {
  std::ifstream in(log_path_);
  if (!in) return "(no log)";
  std::stringstream text;
  text << in.rdbuf();
  std::string content = text.str();
  if (content.size() > max_bytes) content = content.substr(content.size() - max_bytes);
  while (!content.empty() && (content.back() == '\n' || content.back() == ' ')) {
    content.pop_back();
  }
  return content.empty() ? "(empty)" : content;
}

}  // namespace memtrace::launch
