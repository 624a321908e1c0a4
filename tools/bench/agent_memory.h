// The agent's own memory bound, measured: a Transport with its default (or given) queue and
// unacknowledged-batch limits, recording as fast as it can to a collector that accepts batches but
// never acknowledges them (so the unacked store fills to its bound and the queue to capacity),
// and the process's resident memory before and at its peak. Run it in a fresh process (the
// bench re-executes itself) so that nothing else is in the peak.
#ifndef MEMTRACE_TOOLS_BENCH_AGENT_MEMORY_H_
#define MEMTRACE_TOOLS_BENCH_AGENT_MEMORY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/stream/transport_options.h"

namespace memtrace::bench {

// An Ingest server on loopback that answers the Hello and then reads every batch without ever
// acknowledging one.
class SilentCollector {
 public:
  static absl::StatusOr<std::unique_ptr<SilentCollector>> Start();
  ~SilentCollector();
  std::string address() const;
  uint64_t batches_received() const;

 private:
  struct Impl;
  explicit SilentCollector(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct AgentMemoryResult {
  uint64_t queue_capacity = 0;
  uint64_t event_bytes = 0;        // sizeof(Event)
  uint64_t max_unacked_bytes = 0;
  uint64_t rss_before = 0;         // before Transport::Start
  uint64_t rss_started = 0;        // right after it (the queue is allocated up front)
  uint64_t rss_peak = 0;           // VmHWM at the end
  uint64_t anon_before = 0;        // RssAnon before Transport::Start
  uint64_t anon_peak = 0;          // highest RssAnon sampled while recording
  uint64_t unacked_bytes = 0;      // the transport's count at the end
  uint64_t lost_queue_full = 0;
  uint64_t lost_spool_full = 0;
  uint64_t events_recorded = 0;
  double seconds = 0;
};

// Records into a Transport pointed at `collector_address` (a SilentCollector) for at least
// `at_least` and until the unacked store has overflowed (spool-full losses seen), or `limit`
// passes. Whether the queue overflows too depends on whether the sender keeps up.
absl::StatusOr<AgentMemoryResult> MeasureAgentMemory(const std::string& collector_address,
                                                     TransportOptions options,
                                                     absl::Duration at_least,
                                                     absl::Duration limit);

// One line "AGENT_MEMORY key=value ..." and back, for the parent process.
std::string FormatResult(const AgentMemoryResult& r);
absl::StatusOr<AgentMemoryResult> ParseResult(absl::string_view output);

}  // namespace memtrace::bench

#endif  // MEMTRACE_TOOLS_BENCH_AGENT_MEMORY_H_
