#include "tools/launch/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace memtrace::launch {
namespace {

absl::Status ExecError(const std::string& program, int error) {
  if (error == ENOENT) {
    return absl::NotFoundError(absl::StrCat("command not found: ", program));
  }
  if (error == EACCES || error == ENOEXEC) {
    return absl::PermissionDeniedError(
        absl::StrCat(program, ": cannot execute: ", strerror(error)));
  }
  return absl::InternalError(absl::StrCat("cannot execute ", program, ": ", strerror(error)));
}

bool IsExecutableFile(const std::string& path, int* error) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    *error = errno;
    return false;
  }
  if (S_ISDIR(st.st_mode)) {
    *error = EACCES;
    return false;
  }
  if (access(path.c_str(), X_OK) != 0) {
    *error = errno;
    return false;
  }
  return true;
}

// NAME=VALUE strings: the current environment with `overrides` applied.
std::vector<std::string> ChildEnvironment(const EnvVars& overrides) {
  std::map<std::string, size_t> index;
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    index[name] = out.size();
    out.push_back(std::move(entry));
  }
  for (const auto& [name, value] : overrides) {
    std::string entry = absl::StrCat(name, "=", value);
    auto it = index.find(name);
    if (it != index.end()) {
      out[it->second] = std::move(entry);
    } else {
      index[name] = out.size();
      out.push_back(std::move(entry));
    }
  }
  return out;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::string PathOf(const std::vector<std::string>& env) {
  for (const std::string& entry : env) {
    if (entry.rfind("PATH=", 0) == 0) return entry.substr(5);
  }
  return "/usr/local/bin:/usr/bin:/bin";  // glibc's execvp default, roughly
}

// Called in the child once it leads its own group. A signal sent to the caller's group between
// fork and setpgid reached the child too, and waits there, blocked, for exec to unblock it; the
// caller got its own copy (it blocks what it waits for) and decides what to pass on, so the
// child's copy would be a second one. Setting a pending signal's action to SIG_IGN discards it
// (POSIX sigaction), and the action is then put back as it was. Async-signal-safe.
void DropSignalsFromTheCallersGroup() {
  sigset_t pending;
  if (sigpending(&pending) != 0) return;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP || sigismember(&pending, sig) != 1) continue;
    struct sigaction ignore = {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    struct sigaction previous;
    if (sigaction(sig, &ignore, &previous) == 0) sigaction(sig, &previous, nullptr);
  }
}

}  // namespace

absl::StatusOr<std::string> ResolveCommand(const std::string& name, const std::string& path) {
  if (name.empty()) return absl::InvalidArgumentError("empty command");
  int error = ENOENT;
  if (name.find('/') != std::string::npos) {
    if (IsExecutableFile(name, &error)) return name;
    return ExecError(name, error);
  }
  bool denied = false;
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", name);
    if (IsExecutableFile(candidate, &error)) return candidate;
    if (error == EACCES) denied = true;
  }
  return ExecError(name, denied ? EACCES : ENOENT);
}

int ExitCodeForStartFailure(const absl::Status& status) {
  return status.code() == absl::StatusCode::kNotFound ? kExitCommandNotFound : kExitNotExecutable;
}

absl::StatusOr<pid_t> Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("no command to run");
  std::vector<std::string> env = ChildEnvironment(options.env);
  absl::StatusOr<std::string> program = ResolveCommand(options.argv[0], PathOf(env));
  if (!program.ok()) return program.status();

  std::vector<std::string> argv = options.argv;
  std::vector<char*> argv_ptrs = Pointers(argv);
  std::vector<char*> env_ptrs = Pointers(env);
  const std::string& output = options.output_path;

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int error = errno;
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return absl::InternalError(absl::StrCat("fork: ", strerror(error)));
  }
  if (pid == 0) {
    // Child: async-signal-safe calls only.
    close(pipe_fds[0]);
    if (options.new_process_group) {
      setpgid(0, 0);
      DropSignalsFromTheCallersGroup();
    }
    if (options.die_with_parent) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(1);  // the parent died before prctl
    }
    if (!output.empty()) {
      int fd = open(output.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
      }
    }
    sigprocmask(SIG_SETMASK, &options.signal_mask, nullptr);
    execve(program->c_str(), argv_ptrs.data(), env_ptrs.data());
    int error = errno;
    ssize_t ignored = write(pipe_fds[1], &error, sizeof(error));
    (void)ignored;
    _exit(kExitCommandNotFound);
  }
  close(pipe_fds[1]);
  int error = 0;
  ssize_t n;
  do {
    n = read(pipe_fds[0], &error, sizeof(error));
  } while (n < 0 && errno == EINTR);
  close(pipe_fds[0]);
  if (n == static_cast<ssize_t>(sizeof(error))) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return ExecError(options.argv[0], error);
  }
  return pid;
}

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return absl::StrCat("exited with code ", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    int sig = WTERMSIG(wait_status);
    const char* name = strsignal(sig);
    return absl::StrCat("killed by signal ", sig,
                        name != nullptr ? absl::StrCat(" (", name, ")") : "");
  }
  return absl::StrCat("ended with wait status ", wait_status);
}

}  // namespace memtrace::launch
