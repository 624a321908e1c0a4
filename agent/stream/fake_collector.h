// A small in-process implementation of memtrace.v1.Ingest for the transport's tests (the real
// collector lives in collector/). It "stores" in memory with the real collector's rules: the
// Hello is answered with the durable mark, events at or below it are ignored, a batch is acked
// after it is stored. It can hold acks, drop a stream mid-way, pretend it already has events,
// and stop and restart on the same port, keeping what it stored.
#ifndef MEMTRACE_AGENT_STREAM_FAKE_COLLECTOR_H_
#define MEMTRACE_AGENT_STREAM_FAKE_COLLECTOR_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/codec/event.h"
#include "proto/memtrace/v1/ingest.grpc.pb.h"

namespace memtrace {

class FakeCollector {
 public:
  // One batch as it arrived, resends included.
  struct ReceivedBatch {
    uint64_t first_seq = 0;
    uint64_t last_seq = 0;
    uint32_t count = 0;
    size_t strings = 0;
    int stream_index = 0;  // 1 for the first Hello of this identity, 2 for the next, ...
  };

  // What the fake holds for one (job, rank, attempt).
  struct Stream {
    v1::RankIdentity identity;
    std::vector<Event> events;              // stored, in seq order, each once
    std::map<uint32_t, StringDef> strings;  // every definition received
    uint64_t durable_seq = 0;
    // Stored events whose tag_id / source_id had no definition yet when stored.
    uint64_t undefined_string_uses = 0;
    // Events stored whose seq was not durable_seq + 1.
    uint64_t seq_gaps = 0;
    AgentCounterValues last_counters;
    std::optional<ClockEstimate> last_clock;  // of the latest batch that carried one
    std::vector<ReceivedBatch> received;
    int hellos = 0;
    int refused = 0;
    // The "authorization" metadata of the latest Hello's call ("" when none).
    std::string authorization;
    std::vector<uint64_t> hello_acks;  // durable seq each Hello was answered with
    int clean_closes = 0;  // the agent half-closed (WritesDone)
    int aborted = 0;       // cancelled, broken, or dropped by the fake
  };

  FakeCollector();
  ~FakeCollector();

  // Listens on 127.0.0.1:`port` (0 = the OS picks). Again after Stop() to restart on port().
  absl::Status Start(int port = 0);
  // Ends every stream at once and stops listening, like a crash; the stored data is kept.
  void Stop();

  int port() const;
  std::string address() const;

  // The next Hello is answered with durable seq `seq`, as if events 1..seq were stored.
  void PretendStoredThrough(uint64_t seq);
  // While held, Hellos (or acks of batches) wait: the batch is stored, the ack is not sent.
  void HoldHelloAcks(bool hold);
  void HoldAcks(bool hold);
  // The `n`-th batch read from now on ends its stream with UNAVAILABLE, unstored and unacked.
  void DropStreamAtBatch(int n);
  // While set, every batch ends its stream with UNAVAILABLE, unstored and unacked, after the
  // Hello was answered (as a collector whose disk is full does).
  void FailEveryBatch(bool fail);
  // While set (not OK), every Hello is answered by ending the call with this status, as the
  // real collector does for a bad token or a refused admission.
  void RefuseHellos(grpc::Status status);
  // Hellos are acknowledged as stored under `attempt` (HelloAck.attempt), as the real collector
  // answers one whose attempt a run that ended holds.
  void AckHellosAsAttempt(uint32_t attempt);

  // A copy of the only stream (tests use one identity); empty Stream when none.
  Stream Snapshot() const;
  int streams() const;
  // Polls `done` on a snapshot until it holds or `timeout` passes.
  bool WaitFor(const std::function<bool(const Stream&)>& done, absl::Duration timeout) const;

 private:
  class Service;

  grpc::Status Serve(grpc::ServerContext* context,
                     grpc::ServerReaderWriter<v1::IngestAck, v1::IngestRequest>* stream);
  // Waits (with `lock` on mu_) while `*held`, unless the call is cancelled or the server
  // stops. False if so.
  bool WaitWhileHeld(const bool* held, grpc::ServerContext* context,
                     std::unique_lock<std::mutex>& lock);

  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;

  // Guards everything below; std::mutex so that ThreadSanitizer sees it.
  mutable std::mutex mu_;
  std::condition_variable released_;
  std::map<std::string, Stream> streams_;
  uint64_t pretend_stored_ = 0;
  bool hold_hello_ = false;
  bool hold_acks_ = false;
  int drop_at_batch_ = 0;
  bool fail_every_batch_ = false;
  std::optional<uint32_t> ack_attempt_;
  grpc::Status refuse_;
  bool stopping_ = false;
};

}  // namespace memtrace

#endif  // MEMTRACE_AGENT_STREAM_FAKE_COLLECTOR_H_
