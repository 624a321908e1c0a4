// A stand-in for one training process, for the launcher tests: takes its identity and collector
// from the environment exactly as the injected agent does (TransportOptionsFromEnvironment),
// streams a few steps of allocations through the agent's real Transport, and exits. No GPU.
//
//   launch_worker [--events N] [--hold_ms MS] [--spawn_child M] [--spawn_child_first M]
//                 [--ready_file FILE] [--exit_code C] [--identity_out FILE]
//
// --hold_ms keeps it alive between the first and second half of its events (to kill a
// collector or send signals meanwhile); --spawn_child starts, between the two halves, a copy of
// itself under `sh -c` that records M events with the same environment (RANK included, as an
// inference engine a worker starts inherits it) and waits for it; --spawn_child_first starts that
// child before this process connects, and connects once the child's first events are durable
// (the child holds the rank first: an engine that initialised CUDA before its parent did), the
// child then holding on for 2 s; --ready_file makes a file once the first half of the events is
// durable; --identity_out writes "key=value"
// lines of the identity it derived. Exit codes: C (default 0); 2 when the environment gives no
// valid identity; 3 when the child failed.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "agent/identity/transport_env.h"
#include "agent/stream/transport.h"
#include "proto/codec/event.h"

namespace {

struct Args {
  int64_t events = 40;
  int64_t hold_ms = 0;
  int64_t spawn_child = 0;
  int64_t spawn_child_first = 0;
  int exit_code = 0;
  std::string identity_out;
  std::string ready_file;
};

bool ParseArgs(int argc, char** argv, Args* args) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) return false;
    std::string value = argv[++i];
    int64_t n = 0;
    if (flag == "--identity_out") {
      args->identity_out = value;
    } else if (flag == "--ready_file") {
      args->ready_file = value;
    } else if (!absl::SimpleAtoi(value, &n)) {
      return false;
    } else if (flag == "--events") {
      args->events = n;
    } else if (flag == "--hold_ms") {
      args->hold_ms = n;
    } else if (flag == "--spawn_child") {
      args->spawn_child = n;
    } else if (flag == "--spawn_child_first") {
      args->spawn_child_first = n;
    } else if (flag == "--exit_code") {
      args->exit_code = static_cast<int>(n);
    } else {
      return false;
    }
  }
  return true;
}

void WriteIdentity(const std::string& path, const memtrace::TransportOptions& options) {
  const memtrace::v1::RankIdentity& id = options.identity;
  std::ofstream out(path);
  out << "job_id=" << id.job_id() << "\nrank=" << id.rank() << "\nlocal_rank=" << id.local_rank()
      << "\nworld_size=" << id.world_size() << "\ngroup_rank=" << id.group_rank()
      << "\nattempt=" << id.attempt() << "\nlauncher=" << id.launcher()
      << "\ncollector=" << options.collector_address << "\n";
}

// Starts this program again recording `events` events, under a shell that stays its parent (a
// process between the two that streams nothing, as a forkserver or a launcher script), with
// --ready_file and --hold_ms when `ready_file` is given. -1 when it could not.
pid_t StartChild(int64_t events, const std::string& ready_file = "") {
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return -1;
  const std::string count = std::to_string(events);
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (ready_file.empty()) {
      execl("/bin/sh", "sh", "-c", "\"$0\" --events \"$1\"; exit $?", self, count.c_str(),
            static_cast<char*>(nullptr));
    } else {
      execl("/bin/sh", "sh", "-c",
            "\"$0\" --events \"$1\" --ready_file \"$2\" --hold_ms 2000; exit $?", self,
            count.c_str(), ready_file.c_str(), static_cast<char*>(nullptr));
    }
    _exit(127);
  }
  return pid;
}

bool ChildSucceeded(pid_t pid) {
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Waits up to 60 s for `path` to exist, while child `pid` runs.
bool AwaitFile(const std::string& path, pid_t pid) {
  for (int i = 0; i < 600; ++i) {
    if (access(path.c_str(), F_OK) == 0) return true;
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) != 0) return false;  // it ended (or is no child)
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

// Step s allocates one 1 MiB block per event pair and frees it again.
void Record(memtrace::Transport& transport, int64_t from, int64_t to) {
  for (int64_t i = from; i < to; ++i) {
    memtrace::Event e;
    e.ts_ns = absl::GetCurrentTimeNanos();
    if (i % 10 == 0) {
      e.kind = memtrace::EventKind::kStep;
      e.aux = static_cast<uint64_t>(i / 10);
    } else {
      e.kind = i % 2 == 1 ? memtrace::EventKind::kAlloc : memtrace::EventKind::kFree;
      e.address = 0x7f0000000000ull + static_cast<uint64_t>(i / 2) * (1 << 20);
      e.bytes = 1 << 20;
      e.memory_kind = memtrace::kMemoryDevice;
    }
    transport.Record(e);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!ParseArgs(argc, argv, &args)) {
    fprintf(stderr,
            "usage: launch_worker [--events N] [--hold_ms MS] [--spawn_child M] "
            "[--spawn_child_first M] [--ready_file FILE] [--exit_code C] [--identity_out FILE]\n");
    return 64;
  }
  absl::StatusOr<memtrace::TransportOptions> options =
      memtrace::TransportOptionsFromEnvironment(memtrace::ProcessEnvironment());
  if (!options.ok()) {
    fprintf(stderr, "launch_worker: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  if (!args.identity_out.empty()) WriteIdentity(args.identity_out, *options);
  pid_t first_child = -1;
  if (args.spawn_child_first > 0) {
    // The child connects, and has its first events durable, before this process connects.
    const char* tmp = std::getenv("TMPDIR");
    const std::string ready = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                              "/launch_worker." + std::to_string(getpid()) + ".ready";
    std::remove(ready.c_str());  // one a killed run with this pid left
    first_child = StartChild(args.spawn_child_first, ready);
    const bool ready_in_time = first_child > 0 && AwaitFile(ready, first_child);
    std::remove(ready.c_str());
    if (!ready_in_time) {
      fprintf(stderr, "launch_worker: the child process never had its first events durable\n");
      if (first_child > 0) kill(first_child, SIGKILL);
      return 3;
    }
  }
  absl::StatusOr<std::unique_ptr<memtrace::Transport>> transport =
      memtrace::Transport::Start(*options);
  if (!transport.ok()) {
    fprintf(stderr, "launch_worker: %s\n", std::string(transport.status().message()).c_str());
    return 2;
  }
  Record(**transport, 0, args.events / 2);
  if (!args.ready_file.empty()) {
    if (!(*transport)->Flush(absl::Seconds(30)).ok()) {
      fprintf(stderr, "launch_worker: the first events were not acknowledged\n");
      return 3;
    }
    std::ofstream(args.ready_file) << "ready\n";
  }
  if (args.hold_ms > 0) {
    (void)(*transport)->Flush(absl::Seconds(2));
    absl::SleepFor(absl::Milliseconds(args.hold_ms));
  }
  if (args.spawn_child > 0) {
    (void)(*transport)->Flush(absl::Seconds(2));  // the parent holds the rank first
    if (!ChildSucceeded(StartChild(args.spawn_child))) {
      fprintf(stderr, "launch_worker: the child process failed\n");
      return 3;
    }
  }
  Record(**transport, args.events / 2, args.events);
  absl::Status shutdown = (*transport)->Shutdown(absl::Seconds(2));
  if (!shutdown.ok()) {
    fprintf(stderr, "launch_worker: shutdown: %s\n", std::string(shutdown.message()).c_str());
  }
  if (first_child > 0 && !ChildSucceeded(first_child)) {
    fprintf(stderr, "launch_worker: the child process failed\n");
    return 3;
  }
  return args.exit_code;
}
