// The memtrace.v1.Ingest service: one bidi stream per agent (job, rank, attempt).
//
// The first message must be a Hello with an identity whose job_id is non-empty
// (INVALID_ARGUMENT otherwise); it is answered with an IngestAck carrying the durable high-water
// mark the store already has for that identity. Each batch is validated (DecodeBatch with the
// configured limits) and appended; its ack is sent only after the store's write returned OK, so
// durable_seq in an ack is durable. A malformed batch ends the stream with INVALID_ARGUMENT or
// RESOURCE_EXHAUSTED and the reason, and nothing of it is stored; so does a message that does
// not parse (INVALID_ARGUMENT). A stream the client closes
// cleanly (WritesDone) marks the rank complete; a cancelled or broken one leaves it incomplete.
// Before the store sees a Hello, StreamAdmission (collector/security) may refuse it: too many
// ranks in the job (RESOURCE_EXHAUSTED) or a stream already produced by another process
// (ALREADY_EXISTS). A batch defining a string id above the string-table limit ends the stream
// with RESOURCE_EXHAUSTED.
#ifndef MEMTRACE_COLLECTOR_SERVER_INGEST_SERVICE_H_
#define MEMTRACE_COLLECTOR_SERVER_INGEST_SERVICE_H_

#include <atomic>

#include "collector/security/ingest_limits.h"
#include "collector/security/stream_admission.h"
#include "collector/store/event_store.h"
#include "grpcpp/impl/service_type.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/codec/batch_codec.h"
#include "proto/memtrace/v1/ingest.grpc.pb.h"

namespace memtrace::collector {

// Registered by hand (not through the generated v1::Ingest::Service) so that requests arrive as
// raw bytes and are parsed here: gRPC's sync API reports a message it cannot parse exactly like
// the client's clean end of stream, which would mark a rank complete on garbage. Parsed here,
// an unparseable message (truncated, invalid UTF-8 in a string, wrong lengths) ends the stream
// with INVALID_ARGUMENT naming the message number.
class IngestService final : public grpc::Service {
 public:
  // `store` is borrowed and must outlive the service. Thread-safe: gRPC runs one Stream() per
  // connected agent concurrently.
  IngestService(EventStore* store, const BatchLimits& limits,
                const security::IngestLimits& ingest_limits = {});

  grpc::Status Stream(grpc::ServerContext* context,
                      grpc::ServerReaderWriter<v1::IngestAck, grpc::ByteBuffer>* stream);

 private:
  EventStore* const store_;
  const BatchLimits limits_;
  const security::IngestLimits ingest_limits_;
  security::StreamAdmission admission_;
  // Whether a refusal was logged yet: the first of each is, so that an operator sees why agents
  // store nothing (they only log it themselves, on their own hosts).
  std::atomic<bool> logged_hello_refusal_{false};
  std::atomic<bool> logged_batch_refusal_{false};
};

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_SERVER_INGEST_SERVICE_H_
