#include "tools/bench/proc_stats.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <poll.h>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace memtrace::bench {
namespace {

// A "Name:   1234 kB" line of /proc/self/status, in bytes.
uint64_t StatusKb(const std::string& name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + ":", 0) != 0) continue;
    std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    uint64_t kb = 0;
    if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kb)) return kb * 1024;
  }
  return 0;
}

}  // namespace

uint64_t ResidentBytes() { return StatusKb("VmRSS"); }
uint64_t PeakResidentBytes() { return StatusKb("VmHWM"); }
uint64_t AnonResidentBytes() { return StatusKb("RssAnon"); }

double ProcessCpuSeconds() {
  rusage u;
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec +
         u.ru_stime.tv_usec / 1e6;
}

std::map<std::string, double> CpuSecondsByThreadName() {
  std::map<std::string, double> out;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // "tid (comm) state ppid ... utime(14) stime(15)": comm may hold spaces, so split after ')'.
    const size_t open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    const std::string name = stat.substr(open + 1, close - open - 1);
    std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 2), ' ');
    // fields[0] is the state (field 3), so utime (14) and stime (15) are fields[11], [12].
    uint64_t utime = 0, stime = 0;
    if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
        !absl::SimpleAtoi(fields[12], &stime)) {
      continue;
    }
    out[name] += (utime + stime) / tick;
  }
  return out;
}

uint64_t DirectoryBytes(const std::string& dir) {
  std::error_code ec;
  uint64_t total = 0;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

std::string MachineDescription() {
  std::ifstream cpu("/proc/cpuinfo");
  std::string line, model;
  int cores = 0;
  while (std::getline(cpu, line)) {
    if (line.rfind("model name", 0) == 0 && model.empty()) {
      model = std::string(absl::StripAsciiWhitespace(line.substr(line.find(':') + 1)));
    }
    if (line.rfind("processor", 0) == 0) ++cores;
  }
  std::ifstream mem("/proc/meminfo");
  uint64_t mem_kb = 0;
  while (std::getline(mem, line)) {
    if (line.rfind("MemTotal:", 0) == 0) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (parts.size() >= 2 && !absl::SimpleAtoi(parts[1], &mem_kb)) mem_kb = 0;
    }
  }
  return absl::StrCat(cores, " x ", model.empty() ? "unknown CPU" : model, ", ",
                      mem_kb / (1024 * 1024), " GiB RAM");
}

absl::StatusOr<CommandResult> RunCommand(const std::string& command, absl::Duration timeout) {
  int fds[2];
  if (pipe(fds) != 0) return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  const absl::Time start = absl::Now();
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(absl::StrCat("fork for \"", command, "\": ", strerror(errno)));
  }
  if (pid == 0) {
    setpgid(0, 0);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);
  close(fds[1]);
  CommandResult result;
  const absl::Time deadline = start + timeout;
  char buf[65536];
  while (true) {
    const int wait_ms = static_cast<int>(
        std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
    pollfd p{fds[0], POLLIN, 0};
    const int r = poll(&p, 1, std::min(wait_ms, 1000));
    if (r > 0) {
      const ssize_t n = read(fds[0], buf, sizeof buf);
      if (n <= 0) break;
      result.output.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (absl::Now() >= deadline) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return result;
}

}  // namespace memtrace::bench
