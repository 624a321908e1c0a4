// The built libmemtrace_agent.so in a process with no GPU and no CUDA driver: InitializeInjection
// must return (twice), say why CUDA/CUPTI is unavailable, keep recording what it can (host
// samples) to the collector over real gRPC, and let the process exit within its shutdown bound.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/codec/batch_codec.h"
#include "proto/memtrace/v1/ingest.grpc.pb.h"

extern char** environ;

namespace memtrace {
namespace {

std::string Runfile(const std::string& path) {
  const char* dir = std::getenv("TEST_SRCDIR");
  return std::string(dir != nullptr ? dir : ".") + "/memtrace/" + path;
}

// A minimal Ingest service: answers the Hello, decodes every batch and acknowledges it.
class RecordingIngest final : public v1::Ingest::Service {
 public:
  grpc::Status Stream(grpc::ServerContext*,
                      grpc::ServerReaderWriter<v1::IngestAck, v1::IngestRequest>* stream) override {
    v1::IngestRequest req;
    while (stream->Read(&req)) {
      v1::IngestAck ack;
      if (req.has_hello()) {
        absl::MutexLock lock(&mu_);
        hellos_.push_back(req.hello().identity());
      } else if (req.has_batch()) {
        absl::StatusOr<DecodedBatch> batch = DecodeBatch(req.batch());
        if (!batch.ok()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad batch");
        absl::MutexLock lock(&mu_);
        for (const Event& e : batch->events) {
          events_.push_back(e);
          durable_ = std::max(durable_, e.seq);
        }
      }
      {
        absl::MutexLock lock(&mu_);
        ack.set_durable_seq(durable_);
      }
      stream->Write(ack);
    }
    return grpc::Status::OK;
  }

  std::vector<Event> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  std::vector<v1::RankIdentity> hellos() {
    absl::MutexLock lock(&mu_);
    return hellos_;
  }

 private:
  absl::Mutex mu_;
  uint64_t durable_ = 0;
  std::vector<Event> events_;
  std::vector<v1::RankIdentity> hellos_;
};

// A RecordingIngest served on a loopback port of the OS's choosing, shut down when destroyed.
struct LoopbackIngest {
  LoopbackIngest() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&ingest);
    server = builder.BuildAndStart();
  }
  ~LoopbackIngest() {
    if (server != nullptr) server->Shutdown();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }

  RecordingIngest ingest;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

struct HostRun {
  int exit_code = -1;
  std::string out;  // stdout + stderr
  absl::Duration elapsed;
};

// Runs agent_dlopen_host with `env` added to this process's environment.
HostRun RunHost(const std::map<std::string, std::string>& env, int stay_ms, bool sigterm = false) {
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) vars.emplace_back(*e);
  for (const auto& [k, v] : env) vars.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::string host = Runfile("agent/agent_dlopen_host");
  std::string lib = Runfile("agent/libmemtrace_agent.so");
  std::string ms = std::to_string(stay_ms);
  std::string term = "sigterm";
  char* argv[] = {host.data(), lib.data(), ms.data(), sigterm ? term.data() : nullptr, nullptr};

  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  HostRun run;
  const absl::Time start = absl::Now();
  pid_t pid = 0;
  int rc = posix_spawn(&pid, host.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    ADD_FAILURE() << "posix_spawn " << host << " failed: " << rc;
    return run;
  }
  // Read until EOF, with a hard deadline so a hanging agent fails the test instead of it.
  const absl::Time deadline = start + absl::Seconds(30);
  char buf[4096];
  while (true) {
    pollfd p{fds[0], POLLIN, 0};
    int left = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (left <= 0) {
      ADD_FAILURE() << "agent host still running after 30 s; killing it";
      kill(pid, SIGKILL);
      break;
    }
    if (poll(&p, 1, left) <= 0) continue;
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    run.out.append(buf, n);
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  run.elapsed = absl::Now() - start;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

TEST(AgentDlopenTest, WithoutCudaInitReturnsLogsAndStreamsHostSamples) {
  LoopbackIngest collector;
  ASSERT_NE(collector.server, nullptr);
  ASSERT_GT(collector.port, 0);
  RecordingIngest& ingest = collector.ingest;

  HostRun run = RunHost({{"MEMTRACE_COLLECTOR", collector.address()},
                         {"MEMTRACE_JOB_ID", "dlopen-test"},
                         {"RANK", "3"},
                         {"WORLD_SIZE", "4"},
                         {"MEMTRACE_SAMPLE_MS", "20"},
                         {"MEMTRACE_SHUTDOWN_TIMEOUT_MS", "5000"}},
                        /*stay_ms=*/300);
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("init=1,1"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("memtrace-agent: "), std::string::npos) << run.out;
  // No driver here: subscribing and enabling activities fail, and the log says so.
  EXPECT_NE(run.out.find("cuptiSubscribe_v2 failed"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("CUDA/CUPTI unavailable"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("device samples off"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("attached: job dlopen-test rank 3"), std::string::npos) << run.out;
  EXPECT_LT(run.elapsed, absl::Seconds(10)) << run.out;

  std::vector<v1::RankIdentity> hellos = ingest.hellos();
  ASSERT_FALSE(hellos.empty()) << run.out;
  EXPECT_EQ(hellos[0].job_id(), "dlopen-test");
  EXPECT_EQ(hellos[0].rank(), 3);
  int host_samples = 0;
  for (const Event& e : ingest.events()) {
    if (e.kind == EventKind::kHostSample) {
      ++host_samples;
      EXPECT_GT(e.bytes, 1u << 20);  // a live process has more than 1 MiB resident
    }
  }
  // ~300 ms at one sample per 20 ms, all delivered by the drain at exit.
  EXPECT_GE(host_samples, 5) << run.out;
}

// A launcher ends the worker by SIGTERM (torchrun ends the surviving ranks so when one fails),
// which skips atexit: the agent drains all the same, and the process still ends by SIGTERM.
TEST(AgentDlopenTest, SigtermDrainsThenEndsTheProcessBySigterm) {
  LoopbackIngest collector;
  ASSERT_NE(collector.server, nullptr);
  HostRun run = RunHost({{"MEMTRACE_COLLECTOR", collector.address()},
                         {"MEMTRACE_JOB_ID", "dlopen-sigterm"},
                         {"MEMTRACE_SAMPLE_MS", "20"},
                         {"MEMTRACE_SHUTDOWN_TIMEOUT_MS", "5000"}},
                        /*stay_ms=*/300, /*sigterm=*/true);
  EXPECT_EQ(run.exit_code, 128 + SIGTERM) << run.out;
  EXPECT_NE(run.out.find("memtrace-agent: transport: recorded "), std::string::npos) << run.out;
  int host_samples = 0;
  for (const Event& e : collector.ingest.events()) {
    host_samples += e.kind == EventKind::kHostSample;
  }
  EXPECT_GE(host_samples, 5) << run.out;  // delivered by the drain
  EXPECT_LT(run.elapsed, absl::Seconds(10)) << run.out;

  // MEMTRACE_SIGTERM_DRAIN=0: SIGTERM keeps its default action, and nothing is drained.
  LoopbackIngest untouched;
  ASSERT_NE(untouched.server, nullptr);
  HostRun plain = RunHost({{"MEMTRACE_COLLECTOR", untouched.address()},
                           {"MEMTRACE_JOB_ID", "dlopen-sigterm-off"},
                           {"MEMTRACE_SIGTERM_DRAIN", "0"},
                           {"MEMTRACE_SAMPLE_MS", "20"}},
                          /*stay_ms=*/300, /*sigterm=*/true);
  EXPECT_EQ(plain.exit_code, 128 + SIGTERM) << plain.out;
  EXPECT_EQ(plain.out.find("memtrace-agent: transport: recorded "), std::string::npos) << plain.out;
}

TEST(AgentDlopenTest, UnreachableCollectorDoesNotHoldUpExit) {
  HostRun run = RunHost({{"MEMTRACE_COLLECTOR", "127.0.0.1:1"},
                         {"MEMTRACE_JOB_ID", "dlopen-unreachable"},
                         {"MEMTRACE_SAMPLE_MS", "10"},
                         {"MEMTRACE_SHUTDOWN_TIMEOUT_MS", "300"}},
                        /*stay_ms=*/100);
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("init=1,1"), std::string::npos) << run.out;
  // Shutdown is bounded by its timeout + about 1 s.
  EXPECT_LT(run.elapsed, absl::Seconds(5)) << run.out;
}

TEST(AgentDlopenTest, DisabledAgentRecordsNothingAndStillReturnsOne) {
  HostRun run = RunHost({{"MEMTRACE_DISABLE", "1"}}, /*stay_ms=*/0);
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("init=1,1"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("memtrace-agent: disabled by MEMTRACE_DISABLE=1"), std::string::npos)
      << run.out;
}

TEST(AgentDlopenTest, NoJobIdFallsBackToALocalOne) {
  HostRun run = RunHost({{"MEMTRACE_COLLECTOR", "127.0.0.1:1"},
                         {"MEMTRACE_SHUTDOWN_TIMEOUT_MS", "100"},
                         {"MEMTRACE_SAMPLE_MS", "0"}},
                        /*stay_ms=*/0);
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("using MEMTRACE_JOB_ID=local-"), std::string::npos) << run.out;
}

TEST(AgentDlopenTest, AnEmptyJobIdFallsBackToALocalOneToo) {
  HostRun run = RunHost({{"MEMTRACE_COLLECTOR", "127.0.0.1:1"},
                         {"MEMTRACE_JOB_ID", ""},
                         {"MEMTRACE_SHUTDOWN_TIMEOUT_MS", "100"},
                         {"MEMTRACE_SAMPLE_MS", "0"}},
                        /*stay_ms=*/0);
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("using MEMTRACE_JOB_ID=local-"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace memtrace
