// The collector `memtrace run` starts when no --collector is given: the memtrace-collector
// binary as a child process on 127.0.0.1, port chosen by the OS (--port_file), in its own
// process group (a Ctrl-C meant for the job must not stop it before the job's agents have
// flushed) and killed by the kernel if memtrace itself dies.
#ifndef MEMTRACE_TOOLS_LAUNCH_LOCAL_COLLECTOR_H_
#define MEMTRACE_TOOLS_LAUNCH_LOCAL_COLLECTOR_H_

#include <signal.h>
#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace memtrace::launch {

struct LocalCollectorOptions {
  std::string binary;    // memtrace-collector
  std::string data_dir;  // its RocksDB directory (created if missing)
  // A directory of the caller's for the port file and the collector's log.
  std::string work_dir;
  // HOST:PORT to listen on; port 0 lets the OS choose. A wildcard host (0.0.0.0, [::]) serves
  // other machines too (workers of a multi-node srun / mpirun started from here), in plaintext:
  // any host but loopback starts the collector with --insecure.
  std::string listen = "127.0.0.1:0";
  absl::Duration start_timeout = absl::Seconds(20);
  sigset_t signal_mask;  // the mask the collector process starts with
};

class LocalCollector {
 public:
  // Starts the collector and waits until it has written its port. FAILED_PRECONDITION with the
  // end of its log when it exits first (e.g. the data directory is locked by another
  // collector), DEADLINE_EXCEEDED when it never reports a port.
  static absl::StatusOr<std::unique_ptr<LocalCollector>> Start(
      const LocalCollectorOptions& options);
  // Stop() if still running.
  ~LocalCollector();
  LocalCollector(const LocalCollector&) = delete;
  LocalCollector& operator=(const LocalCollector&) = delete;

  // Where workers reach it: "HOST:PORT" with the listen host, or this machine's hostname for a
  // wildcard listen host.
  std::string address() const;
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  // True when it listens beyond loopback: started with --insecure (plaintext; a bearer token in
  // $MEMTRACE_TOKEN, which it inherits, still applies).
  bool plaintext_on_network() const { return plaintext_on_network_; }

  // Non-blocking: when the process has ended, reaps it and returns its wait status (every
  // later call returns the same). nullopt while it runs. Not thread-safe.
  std::optional<int> Poll();

  // SIGTERM, then SIGKILL after `grace`. Returns the wait status; idempotent.
  int Stop(absl::Duration grace);

  // The last `max_bytes` of the collector's log.
  std::string LogTail(size_t max_bytes = 2000) const;

 private:
  LocalCollector() = default;

  std::string host_;
  bool plaintext_on_network_ = false;
  int port_ = 0;
  pid_t pid_ = -1;
  std::string log_path_;
  std::optional<int> wait_status_;
};

}  // namespace memtrace::launch

#endif  // MEMTRACE_TOOLS_LAUNCH_LOCAL_COLLECTOR_H_
