// Settings of the agent's Transport (see transport.h). A separate header so that code which
// only builds options (agent/identity reads them from the environment) does not link gRPC.
#ifndef MEMTRACE_AGENT_STREAM_TRANSPORT_OPTIONS_H_
#define MEMTRACE_AGENT_STREAM_TRANSPORT_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "proto/memtrace/v1/events.pb.h"

namespace grpc {
class Channel;
class ChannelArguments;
}  // namespace grpc

namespace memtrace {

class BatchStore;

// Builds the channel to the collector from the target and the transport's own channel
// arguments (reconnect backoff), e.g. proto/connect's CreateCollectorChannel for TLS and
// a bearer token. Called once, in Transport::Start().
using ChannelFactory = std::function<std::shared_ptr<grpc::Channel>(
    const std::string& target, const grpc::ChannelArguments& args)>;

// TransportOptions::max_batch_events' default: the batch size of every agent not told otherwise
// (MEMTRACE_BATCH_EVENTS). A collector whose --max_batch_events is below it refuses their
// batches.
inline constexpr size_t kDefaultMaxBatchEvents = 16384;

struct TransportOptions {
  // host:port of the collector (MEMTRACE_COLLECTOR), or any gRPC target ("unix:/path").
  std::string collector_address = "127.0.0.1:7431";
  v1::RankIdentity identity;
  // Empty: a plaintext channel without credentials.
  ChannelFactory channel_factory;
  // Events the in-process queue holds before dropping (bounds the agent's memory: about 72
  // bytes an event).
  size_t queue_capacity = 1 << 20;
  // A batch is sent when it has this many events or is this old, whichever comes first.
  // At most 65536 (the collector's per-batch limit). Under load batches are full, and each
  // costs the collector one durable write and the agent one ack round trip: 16384 events
  // (about 230 KB on the wire) made ingest 1.3x faster than 4096 (docs/PERFORMANCE.md); a
  // lightly loaded agent sends smaller batches every max_batch_delay anyway.
  size_t max_batch_events = kDefaultMaxBatchEvents;
  absl::Duration max_batch_delay = absl::Milliseconds(100);
  // Reconnect backoff, doubling from initial to max, each wait jittered to 50..100%.
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(5);

  // Encoded batches kept until the collector acknowledges them are bounded by this many bytes;
  // beyond it the oldest are dropped and counted as a LOSS_REASON_SPOOL_FULL loss (the newest
  // batch is always kept, so the bound can be exceeded by one batch).
  uint64_t max_unacked_bytes = 64ull << 20;
  // A stream whose Hello is not answered, or that has unacknowledged batches and receives no
  // ack, for this long is abandoned and reopened.
  absl::Duration hello_timeout = absl::Seconds(10);
  absl::Duration ack_timeout = absl::Seconds(30);
  // Distinct strings Intern() accepts, at most three quarters of them sources (see
  // string_table.h); beyond it Intern() returns 0 ("none") and counts.
  size_t max_strings = 1 << 16;
  // Print each kind of failure once to stderr (prefix "memtrace-agent: ").
  bool log_failures = true;

  // The on-disk spool for long outages (MEMTRACE_SPOOL_DIR, MEMTRACE_SPOOL_MAX_BYTES; see
  // spool.h). With a directory, batches beyond max_unacked_bytes in memory spill there, up to
  // spool_max_bytes (0 = 1 GiB), before the oldest are dropped as LOSS_REASON_SPOOL_FULL.
  // Empty: memory only.
  std::string spool_dir;
  uint64_t spool_max_bytes = 0;

  // The clock the recorded events' ts_ns are on, in ns; read when each message is sent and its
  // ack received, to estimate the collector's clock against it (ClockSync). Empty: CLOCK_REALTIME,
  // the agent's event clock (agent/cupti/clock.h). The simulator and tests give skewed clocks.
  std::function<int64_t()> clock;
  // Whether to send that estimate with the batches. False for events stamped on a clock that is
  // not this process's at all: an importer replaying a trace recorded on another host, earlier.
  // Its offset from the collector says nothing of theirs, so the collector keeps them as stamped.
  bool send_clock_estimate = true;
  // Hello.new_attempt_if_taken: when the identity's (job, rank, attempt) was streamed by another
  // process that has gone (a restarted Ray actor, a rerun under the same job id), be stored as
  // the rank's next attempt rather than refused. False for an importer: another trace for the
  // same rank is refused.
  bool new_attempt_if_taken = true;

  // Makes the store unacknowledged batches wait in. Empty: MakeBatchStore (spool.h), memory or
  // the spool as configured above. Tests give stores that stall, as a slow disk would.
  std::function<std::unique_ptr<BatchStore>()> batch_store_factory;
};

}  // namespace memtrace

#endif  // MEMTRACE_AGENT_STREAM_TRANSPORT_OPTIONS_H_
