// Test helper: an in-process collector (loopback port 0, RocksDB under $TEST_TMPDIR) with a
// simulated job (tools/sim) played into it through one real agent Transport per rank.
#ifndef MEMTRACE_QUERY_EXPORT_SIMULATED_JOB_H_
#define MEMTRACE_QUERY_EXPORT_SIMULATED_JOB_H_

#include <memory>
#include <string>

#include "collector/server/collector_server.h"
#include "tools/sim/runner.h"

namespace memtrace::exporter::testing {

// Starts the collector (store `name`), runs `options` against it (collector_address is set
// here) and fails the current test unless every rank's events became durable. Returns null
// after a failure.
std::unique_ptr<collector::CollectorServer> SimulateJob(const std::string& name,
                                                        sim::SimulationOptions options);

// A small job: `ranks` ranks of `steps` steps with ~`events` events each, fast to simulate.
sim::SimulationOptions SmallJob(const std::string& job_id, int ranks, int steps,
                                uint64_t events = 4000);

}  // namespace memtrace::exporter::testing

#endif  // MEMTRACE_QUERY_EXPORT_SIMULATED_JOB_H_
