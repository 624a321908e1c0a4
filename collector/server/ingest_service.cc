#include "collector/server/ingest_service.h"

#include <cstdio>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collector/server/ingest_request.h"
#include "collector/server/status_util.h"
#include "grpcpp/support/method_handler.h"
#include "proto/codec/event.h"

namespace memtrace::collector {

namespace {

// `received_ns`: when the message this ack answers was read (the agents' clock estimate).
// `attempt`: on the Hello's ack, the attempt the stream is stored as; `subprocess_of`, the
// launcher rank it is stored as a subprocess of.
bool SendAck(grpc::ServerReaderWriter<v1::IngestAck, grpc::ByteBuffer>* stream,
             uint64_t durable_seq, int64_t received_ns,
             std::optional<uint32_t> attempt = std::nullopt,
             std::optional<int32_t> subprocess_of = std::nullopt, bool started_the_rank = false) {
  v1::IngestAck ack;
  ack.set_durable_seq(durable_seq);
  if (attempt.has_value()) ack.set_attempt(*attempt);
  if (subprocess_of.has_value()) ack.set_subprocess_of_rank(*subprocess_of);
  ack.set_started_the_rank(started_the_rank);
  ack.set_collector_receive_ns(received_ns);
  ack.set_collector_time_ns(RealtimeNanos());
  return stream->Write(ack);
}

// Closes the store's side of a stream exactly once, whichever way the RPC ends.
class OpenStreamGuard {
 public:
  OpenStreamGuard(EventStore* store, const OpenedStream& opened)
      : store_(store), key_(opened.key), connection_(opened.connection) {}
  ~OpenStreamGuard() { Close(false).IgnoreError(); }
  OpenStreamGuard(const OpenStreamGuard&) = delete;
  OpenStreamGuard& operator=(const OpenStreamGuard&) = delete;

  absl::Status Close(bool complete) {
    if (closed_) return absl::OkStatus();
    closed_ = true;
    absl::Status s = store_->CloseStream(key_, complete, connection_);
    if (!s.ok()) {
      // Nothing acked is lost (the blocks are written); only the completion flag or the
      // closing checkpoint is missing, and reopening rebuilds from the blocks.
      std::fprintf(stderr, "memtrace-collector: closing stream: %s\n", s.ToString().c_str());
    }
    return s;
  }

 private:
  EventStore* store_;
  StreamKey key_;
  uint64_t connection_;
  bool closed_ = false;
};

// Reads the next request. kEnd: no more messages (the client half-closed, or the call was
// cancelled or broken); kGarbage: a message that is not an IngestRequest.
enum class ReadResult { kOk, kEnd, kGarbage };
ReadResult ReadRequest(grpc::ServerReaderWriter<v1::IngestAck, grpc::ByteBuffer>* stream,
                       IngestMessage* request, int64_t* received_ns) {
  grpc::ByteBuffer buffer;
  if (!stream->Read(&buffer)) return ReadResult::kEnd;
  *received_ns = RealtimeNanos();
  return request->Read(buffer) ? ReadResult::kOk : ReadResult::kGarbage;
}

// Prints "memtrace-collector: <line> (later ones are not logged)" the first time `logged` is set.
void LogFirst(std::atomic<bool>& logged, const std::string& line) {
  if (logged.exchange(true)) return;
  std::fprintf(stderr, "memtrace-collector: %s (later refusals of this kind are not logged)\n",
               line.c_str());
}

grpc::Status Unparseable(int message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      absl::StrCat("message ", message,
                                   " of the stream is not a valid memtrace.v1.IngestRequest "
                                   "(truncated, wrong field types or lengths, or invalid UTF-8 "
                                   "in a string); nothing of it was stored"));
}

}  // namespace

IngestService::IngestService(EventStore* store, const BatchLimits& limits,
                             const security::IngestLimits& ingest_limits)
    : store_(store),
      limits_(limits),
      ingest_limits_(ingest_limits),
      admission_(
          ingest_limits.max_ranks_per_job,
          [store](absl::string_view job_id) { return store->ListRanks(job_id); },
          ingest_limits.max_subprocesses_per_rank) {
  AddMethod(new grpc::internal::RpcServiceMethod(  // owned by grpc::Service
      "/memtrace.v1.Ingest/Stream", grpc::internal::RpcMethod::BIDI_STREAMING,
      new grpc::internal::BidiStreamingHandler<IngestService, grpc::ByteBuffer, v1::IngestAck>(
          [](IngestService* service, grpc::ServerContext* context,
             grpc::ServerReaderWriter<v1::IngestAck, grpc::ByteBuffer>* stream) {
            return service->Stream(context, stream);
          },
          this)));
}

grpc::Status IngestService::Stream(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::IngestAck, grpc::ByteBuffer>* stream) {
  IngestMessage request;
  int64_t received_ns = 0;
  int message = 1;
  switch (ReadRequest(stream, &request, &received_ns)) {
    case ReadResult::kEnd:
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "stream ended before its Hello");
    case ReadResult::kGarbage:
      return Unparseable(message);
    case ReadResult::kOk:
      break;
  }
  if (request.body() != IngestMessage::Body::kHello) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first message of a stream must be a Hello with the rank identity");
  }
  if (!request.hello().has_identity()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "Hello has no identity");
  }
  v1::RankIdentity identity = request.hello().identity();
  identity.clear_subprocess_of_rank();  // the collector's to set (admission, below)
  identity.clear_started_the_rank();
  // Before admission, which counts the rank against --max_ranks_per_job for good: an identity
  // the store refuses anyway must not use up a job's ranks.
  if (absl::Status valid = EventStore::CheckIdentity(identity); !valid.ok()) {
    return ToGrpcStatus(valid, "Hello ");
  }
  // Held until the stream ends: while it is, the rank and attempt count as connected.
  absl::StatusOr<security::AdmissionTicket> admitted =
      admission_.Admit(identity, request.hello().new_attempt_if_taken());
  if (!admitted.ok()) {
    LogFirst(logged_hello_refusal_,
             absl::StrCat("refused a Hello: ", admitted.status().ToString()));
    return ToGrpcStatus(admitted.status(), "Hello refused: ");
  }
  if (!admitted->reassigned().empty()) {
    std::fprintf(stderr, "memtrace-collector: %s\n", admitted->reassigned().c_str());
  }
  identity.set_attempt(admitted->attempt());
  if (std::optional<int32_t> parent_rank = admitted->subprocess_of()) {
    identity.set_rank(-1);
    identity.set_subprocess_of_rank(*parent_rank);
    identity.set_started_the_rank(admitted->started_the_rank());
  }
  absl::StatusOr<OpenedStream> opened = store_->OpenStream(identity);
  if (!opened.ok()) return ToGrpcStatus(opened.status());
  OpenStreamGuard guard(store_, *opened);
  if (!SendAck(stream, opened->durable_seq, received_ns, identity.attempt(),
               admitted->subprocess_of(), admitted->started_the_rank())) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "client went away before the Hello ack");
  }
  const std::string who =
      absl::StrCat("job \"", identity.job_id(), "\" rank ", opened->key.rank, " attempt ",
                   opened->key.attempt);

  bool ack_failed = false;
  ReadResult read;
  DecodedBatch batch;  // reused: a stream's batches are alike in size
  while ((read = ReadRequest(stream, &request, &received_ns)) == ReadResult::kOk) {
    ++message;
    if (request.body() != IngestMessage::Body::kBatch) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          request.body() == IngestMessage::Body::kHello
                              ? "a second Hello on one stream"
                              : "an IngestRequest with neither hello nor batch");
    }
    if (absl::Status s = request.DecodeBatch(limits_, &batch); !s.ok()) {
      if (!request.batch_parses()) return Unparseable(message);
      LogFirst(logged_batch_refusal_,
               absl::StrCat("refused a batch for ", who, ": ", s.ToString()));
      return ToGrpcStatus(s, absl::StrCat("batch for ", who, " rejected: "));
    }
    if (absl::Status s = security::CheckIds(batch, ingest_limits_); !s.ok()) {
      LogFirst(logged_batch_refusal_,
               absl::StrCat("refused a batch for ", who, ": ", s.ToString()));
      return ToGrpcStatus(s, absl::StrCat("batch for ", who, " rejected: "));
    }
    absl::StatusOr<AppendResult> appended =
        store_->Append(opened->key, batch, request.batch_bytes());
    if (!appended.ok()) {
      // Not the agent's fault: it keeps the batch and resends after reconnecting.
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrCat("storing a batch for ", who, ": ",
                                       appended.status().ToString()));
    }
    if (!SendAck(stream, appended->durable_seq, received_ns)) {
      ack_failed = true;
      break;
    }
  }
  if (read == ReadResult::kGarbage) return Unparseable(message + 1);
  // Read() fails both on a clean WritesDone and on cancellation; only the former is complete.
  const bool complete = !ack_failed && !context->IsCancelled();
  guard.Close(complete).IgnoreError();  // logged; the stream itself went fine
  return grpc::Status::OK;
}

}  // namespace memtrace::collector
