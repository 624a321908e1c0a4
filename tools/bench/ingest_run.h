// Sustained ingest: N agent Transports (one per simulated rank, each its own gRPC stream over
// loopback) into one in-process collector with a real RocksDB store, fed from event templates by
// a few producer threads that keep each stream's not-yet-durable events under a window (the
// backpressure a real agent gets from its bounded queue, without dropping). The rate counts only
// events the collector acknowledged as durable inside the measurement window.
#ifndef MEMTRACE_TOOLS_BENCH_INGEST_RUN_H_
#define MEMTRACE_TOOLS_BENCH_INGEST_RUN_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "agent/stream/transport_options.h"
#include "collector/store/event_store.h"
#include "tools/bench/event_template.h"

namespace memtrace::bench {

struct IngestOptions {
  std::string data_dir;  // emptied first, left with the store afterwards
  std::string job_id = "ingest-bench";
  int streams = 8;
  int producers = 2;
  absl::Duration warmup = absl::Seconds(2);
  absl::Duration measure = absl::Seconds(30);
  collector::Durability durability = collector::Durability::kSync;
  size_t queue_capacity = 1 << 17;    // per Transport
  uint64_t window_events = 1 << 16;   // per stream: recorded but not yet durable
  size_t batch_events = TransportOptions().max_batch_events;
  absl::Duration drain_timeout = absl::Seconds(120);
};

struct IngestResult {
  int streams = 0;
  uint64_t events_in_window = 0;  // acknowledged as durable inside the window
  double window_seconds = 0;
  double events_per_second = 0;
  double cpu_seconds = 0;  // this process (producers, agents, collector) inside the window
  // The same by role, from the threads' names: "producers" (the bench threads standing in for
  // the application), "agent senders" (memtrace-send), "collector handlers" (gRPC's sync server
  // threads: decode, apply, encode, write), "rocksdb background" (flush, compaction), "gRPC
  // internals" (both ends: pollers, executors) and "other".
  std::map<std::string, double> cpu_seconds_by_role;
  uint64_t events_recorded = 0;
  uint64_t events_lost = 0;
  uint64_t events_stored = 0;  // the collector's count after draining
  uint64_t batches_sent = 0;
  double drain_seconds = 0;
  uint64_t disk_bytes = 0;
};

// Runs one measurement. `templates` (at least one) are assigned to streams round-robin. Fails
// when the collector cannot start, a template's string ids cannot be reproduced, or the streams
// do not drain in time.
absl::StatusOr<IngestResult> RunIngest(const IngestOptions& options,
                                       absl::Span<const EventTemplate> templates);

}  // namespace memtrace::bench

#endif  // MEMTRACE_TOOLS_BENCH_INGEST_RUN_H_
