// The agent's transport: a bounded in-process queue, a batcher and a gRPC streaming client
// that delivers a rank's events to the collector, reconnecting with backoff.
//
// Record() never waits for the network: events go into a bounded queue that a background
// thread drains into batches, sends, and keeps until the collector acknowledges them as
// durable. After a reconnect everything unacknowledged is resent (the collector drops what it
// already has). When the queue is full, events are dropped and the loss is counted and sent
// as an EVENT_KIND_LOSS event.
//
// Losses, each reported by one EVENT_KIND_LOSS event (aux = events lost, memory_kind = reason)
// placed in the stream after the last event kept before the loss:
//   LOSS_REASON_QUEUE_FULL: Record() found the queue full (the sender could not keep up).
//   LOSS_REASON_SPOOL_FULL: unacknowledged batches exceeded max_unacked_bytes (a long
//     outage) and the oldest were dropped. Counted as lost even if the collector had in fact
//     stored them before the ack could arrive: the count is an upper bound.
// Events dropped from the queue never receive a sequence number; batches dropped for
// SPOOL_FULL leave a gap in the sequence, which their loss marker accounts for.
#ifndef MEMTRACE_AGENT_STREAM_TRANSPORT_H_
#define MEMTRACE_AGENT_STREAM_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/stream/event_sink.h"
#include "agent/stream/transport_options.h"
#include "proto/codec/event.h"
#include "proto/memtrace/v1/events.pb.h"

namespace memtrace {

struct TransportStats {
  // Events handed to Record(), kept or not (loss markers are not counted).
  uint64_t events_recorded = 0;
  // Events dropped, for any reason (queue_full + spool_full + collector_lost + recorded after
  // shutdown).
  uint64_t events_lost = 0;
  // Events written to a stream; resends count again.
  uint64_t events_sent = 0;
  uint64_t durable_seq = 0;  // highest sequence number the collector acknowledged
  // What the collector already held for this identity when the first stream opened (its first
  // Hello ack): events a restarted producer with the same identity, or a trace imported again,
  // does not send twice. 0 until connected.
  uint64_t durable_at_first_hello = 0;
  // The attempt the collector stores the stream as (its Hello ack): the identity's own, or the
  // next free one (TransportOptions::new_attempt_if_taken). nullopt before the first ack, or from
  // a collector too old to say.
  std::optional<uint32_t> stored_attempt;
  // The launcher rank the collector stores this process as a subprocess of (its Hello ack,
  // RankIdentity.subprocess_of_rank): the process inherited the RANK its parent streams.
  std::optional<int32_t> stored_subprocess_of;
  // Streams opened (Hello answered) after the first one.
  uint64_t reconnects = 0;
  bool connected = false;

  uint64_t events_lost_queue_full = 0;
  uint64_t events_lost_spool_full = 0;
  // Acknowledged events a collector no longer had when the stream reopened (its data directory
  // replaced, or a machine crash under --durability async): dropped here once acknowledged, they
  // cannot be resent.
  uint64_t events_lost_collector = 0;
  uint64_t last_seq = 0;         // highest sequence number assigned
  uint64_t batches_sent = 0;     // batch writes, resends included
  uint64_t batches_resent = 0;   // writes of a batch already written on an earlier stream
  uint64_t unacked_batches = 0;  // batches kept for a possible resend
  uint64_t unacked_bytes = 0;
  uint64_t stream_errors = 0;  // streams that ended other than by Shutdown
  // How the last of those ended (the collector's status, e.g. why it refused the Hello); empty
  // when none did.
  std::string last_stream_error;
  // Its status code (as absl's; the same numbers as gRPC's), kOk when none ended so.
  absl::StatusCode last_stream_code = absl::StatusCode::kOk;
  // Whether it ended as the collector's refusal of the Hello (a bad token, a rank another process
  // streams, too many ranks): retrying will not help until something changes.
  bool last_stream_refused = false;
  uint64_t strings_interned = 0;
  uint64_t strings_refused = 0;  // Intern() calls beyond max_strings
  // The current estimate of the collector's clock against TransportOptions::clock (sent with
  // every batch), and how many round-trip samples it was chosen from.
  std::optional<ClockEstimate> clock;
  uint64_t clock_samples = 0;
};

class Transport : public EventSink {
 public:
  // Starts the background sender. Fails only on invalid options (e.g. empty address or job
  // id); an unreachable collector is not an error, the transport keeps retrying.
  static absl::StatusOr<std::unique_ptr<Transport>> Start(TransportOptions options);

  ~Transport() override;  // Shutdown(absl::Seconds(5)) if not yet shut down.

  // Thread-safe; a short critical section, no allocation, never waits for the network.
  // After Shutdown() events are dropped and counted as lost.
  void Record(const Event& event) override;
  // Record() for each event, taking the queue's lock once per 256 events. Thread-safe.
  void RecordMany(absl::Span<const Event> events) override;
  // Counted in the queue's pending losses (EventQueue::AddLoss), never dropped, even when the
  // queue is full; the marker takes the next seq once there is room. Thread-safe.
  void RecordLoss(uint32_t reason, uint64_t n, int64_t ts_ns) override;
  // Thread-safe. Values longer than 4096 bytes are cut, invalid UTF-8 bytes become '?'
  // (the wire carries proto3 strings). Returns 0 once max_strings distinct strings exist.
  uint32_t Intern(StringKind kind, std::string_view value) override;

  // Adds to the cupti_records_dropped counter sent with each batch. Thread-safe.
  void CountCuptiRecordsDropped(uint64_t n);

  // Waits until every event recorded so far is durable at the collector, or `timeout` passes
  // (DEADLINE_EXCEEDED).
  absl::Status Flush(absl::Duration timeout);

  // Flushes for at most `drain_timeout`, closes the stream cleanly (so the collector marks the
  // rank complete) and stops the sender. Idempotent: later calls return the first result.
  // Returns within about drain_timeout + 2 s, even when the collector is unreachable or the
  // sender is stuck in a spool read or write (it is then left running: DEADLINE_EXCEEDED).
  absl::Status Shutdown(absl::Duration drain_timeout);

  TransportStats stats() const;

 private:
  class Impl;
  explicit Transport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace memtrace

#endif  // MEMTRACE_AGENT_STREAM_TRANSPORT_H_
