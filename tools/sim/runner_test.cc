#include "tools/sim/runner.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/stream/fake_collector.h"
#include "collector/server/collector_server.h"
#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"

namespace memtrace::sim {
namespace {

TEST(SimulatedIdentityTest, SaysItIsASimulatorAndPlacesEightRanksPerNode) {
  SimulationOptions options;
  options.job_id = "sim-test";
  options.workload.ranks = 16;
  v1::RankIdentity id = SimulatedIdentity(options, 13);
  EXPECT_EQ(id.job_id(), "sim-test");
  EXPECT_EQ(id.rank(), 13);
  EXPECT_EQ(id.local_rank(), 5);
  EXPECT_EQ(id.world_size(), 16);
  EXPECT_EQ(id.local_world_size(), 8);
  EXPECT_EQ(id.group_rank(), 1);
  EXPECT_EQ(id.host(), "sim-node-1");
  EXPECT_EQ(id.device_index(), 5);
  EXPECT_EQ(id.launcher(), "simulator");
  EXPECT_TRUE(absl::StrContains(id.device_uuid(), "SIMULATED"));
  EXPECT_EQ(id.pid(), static_cast<uint32_t>(getpid()));
}

TEST(RunSimulationTest, RejectsBadOptionsBeforeConnecting) {
  SimulationOptions options;
  options.job_id = "sim-test";
  options.workload.leak_rank = 9;
  absl::StatusOr<std::vector<RankOutcome>> run = RunSimulation(options, [](const std::string&) {});
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  options.workload.leak_rank.reset();
  options.job_id = "";
  EXPECT_EQ(RunSimulation(options, [](const std::string&) {}).status(),
            absl::InvalidArgumentError("--job: empty job id"));
}

TEST(RunSimulationTest, SaysItCannotReachACollectorThatIsDown) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  close(fd);  // nothing listens on this port now

  SimulationOptions options;
  options.job_id = "sim-test";
  options.workload.ranks = 2;
  options.collector_address = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
  options.connect_timeout = absl::Milliseconds(500);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<RankOutcome>> run = RunSimulation(options, [](const std::string&) {});
  EXPECT_EQ(run.status(),
            absl::UnavailableError(absl::StrCat("cannot reach collector at ",
                                                options.collector_address, " within 500ms")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(RunSimulationTest, RefusesAnAddressWithoutAValidPortBeforeConnecting) {
  SimulationOptions options;
  options.job_id = "sim-test";
  for (const char* address : {"127.0.0.1:99999", "127.0.0.1", "127.0.0.1:-1"}) {
    options.collector_address = address;
    absl::StatusOr<std::vector<RankOutcome>> run =
        RunSimulation(options, [](const std::string&) {});
    EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_TRUE(
        absl::StartsWith(run.status().message(), absl::StrCat("--collector='", address, "': ")))
        << run.status();
  }
}

TEST(RunSimulationTest, ReportsTheCollectorsRefusalRatherThanUnreachable) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  collector.RefuseHellos(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                      "job sim-test already has 4 ranks, the limit"));
  SimulationOptions options;
  options.job_id = "sim-test";
  options.workload.ranks = 2;
  options.collector_address = collector.address();
  options.connect_timeout = absl::Seconds(5);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<RankOutcome>> run = RunSimulation(options, [](const std::string&) {});
  EXPECT_EQ(run.status(),
            absl::FailedPreconditionError(absl::StrCat(
                "collector at ", collector.address(),
                " refused the stream of rank 0 of job 'sim-test': RESOURCE_EXHAUSTED: job "
                "sim-test already has 4 ranks, the limit")));
  // A refusal is final: it is reported as soon as it arrives, not after connect_timeout.
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
}

// A collector whose store takes no writes (a full disk) answers every Hello with UNAVAILABLE,
// which the transport retries: the run said "cannot reach collector", not why.
TEST(RunSimulationTest, SaysWhyAReachableCollectorDidNotTakeTheStream) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  collector.RefuseHellos(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                      "writing to the store: No space left on device; the store "
                                      "takes no more writes until the collector restarts"));
  SimulationOptions options;
  options.job_id = "sim-full";
  options.workload.ranks = 1;
  options.collector_address = collector.address();
  options.connect_timeout = absl::Seconds(2);
  absl::StatusOr<std::vector<RankOutcome>> run = RunSimulation(options, [](const std::string&) {});
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StartsWith(run.status().message(),
                               absl::StrCat("collector at ", collector.address(),
                                            " did not take the stream of rank 0 within 2s: ")))
      << run.status();
  EXPECT_TRUE(absl::StrContains(run.status().message(), "No space left on device")) << run.status();
}

TEST(RunSimulationTest, SaysWhenRanksAdmittedBeforeARefusalStayInTheJob) {
  // A real collector that takes 2 ranks a job: rank 2 or 3 of 4 is refused after ranks 0 and 1
  // (streamed by this process, for good) were admitted, so the same --job fails again.
  collector::CollectorServerOptions server_options;
  server_options.listen = "127.0.0.1:0";
  server_options.store.dir = test_util::FreshDir("runner-rank-limit");
  server_options.ingest_limits.max_ranks_per_job = 2;
  absl::StatusOr<std::unique_ptr<collector::CollectorServer>> server =
      collector::CollectorServer::Start(server_options);
  ASSERT_TRUE(server.ok()) << server.status();
  SimulationOptions options;
  options.job_id = "sim-limited";
  options.workload.ranks = 4;
  options.workload.steps = 3;
  options.collector_address = (*server)->address();
  absl::StatusOr<std::vector<RankOutcome>> run = RunSimulation(options, [](const std::string&) {});
  EXPECT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(run.status().message(), "--max_ranks_per_job")) << run.status();
  EXPECT_TRUE(absl::StrContains(run.status().message(),
                                "; 2 other ranks were admitted first and stay in job "
                                "'sim-limited' without events: run again under another --job"))
      << run.status();
}

TEST(RunSimulationTest, SaysInWhichStepARankRanOutOfMemory) {
  // One rank holds the whole model's shards: 84 GiB resident on an 80 GiB device, out of memory
  // in step 0 with nothing planted. On a bigger device it is not.
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  SimulationOptions options;
  options.job_id = "sim-oom";
  options.workload.ranks = 1;
  options.workload.steps = 3;
  options.workload.events_per_rank = 2000;
  options.collector_address = collector.address();
  absl::StatusOr<std::vector<RankOutcome>> run = RunSimulation(options, [](const std::string&) {});
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->size(), 1u);
  EXPECT_EQ((*run)[0].oom_step, std::optional<int64_t>(0));

  options.job_id = "sim-fits";
  options.workload.device_total_bytes = uint64_t{256} << 30;
  run = RunSimulation(options, [](const std::string&) {});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ((*run)[0].oom_step, std::nullopt);
}

// Without step markers every event is in step 0: a planted OOM in step 9 was reported "in step
// 0 (planted)" right after "planted: OOM ... in step 9". The step is the simulated time's, on a
// rank whose clock runs ahead too.
TEST(RunSimulationTest, WithoutStepMarkersTheOomStepIsTheSimulatedTimes) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  SimulationOptions options;
  options.job_id = "sim-oom-no-markers";
  options.workload.ranks = 16;
  options.workload.steps = 20;
  options.workload.events_per_rank = 2000;
  options.workload.oom_rank = 12;
  options.workload.oom_step = 9;
  options.workload.step_markers = false;
  options.workload.clock_skew_per_node_ns = 3'000'000'000;
  options.collector_address = collector.address();
  absl::StatusOr<std::vector<RankOutcome>> run = RunSimulation(options, [](const std::string&) {});
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->size(), 16u);
  EXPECT_EQ((*run)[12].oom_step, std::optional<int64_t>(9));
}

}  // namespace
}  // namespace memtrace::sim
