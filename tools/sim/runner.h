// SIMULATOR wiring: plays every rank of a simulated job (tools/sim/workload.h) through its own
// real agent Transport into a real collector, one thread per rank.
#ifndef MEMTRACE_TOOLS_SIM_RUNNER_H_
#define MEMTRACE_TOOLS_SIM_RUNNER_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/stream/transport.h"
#include "proto/memtrace/v1/events.pb.h"
#include "tools/sim/workload.h"

namespace memtrace::sim {

struct SimulationOptions {
  WorkloadOptions workload;
  std::string job_id;
  std::string collector_address = "127.0.0.1:7431";
  // 0: as fast as the transports take events; 1: simulated time = wall time; 10: ten times
  // faster than real time.
  double speed = 0;
  // How long to wait for the collector to answer each rank's stream first.
  absl::Duration connect_timeout = absl::Seconds(10);
  // How long each rank waits at the end for its events to become durable, and, once per run,
  // for a backlog that does not shrink mid-run (a collector gone away) before it stops waiting
  // and lets the transport drop what does not fit as lost.
  absl::Duration drain_timeout = absl::Seconds(60);
  // The attempt every rank reports (a restarted job's later run, for tests of attempts).
  uint32_t attempt = 0;
  // TLS and the bearer token of every rank's channel; empty: plaintext without a token.
  // memtrace-sim gives the environment's (MEMTRACE_TOKEN[_FILE], MEMTRACE_TLS_CA...).
  ChannelFactory channel_factory;
};

// The identity a simulated rank reports: launcher "simulator", host "sim-node-<k>", device =
// local rank, a device UUID that says it is simulated, this process's pid.
v1::RankIdentity SimulatedIdentity(const SimulationOptions& options, int rank);

struct RankOutcome {
  int rank = 0;
  TransportStats stats;
  // OK when every event recorded was acknowledged as durable and the stream closed cleanly.
  absl::Status status;
  // The step in which the rank ran out of simulated device memory (planted or not), if it did.
  std::optional<int64_t> oom_step;
};

// Runs the simulation; `log` receives progress lines (without the simulator prefix). Returns
// INVALID_ARGUMENT for bad options, UNAVAILABLE when no rank's stream reaches the collector
// within connect_timeout (nothing is played then), otherwise one outcome per rank.
absl::StatusOr<std::vector<RankOutcome>> RunSimulation(
    const SimulationOptions& options, const std::function<void(const std::string&)>& log);

}  // namespace memtrace::sim

#endif  // MEMTRACE_TOOLS_SIM_RUNNER_H_
