#include "agent/stream/ingest_stream.h"

namespace memtrace {

void IngestStream::Open(v1::Ingest::StubInterface* stub, const v1::IngestRequest& hello) {
  stub->async()->Stream(&context_, this);
  request_ = hello;
  AddHold();
  StartWrite(&request_);
  StartRead(&ack_);
  StartCall();
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
