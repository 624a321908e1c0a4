// Test-only harness of the reliability tests: real processes (the collector binary, agents),
// loopback gRPC clients with the shared client channel, and readers of what the collector
// stored. Everything lives under $TEST_TMPDIR.
#ifndef MEMTRACE_TESTS_RELIABILITY_HARNESS_H_
#define MEMTRACE_TESTS_RELIABILITY_HARNESS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "proto/codec/event.h"
#include "proto/connect/client_channel.h"
#include "proto/memtrace/v1/query.pb.h"
#include "tests/util/test_dirs.h"

namespace memtrace::reliability {

using Env = std::vector<std::pair<std::string, std::string>>;

using test_util::FreshDir;  // $TEST_TMPDIR/name, emptied
std::string ReadFileOr(const std::string& path, const std::string& fallback = "");

// A child process with stdout/stderr in files; killed (SIGKILL) when destroyed while running.
class Child {
 public:
  // `argv[0]` is a path (runfiles-relative paths work: tests run in the runfiles root).
  static absl::StatusOr<std::unique_ptr<Child>> Spawn(const std::vector<std::string>& argv,
                                                      const Env& env, const std::string& name);
  ~Child();

  pid_t pid() const { return pid_; }
  bool Running();
  void Signal(int sig);
  // The exit code (128 + signal when killed), or -1 after `timeout` (then it is killed).
  int Wait(absl::Duration timeout);
  std::string Stdout() const { return ReadFileOr(out_); }
  std::string Stderr() const { return ReadFileOr(err_); }

 private:
  Child() = default;
  pid_t pid_ = -1;
  int status_ = -1;
  std::string out_, err_;
};

// The memtrace-collector binary on loopback, restartable on the same port and data dir.
class CollectorProcess {
 public:
  CollectorProcess(std::string data_dir, std::vector<std::string> flags, Env env = {});
  // Starts on `port` (0 = any; a restart reuses the previous port) and waits until it serves
  // (port file written and health check SERVING).
  absl::Status Start(int port = -1);
  void Kill9();
  // SIGTERM and wait; the exit code.
  int Stop();
  bool Running() const { return child_ != nullptr && child_->Running(); }
  int port() const { return port_; }
  std::string address() const;
  Child* child() { return child_.get(); }
  std::vector<std::string> args() const;
  // How Start() reaches the health service (a TLS collector needs the CA).
  void set_client_security(connect::ClientSecurity s) { client_security_ = std::move(s); }

 private:
  const std::string data_dir_;
  const std::vector<std::string> flags_;
  const Env env_;
  int port_ = 0;
  int starts_ = 0;
  connect::ClientSecurity client_security_;
  std::unique_ptr<Child> child_;
};

// grpc.health.v1.Health/Check("") answered SERVING within 2 s (no token needed: health is open).
bool Healthy(const std::string& address, const connect::ClientSecurity& security = {});

// Query helpers over the shared client channel.
absl::StatusOr<v1::ListJobsResponse> ListJobs(const std::string& address,
                                              const connect::ClientSecurity& security = {});
absl::StatusOr<v1::ListRanksResponse> ListRanks(const std::string& address, const std::string& job,
                                                const connect::ClientSecurity& security = {});
// Every stored event of (job, rank, attempt), in order, paging through ReadEvents.
absl::StatusOr<std::vector<Event>> ReadAllEvents(const std::string& address, const std::string& job,
                                                 uint32_t rank, uint32_t attempt = 0,
                                                 const connect::ClientSecurity& security = {});

// One Ingest/Stream call with raw message bytes (anything, valid or not): writes each message,
// half-closes, collects the acks' raw bytes, returns the call's status. Deadline 10 s.
grpc::Status RawIngest(const std::string& address, const std::vector<std::string>& messages,
                       std::vector<std::string>* acks = nullptr,
                       const connect::ClientSecurity& security = {});

// Key=value pairs of the last line starting with `prefix` ("RESULT") in `text`.
std::map<std::string, std::string> LastLine(const std::string& text, const std::string& prefix);
uint64_t U64(const std::map<std::string, std::string>& kv, const std::string& key);

// The environment of a reliability-agent streaming rank `rank` of `job` to `address`.
Env AgentEnv(const std::string& address, const std::string& job, int rank, int world_size);

inline constexpr char kCollectorBin[] = "collector/memtrace-collector";
inline constexpr char kAgentBin[] = "tests/reliability/reliability-agent";

}  // namespace memtrace::reliability

#endif  // MEMTRACE_TESTS_RELIABILITY_HARNESS_H_
