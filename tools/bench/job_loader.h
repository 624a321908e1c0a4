// Loads a simulated job (tools/sim) straight into an EventStore, without gRPC: each rank's events
// are cut into batches, encoded to the wire form and decoded again (exactly what the Ingest
// service hands the store), then appended. For query and storage data sets of many ranks, where
// the ingest path itself is not what is measured.
#ifndef MEMTRACE_TOOLS_BENCH_JOB_LOADER_H_
#define MEMTRACE_TOOLS_BENCH_JOB_LOADER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "collector/store/event_store.h"
#include "tools/sim/workload.h"

namespace memtrace::bench {

struct LoadedJob {
  std::string job_id;
  int ranks = 0;
  uint64_t events = 0;
  double seconds = 0;
};

// Plays every rank of `workload` on `threads` threads and appends it as stream (job_id, rank, 0)
// in batches of `batch_events`, closing each stream as complete. Thread-safe use of `store`.
absl::StatusOr<LoadedJob> LoadSimulatedJob(collector::EventStore& store, const std::string& job_id,
                                           const sim::WorkloadOptions& workload, int threads = 2,
                                           size_t batch_events = 4096);

}  // namespace memtrace::bench

#endif  // MEMTRACE_TOOLS_BENCH_JOB_LOADER_H_
