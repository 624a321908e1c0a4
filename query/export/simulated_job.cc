#include "query/export/simulated_job.h"

#include "collector/server/server_test_util.h"
#include "gtest/gtest.h"

namespace memtrace::exporter::testing {

std::unique_ptr<collector::CollectorServer> SimulateJob(const std::string& name,
                                                        sim::SimulationOptions options) {
  std::unique_ptr<collector::CollectorServer> server = collector::testing::StartCollector(name);
  if (server == nullptr) return nullptr;
  options.collector_address = server->address();
  absl::StatusOr<std::vector<sim::RankOutcome>> outcomes =
      sim::RunSimulation(options, [](const std::string&) {});
  EXPECT_TRUE(outcomes.ok()) << outcomes.status();
  if (!outcomes.ok()) return nullptr;
  for (const sim::RankOutcome& outcome : *outcomes) {
    EXPECT_TRUE(outcome.status.ok()) << "rank " << outcome.rank << ": " << outcome.status;
    if (!outcome.status.ok()) return nullptr;
  }
  return server;
}

sim::SimulationOptions SmallJob(const std::string& job_id, int ranks, int steps,
                                uint64_t events) {
  sim::SimulationOptions options;
  options.job_id = job_id;
  options.workload.ranks = ranks;
  options.workload.steps = steps;
  options.workload.events_per_rank = events;
  options.drain_timeout = absl::Seconds(30);
  return options;
}

}  // namespace memtrace::exporter::testing
