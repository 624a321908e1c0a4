#include "agent/stream/fake_collector.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/codec/batch_codec.h"
#include "proto/codec/event.h"

namespace memtrace {

class FakeCollector::Service final : public v1::Ingest::Service {
 public:
  explicit Service(FakeCollector* owner) : owner_(owner) {}
  grpc::Status Stream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::IngestAck, v1::IngestRequest>* stream) override {
    return owner_->Serve(context, stream);
  }

 private:
  FakeCollector* owner_;
};

FakeCollector::FakeCollector() = default;

FakeCollector::~FakeCollector() { Stop(); }

absl::Status FakeCollector::Start(int port) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    stopping_ = false;
  }
  service_ = std::make_unique<Service>(this);  // one per server: restarts get a fresh one
  grpc::ServerBuilder builder;
  int chosen = 0;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(),
                           &chosen);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || chosen == 0) {
    return absl::UnavailableError(absl::StrCat("fake collector cannot listen on port ", port));
  }
  port_ = chosen;
  return absl::OkStatus();
}

void FakeCollector::Stop() {
  if (server_ == nullptr) return;
  {
    std::unique_lock<std::mutex> lock(mu_);
    stopping_ = true;
  }
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  server_.reset();
}

int FakeCollector::port() const { return port_; }

std::string FakeCollector::address() const { return absl::StrCat("127.0.0.1:", port_); }

void FakeCollector::PretendStoredThrough(uint64_t seq) {
  std::unique_lock<std::mutex> lock(mu_);
  pretend_stored_ = seq;
}

void FakeCollector::HoldHelloAcks(bool hold) {
  std::unique_lock<std::mutex> lock(mu_);
  hold_hello_ = hold;
  released_.notify_all();
}

void FakeCollector::HoldAcks(bool hold) {
  std::unique_lock<std::mutex> lock(mu_);
  hold_acks_ = hold;
  released_.notify_all();
}

void FakeCollector::DropStreamAtBatch(int n) {
  std::unique_lock<std::mutex> lock(mu_);
  drop_at_batch_ = n;
}

void FakeCollector::FailEveryBatch(bool fail) {
  std::unique_lock<std::mutex> lock(mu_);
  fail_every_batch_ = fail;
}

void FakeCollector::RefuseHellos(grpc::Status status) {
  std::unique_lock<std::mutex> lock(mu_);
  refuse_ = std::move(status);
}

void FakeCollector::AckHellosAsAttempt(uint32_t attempt) {
  std::unique_lock<std::mutex> lock(mu_);
  ack_attempt_ = attempt;
}

FakeCollector::Stream FakeCollector::Snapshot() const {
  std::unique_lock<std::mutex> lock(mu_);
  if (streams_.empty()) return Stream();
  return streams_.begin()->second;
}

int FakeCollector::streams() const {
  std::unique_lock<std::mutex> lock(mu_);
  return static_cast<int>(streams_.size());
}

bool FakeCollector::WaitFor(const std::function<bool(const Stream&)>& done,
                            absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (done(Snapshot())) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
}

bool FakeCollector::WaitWhileHeld(const bool* held, grpc::ServerContext* context,
                                  std::unique_lock<std::mutex>& lock) {
  while (*held) {
    if (stopping_ || context->IsCancelled()) return false;
    // Polls too: cancellation and Stop() do not notify.
    released_.wait_for(lock, std::chrono::milliseconds(10));
  }
  return !stopping_ && !context->IsCancelled();
}

grpc::Status FakeCollector::Serve(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::IngestAck, v1::IngestRequest>* rw) {
  v1::IngestRequest request;
  if (!rw->Read(&request) || !request.has_hello()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "first message must be a Hello");
  }
  const v1::RankIdentity& id = request.hello().identity();
  const std::string key = absl::StrCat(id.job_id(), "|", id.rank(), "|", id.attempt());
  v1::IngestAck ack;
  {
    std::unique_lock<std::mutex> lock(mu_);
    Stream& s = streams_[key];
    s.identity = id;
    auto auth = context->client_metadata().find("authorization");
    s.authorization = auth == context->client_metadata().end()
                          ? std::string()
                          : std::string(auth->second.data(), auth->second.size());
    if (!refuse_.ok()) {
      ++s.refused;
      return refuse_;
    }
    ++s.hellos;
    if (pretend_stored_ > s.durable_seq) s.durable_seq = pretend_stored_;
    pretend_stored_ = 0;
    if (!WaitWhileHeld(&hold_hello_, context, lock)) {
      ++s.aborted;
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake collector stopping");
    }
    ack.set_durable_seq(s.durable_seq);
    ack.set_collector_time_ns(RealtimeNanos());
    if (ack_attempt_.has_value()) ack.set_attempt(*ack_attempt_);
    s.hello_acks.push_back(s.durable_seq);
  }
  int stream_index = 0;
  {
    std::unique_lock<std::mutex> lock(mu_);
    stream_index = streams_[key].hellos;
  }
  if (!rw->Write(ack)) return grpc::Status::OK;

  while (rw->Read(&request)) {
    const int64_t received_ns = RealtimeNanos();
    if (!request.has_batch()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "expected a batch");
    }
    absl::StatusOr<DecodedBatch> batch = DecodeBatch(request.batch());
    if (!batch.ok()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, batch.status().ToString());
    }
    std::unique_lock<std::mutex> lock(mu_);
    Stream& s = streams_[key];
    ReceivedBatch received;
    received.count = static_cast<uint32_t>(batch->events.size());
    received.strings = batch->strings.size();
    received.stream_index = stream_index;
    if (!batch->events.empty()) {
      received.first_seq = batch->events.front().seq;
      received.last_seq = batch->events.back().seq;
    }
    s.received.push_back(received);
    if ((drop_at_batch_ > 0 && --drop_at_batch_ == 0) || fail_every_batch_) {
      ++s.aborted;
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake collector dropped the stream");
    }
    for (const StringDef& d : batch->strings) s.strings[d.id] = d;
    for (const Event& e : batch->events) {
      if (e.seq <= s.durable_seq) continue;
      if (e.seq != s.durable_seq + 1) ++s.seq_gaps;
      if ((e.tag_id != 0 && s.strings.count(e.tag_id) == 0) ||
          (e.source_id != 0 && s.strings.count(e.source_id) == 0)) {
        ++s.undefined_string_uses;
      }
      s.events.push_back(e);
      s.durable_seq = e.seq;
    }
    s.last_counters = batch->counters;
    if (batch->clock.has_value()) s.last_clock = batch->clock;
    if (!WaitWhileHeld(&hold_acks_, context, lock)) {
      ++s.aborted;
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake collector stopping");
    }
    ack.set_durable_seq(s.durable_seq);
    ack.set_collector_receive_ns(received_ns);
    ack.set_collector_time_ns(RealtimeNanos());
    // Writing under the lock is fine for a test server: acks are tiny.
    if (!rw->Write(ack)) break;
  }
  std::unique_lock<std::mutex> lock(mu_);
  Stream& s = streams_[key];
  if (context->IsCancelled() || stopping_) {
    ++s.aborted;
  } else {
    ++s.clean_closes;
  }
  return grpc::Status::OK;
}

}  // namespace memtrace
