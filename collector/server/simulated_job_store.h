// Test data for the Analysis service and its benchmark: plays a simulated job
// (tools/sim/workload.h) straight into an EventStore, without gRPC or agents, so a large job can
// be built in seconds. Integration tests that want the real path use tools/sim's runner instead.
#ifndef MEMTRACE_COLLECTOR_SERVER_SIMULATED_JOB_STORE_H_
#define MEMTRACE_COLLECTOR_SERVER_SIMULATED_JOB_STORE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "collector/store/event_store.h"
#include "tools/sim/workload.h"

namespace memtrace::collector {

struct StoredJobStats {
  uint64_t events = 0;
  uint64_t batches = 0;
};

// The identity StoreSimulatedJob stores rank `rank` of `workload` under (host from
// sim::PlaceRank, launcher "simulator"): a test that connects as that producer again uses it.
v1::RankIdentity SimulatedRankIdentity(const std::string& job_id,
                                       const sim::WorkloadOptions& workload, int rank,
                                       uint32_t attempt = 0);

// Plays every rank of `workload` as job `job_id` (rank r = stream (job, r, attempt), host from
// sim::PlaceRank, launcher "simulator"), appending `batch_events` events per Append and closing
// each stream as complete. Each batch carries the clock estimate an agent would have measured on
// a host whose clock is off by sim::ClockSkewNs (none when the workload has no skew). Ranks are
// played one after the other; memory stays bounded by one batch. Errors of the workload options
// or the store are returned as they are.
absl::StatusOr<StoredJobStats> StoreSimulatedJob(EventStore& store, const std::string& job_id,
                                                 const sim::WorkloadOptions& workload,
                                                 size_t batch_events = 16384,
                                                 uint32_t attempt = 0);

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_SERVER_SIMULATED_JOB_STORE_H_
