#include "collector/server/ingest_request.h"

#include <cstdint>

#include "grpcpp/support/proto_buffer_reader.h"
#include "proto/codec/batch_wire.h"

namespace memtrace::collector {

namespace {

// IngestRequest's fields: `oneof body { Hello hello = 1; EventBatch batch = 2; }`.
constexpr uint8_t kHelloTag = 1 << 3 | 2;
constexpr uint8_t kBatchTag = 2 << 3 | 2;

// When `bytes` is exactly one length-delimited field with a one-byte tag, its tag and body.
bool SingleField(absl::string_view bytes, uint8_t* tag, absl::string_view* body) {
  if (bytes.size() < 2) return false;
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const auto* end = p + bytes.size();
  *tag = *p++;
  uint64_t length = 0;
  // Protobuf reads lengths of at most 5 bytes.
  for (int shift = 0;; shift += 7) {
    if (p == end || shift == 35) return false;
    const uint8_t b = *p++;
    length |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (b < 0x80) break;
  }
  if (length != static_cast<uint64_t>(end - p)) return false;
  *body = absl::string_view(reinterpret_cast<const char*>(p), length);
  return true;
}

}  // namespace

void IngestMessage::Clear() {
  body_ = Body::kNone;
  hello_.Clear();
  slice_ = grpc::Slice();
  batch_bytes_ = absl::string_view();
  parsed_batch_.reset();
}

bool IngestMessage::Read(const grpc::ByteBuffer& buffer) {
  Clear();
  if (buffer.DumpToSingleSlice(&slice_).ok()) {
    const absl::string_view bytes(reinterpret_cast<const char*>(slice_.begin()), slice_.size());
    uint8_t tag = 0;
    absl::string_view body;
    if (SingleField(bytes, &tag, &body)) {
      if (tag == kBatchTag) {
        body_ = Body::kBatch;
        batch_bytes_ = body;
        return true;
      }
      if (tag == kHelloTag) {
        body_ = Body::kHello;
        return hello_.ParseFromArray(body.data(), static_cast<int>(body.size()));
      }
    }
  }
  // Anything else: protobuf decides.
  grpc::ByteBuffer copy(buffer);
  grpc::ProtoBufferReader reader(&copy);
  v1::IngestRequest request;
  if (!request.ParseFromZeroCopyStream(&reader)) return false;
  slice_ = grpc::Slice();
  switch (request.body_case()) {
    case v1::IngestRequest::kHello:
      body_ = Body::kHello;
      hello_ = std::move(*request.mutable_hello());
      break;
    case v1::IngestRequest::kBatch:
      body_ = Body::kBatch;
      parsed_batch_ = std::move(*request.mutable_batch());
      break;
    case v1::IngestRequest::BODY_NOT_SET:
      body_ = Body::kNone;
      break;
  }
  return true;
}

absl::Status IngestMessage::DecodeBatch(const BatchLimits& limits, DecodedBatch* out) const {
  if (parsed_batch_.has_value()) {
    absl::StatusOr<DecodedBatch> decoded = memtrace::DecodeBatch(*parsed_batch_, limits);
    if (!decoded.ok()) return decoded.status();
    *out = std::move(*decoded);
    return absl::OkStatus();
  }
  return DecodeBatchWire(batch_bytes_, limits, out);
}

bool IngestMessage::batch_parses() const {
  if (parsed_batch_.has_value()) return true;
  v1::EventBatch batch;
  return batch.ParseFromArray(batch_bytes_.data(), static_cast<int>(batch_bytes_.size()));
}

}  // namespace memtrace::collector
