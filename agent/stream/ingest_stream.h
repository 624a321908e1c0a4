// One memtrace.v1.Ingest/Stream call on gRPC's callback API, so that the sender thread never
// blocks inside gRPC: it starts writes and closes, and learns of acks, write completions and
// the end of the call through a Listener. Requests go out as the serialized IngestRequest bytes
// the caller built (a sealed batch is framed, not re-serialized: see Transport).
//
// The call holds a gRPC "hold" from Open() until Close() or Abort(), so that the sender may
// start operations from its own thread: the call cannot finish (OnStreamDone) before the
// sender has said it will start no more. Exactly one of Close() / Abort() must be called,
// after which the object must outlive the Listener's OnStreamDone.
#ifndef MEMTRACE_AGENT_STREAM_INGEST_STREAM_H_
#define MEMTRACE_AGENT_STREAM_INGEST_STREAM_H_

#include <atomic>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_callback.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include "proto/memtrace/v1/ingest.pb.h"

namespace memtrace {

class IngestStream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, v1::IngestAck> {
 public:
  // Called on gRPC's threads; implementations must not block, nor call back into the stream.
  class Listener {
   public:
    virtual ~Listener() = default;
    virtual void OnAck(const v1::IngestAck& ack) = 0;
    virtual void OnWriteDone(bool ok) = 0;
    // Reads ended (the collector finished the call or the connection broke).
    virtual void OnReadsDone() = 0;
    virtual void OnStreamDone(const grpc::Status& status) = 0;
  };

  explicit IngestStream(Listener* listener) : listener_(listener) {}

  // Starts the call on `channel` and writes `hello` (a serialized IngestRequest) as its first
  // message (a write in flight until OnWriteDone). Call once.
  void Open(grpc::ChannelInterface* channel, grpc::ByteBuffer hello);

  // Writes `request`, a serialized IngestRequest. At most one write in flight.
  void Write(grpc::ByteBuffer request);

  // Half-closes (the collector then finishes the call and marks the rank complete) and drops
  // the hold. No write may be in flight.
  void Close();
  // Cancels the call and drops the hold.
  void Abort();
  // Cancels without dropping the hold (safe at any time, from any thread, e.g. to unblock a
  // Close() that the collector does not answer); Close() or Abort() is still due.
  void Cancel() { context_.TryCancel(); }

 private:
  void OnWriteDone(bool ok) override { listener_->OnWriteDone(ok); }
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override { listener_->OnStreamDone(status); }
  void ReleaseHold();

  Listener* const listener_;
  grpc::ClientContext context_;
  grpc::ByteBuffer request_;
  v1::IngestAck ack_;
  std::atomic<bool> hold_released_{false};
};

}  // namespace memtrace

#endif  // MEMTRACE_AGENT_STREAM_INGEST_STREAM_H_
