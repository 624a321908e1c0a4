// The agent's transport: a bounded in-process queue, a batcher and a gRPC streaming client
// that delivers a rank's events to the collector, reconnecting with backoff.
//
// Record() never waits for the network: events go into a bounded queue that a background
// thread drains into batches, sends, and keeps until the collector acknowledges them as
// durable. After a reconnect everything unacknowledged is resent (the collector drops what it
// already has). When the queue is full, events are dropped and the loss is counted and sent
// as an EVENT_KIND_LOSS event.
#ifndef MEMTRACE_AGENT_STREAM_TRANSPORT_H_
#define MEMTRACE_AGENT_STREAM_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/stream/event_sink.h"
#include "proto/memtrace/v1/events.pb.h"

namespace memtrace {

struct TransportOptions {
  // host:port of the collector (MEMTRACE_COLLECTOR).
  std::string collector_address = "127.0.0.1:7431";
  v1::RankIdentity identity;
  // Events the in-process queue holds before dropping (bounds the agent's memory).
  size_t queue_capacity = 1 << 20;
  // A batch is sent when it has this many events or is this old, whichever comes first.
  size_t max_batch_events = 4096;
  absl::Duration max_batch_delay = absl::Milliseconds(100);
  // Reconnect backoff, doubling from initial to max.
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(5);
};

struct TransportStats {
  uint64_t events_recorded = 0;
  uint64_t events_lost = 0;
  uint64_t events_sent = 0;
  uint64_t durable_seq = 0;  // highest sequence number the collector acknowledged
  uint64_t reconnects = 0;
  bool connected = false;
};

class Transport : public EventSink {
 public:
  // Starts the background sender. Fails only on invalid options (e.g. empty address or job
  // id); an unreachable collector is not an error, the transport keeps retrying.
  static absl::StatusOr<std::unique_ptr<Transport>> Start(TransportOptions options);

  ~Transport() override;  // Shutdown(absl::Seconds(5)) if not yet shut down.

  void Record(const Event& event) override;
  uint32_t Intern(StringKind kind, std::string_view value) override;

  // Waits until every event recorded so far is durable at the collector, or `timeout` passes
  // (DEADLINE_EXCEEDED).
  absl::Status Flush(absl::Duration timeout);

  // Flushes for at most `drain_timeout`, closes the stream cleanly (so the collector marks the
  // rank complete) and stops the sender. Idempotent.
  absl::Status Shutdown(absl::Duration drain_timeout);

  TransportStats stats() const;

 private:
  class Impl;
  explicit Transport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace memtrace

#endif  // MEMTRACE_AGENT_STREAM_TRANSPORT_H_
