// One message of an Ingest stream, read from the raw bytes gRPC delivers. The usual message, a
// Hello or a batch alone, is split without protobuf's parser and the batch stays bytes for
// DecodeBatchWire (proto/codec/batch_wire.h): parsing batches into protobuf messages was the
// collector's largest cost per event. Any other shape (several fields, unknown fields) is parsed
// by protobuf, so what is accepted and how it reads is exactly IngestRequest's.
#ifndef MEMTRACE_COLLECTOR_SERVER_INGEST_REQUEST_H_
#define MEMTRACE_COLLECTOR_SERVER_INGEST_REQUEST_H_

#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "proto/codec/batch_codec.h"
#include "proto/memtrace/v1/ingest.pb.h"

namespace memtrace::collector {

class IngestMessage {
 public:
  enum class Body { kNone, kHello, kBatch };

  // Reads `buffer`; false when the bytes are not an IngestRequest (truncated, wrong wire types,
  // invalid UTF-8 in the Hello). A batch's own bytes are checked by DecodeBatch() only.
  bool Read(const grpc::ByteBuffer& buffer);

  Body body() const { return body_; }
  // For Body::kHello.
  const v1::Hello& hello() const { return hello_; }

  // For Body::kBatch: the batch decoded and validated (DecodeBatchWire / DecodeBatch) into
  // `out`, whose memory is reused. On an error, batch_parses() says whether the batch's bytes
  // were an EventBatch at all.
  absl::Status DecodeBatch(const BatchLimits& limits, DecodedBatch* out) const;
  bool batch_parses() const;
  // The batch's own bytes when the message was split by hand (empty otherwise); valid until
  // the next Read.
  absl::string_view batch_bytes() const { return batch_bytes_; }

 private:
  void Clear();

  Body body_ = Body::kNone;
  v1::Hello hello_;
  grpc::Slice slice_;              // owns the bytes batch_bytes_ points into
  absl::string_view batch_bytes_;  // the batch, when split without protobuf
  std::optional<v1::EventBatch> parsed_batch_;  // the batch, when protobuf parsed the message
};

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_SERVER_INGEST_REQUEST_H_
