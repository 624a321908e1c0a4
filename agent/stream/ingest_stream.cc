#include "agent/stream/ingest_stream.h"

namespace memtrace {

void IngestStream::Open(grpc::ChannelInterface* channel, grpc::ByteBuffer hello) {
  // What the generated stub's async()->Stream does, with bytes instead of IngestRequest.
  const grpc::internal::RpcMethod method("/memtrace.v1.Ingest/Stream",
                                         grpc::internal::RpcMethod::BIDI_STREAMING);
  grpc::internal::ClientCallbackReaderWriterFactory<grpc::ByteBuffer, v1::IngestAck>::Create(
      channel, method, &context_, this);
  request_ = std::move(hello);
  AddHold();
  StartWrite(&request_);
  StartRead(&ack_);
  StartCall();
}

void IngestStream::Write(grpc::ByteBuffer request) {
  request_ = std::move(request);
  StartWrite(&request_);
}

void IngestStream::OnReadDone(bool ok) {
  if (!ok) {
    listener_->OnReadsDone();
    return;
  }
  listener_->OnAck(ack_);
  StartRead(&ack_);
}

void IngestStream::Close() {
  StartWritesDone();
  ReleaseHold();
}

void IngestStream::Abort() {
  context_.TryCancel();
  ReleaseHold();
}

void IngestStream::ReleaseHold() {
  if (!hold_released_.exchange(true)) RemoveHold();
}

}  // namespace memtrace
