#include "agent/stream/transport.h"

#include <grpcpp/grpcpp.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/memory/memory.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/stream/backoff.h"
#include "agent/stream/batch_store.h"
#include "agent/stream/clock_sync.h"
#include "agent/stream/event_queue.h"
#include "agent/stream/failure_log.h"
#include "agent/stream/ingest_stream.h"
#include "agent/stream/spool.h"
#include "agent/stream/stderr_lines.h"
#include "agent/stream/string_table.h"
#include "proto/codec/batch_codec.h"
#include "proto/codec/batch_wire.h"
#include "proto/memtrace/v1/ingest.pb.h"

namespace memtrace {

namespace {

// The collector's default BatchLimits: a batch beyond them is rejected as a whole.
constexpr size_t kMaxBatchEvents = 65536;
// How long a clean close (WritesDone) may wait for the collector to finish the call.
constexpr absl::Duration kCloseGrace = absl::Seconds(1);
// How much longer than that Shutdown() waits for the sender to end before leaving it behind.
constexpr absl::Duration kExitGrace = absl::Seconds(1);
// Rounds of batch forming per wake-up, so a producer faster than the sender cannot keep the
// sender from writing.
constexpr int kMaxFormRounds = 64;
// Send times of messages whose ack has not come, for the clock estimate; a collector that
// stops acking must not make the list grow without bound.
constexpr size_t kMaxSendTimes = 1024;

// The codes with which a collector refuses a Hello (admission, the token, the rank limits, a
// malformed identity): the stream will not be taken as it is, whatever the network does.
bool IsRefusal(grpc::StatusCode code) {
  return code == grpc::StatusCode::ALREADY_EXISTS || code == grpc::StatusCode::RESOURCE_EXHAUSTED ||
         code == grpc::StatusCode::UNAUTHENTICATED || code == grpc::StatusCode::PERMISSION_DENIED ||
         code == grpc::StatusCode::INVALID_ARGUMENT || code == grpc::StatusCode::UNIMPLEMENTED;
}

// Frees the heap copy of a shared_ptr that kept a sealed batch's bytes alive for a slice.
void ReleaseBatchBytes(void* holder) {
  delete static_cast<std::shared_ptr<const std::string>*>(holder);
}

// An IngestRequest whose body is field `field` (1 hello, 2 batch) made of `body` followed by
// `tail`, as three slices: the sealed batch's bytes go to gRPC without a copy.
grpc::ByteBuffer FrameRequest(uint32_t field, std::shared_ptr<const std::string> body,
                              const std::string& tail) {
  std::string head;
  AppendVarint(field << 3 | 2, &head);
  AppendVarint(body->size() + tail.size(), &head);
  void* const data = const_cast<char*>(body->data());
  const size_t size = body->size();
  grpc::Slice slices[3] = {grpc::Slice(head),
                           grpc::Slice(data, size, &ReleaseBatchBytes,
                                       new std::shared_ptr<const std::string>(std::move(body))),
                           grpc::Slice(tail)};
  return grpc::ByteBuffer(slices, tail.empty() ? 2 : 3);
}

// Waits for a notification or `deadline`; true when the deadline has passed.
bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
               absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) {
    cv.wait(lock);
    return false;
  }
  return cv.wait_until(lock, absl::ToChronoTime(deadline)) == std::cv_status::timeout;
}

int ToMillis(absl::Duration d) {
  return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(d), 1, INT32_MAX));
}

absl::Status ValidateOptions(const TransportOptions& o) {
  if (o.collector_address.empty()) {
    return absl::InvalidArgumentError("transport: collector_address is empty");
  }
  if (o.identity.job_id().empty()) {
    return absl::InvalidArgumentError("transport: identity.job_id is empty");
  }
  if (o.queue_capacity == 0) {
    return absl::InvalidArgumentError("transport: queue_capacity is 0");
  }
  if (o.max_batch_events == 0 || o.max_batch_events > kMaxBatchEvents) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transport: max_batch_events ", o.max_batch_events, " is not in 1..", kMaxBatchEvents));
  }
  if (o.max_batch_delay <= absl::ZeroDuration() || o.initial_backoff <= absl::ZeroDuration() ||
      o.max_backoff < o.initial_backoff || o.hello_timeout <= absl::ZeroDuration() ||
      o.ack_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transport: durations must be positive and initial_backoff <= max_backoff (batch delay ",
        absl::FormatDuration(o.max_batch_delay), ", backoff ",
        absl::FormatDuration(o.initial_backoff), "..", absl::FormatDuration(o.max_backoff),
        ", hello timeout ", absl::FormatDuration(o.hello_timeout), ", ack timeout ",
        absl::FormatDuration(o.ack_timeout), ")"));
  }
  if (o.max_unacked_bytes == 0) {
    return absl::InvalidArgumentError("transport: max_unacked_bytes is 0");
  }
  return absl::OkStatus();
}

}  // namespace

class Transport::Impl final : public IngestStream::Listener {
 public:
  Impl(TransportOptions options, std::shared_ptr<grpc::Channel> channel);
  ~Impl() override;

  void StartSender() {
    sender_ = std::thread([this] {
      // Named so that the agent's share of a training process shows in top -H and perf.
      pthread_setname_np(pthread_self(), "memtrace-send");
      Run();
    });
  }

  void Record(const Event& event) {
    // Waking the sender only when the queue was empty (so that it starts the max_batch_delay
    // clock of a partial batch) and at the batch threshold, not per event, keeps Record() to
    // one lock. (Waking at the threshold alone left a trickle of events below it unsent
    // whenever the sender had gone idle.)
    const size_t queued = queue_.Push(event);
    if (queued == 1 || queued == options_.max_batch_events) Wake();
  }

  // As Record() for each event, one lock per kRecordChunk events; the same wake-ups (the queue
  // leaving empty, reaching a batch), checked after every chunk so that a long span cannot
  // fill the queue while the sender sleeps.
  void RecordMany(absl::Span<const Event> events) {
    constexpr size_t kRecordChunk = 256;
    for (size_t i = 0; i < events.size(); i += kRecordChunk) {
      const EventQueue::Pushed p = queue_.PushMany(events.subspan(i, kRecordChunk));
      const size_t batch = options_.max_batch_events;
      if ((p.size_before == 0 && p.size_after > 0) ||
          (p.size_before < batch && p.size_after >= batch)) {
        Wake();
      }
    }
  }

  void RecordLoss(uint32_t reason, uint64_t n) {
    if (n == 0) return;
    queue_.AddLoss(reason, n);
    Wake();  // rare: the marker may be the queue's only event
  }

  uint32_t Intern(StringKind kind, std::string_view value) {
    const uint32_t id = strings_.Intern(kind, value);
    if (id == 0) {
      failures_.Report(
          Failure::kStringsRefused,
          absl::StrCat("string table full (", options_.max_strings, " entries, or ",
                       kDefaultMaxStringTableBytes / 4 * 3 >> 20, " MiB of sources and ",
                       kDefaultMaxStringTableBytes / 4 >> 20,
                       " MiB of tag and phase names): new ones are recorded without a name"));
    }
    return id;
  }

  void CountCuptiRecordsDropped(uint64_t n) {
    cupti_dropped_.fetch_add(n, std::memory_order_relaxed);
  }

  absl::Status Flush(absl::Duration timeout);
  absl::Status Shutdown(absl::Duration drain_timeout);
  // Shutdown() left the sender running (stuck in the batch store): the Impl must outlive it.
  bool sender_abandoned() const { return sender_abandoned_; }
  TransportStats stats() const;

  // IngestStream::Listener, on gRPC's threads.
  void OnAck(const v1::IngestAck& ack) override;
  void OnWriteDone(bool ok) override;
  void OnReadsDone() override;
  void OnStreamDone(const grpc::Status& status) override;

 private:
  // kRefetch: the stream became ready to write after the store was read (FetchNext); read it
  // again before deciding.
  enum class Action { kNone, kWrite, kClose, kAbort, kCancel, kRefetch };

  void Wake();
  void Run();
  // One connection's progress toward its end, kept by ServeStream from turn to turn.
  struct StreamProgress {
    bool ending = false;   // Close() or Abort() issued
    bool closing = false;  // ... and it was Close()
    bool cancelled = false;
    absl::Time close_deadline = absl::InfiniteFuture();
    bool hello_was_acked = false;
  };
  // The store's next batch for the current stream, read under store_mu_ before the turn is
  // decided under mu_ (a spilled batch is read from disk, which must not hold mu_).
  struct Prefetch {
    bool fetched = false;  // the stream was ready to write: hello acked, no write in flight
    uint64_t after = 0;    // written_through_ when it was read
    std::optional<SealedBatch> batch;
    uint64_t unreadable_events = 0;  // store_->unreadable_events() then
  };
  // One turn of ServeStream: decided under mu_, carried out outside it.
  struct Turn {
    Action action = Action::kNone;
    std::optional<SealedBatch> batch;  // kWrite: the batch to send
    std::optional<ClockEstimate> clock;
    uint64_t resume_after = 0;  // events up to this seq were written before it
  };

  // One stream from Hello to its end; true when the sender should stop.
  bool ServeStream();
  // Resets the per-stream state and opens a stream with the Hello.
  void OpenStream();
  // Reads the next batch to write when the stream is ready for one. Takes mu_, then store_mu_.
  Prefetch FetchNext();
  // Decides the turn and notes its effects (a write sent, the stream ending); with nothing to
  // do, waits until a wake-up or the next deadline. mu_ held, through `lock`.
  Turn NextTurnLocked(StreamProgress* progress, Prefetch prefetch,
                      std::unique_lock<std::mutex>& lock);
  // What to do now: a stream already ending only waits, or cancels a Close() that is overdue;
  // otherwise timeouts and failures end it, an acked Hello with no write in flight sends the
  // prefetched batch (moved to `next`), and a stop with nothing left closes it. mu_ held.
  Action DecideLocked(const StreamProgress& progress, absl::Time now, bool outstanding,
                      Prefetch& prefetch, std::optional<SealedBatch>* next);
  // Waits for a wake-up, until the earliest deadline the stream has. mu_ held, through `lock`.
  void WaitForWorkLocked(const StreamProgress& progress, bool outstanding,
                         std::unique_lock<std::mutex>& lock);
  void Perform(const Turn& turn);
  // After the stream is done: records how it ended and reports it; true when the sender
  // should stop.
  bool EndStream(const StreamProgress& progress);
  // Forms batches until `until`; true when the sender should stop.
  bool WaitDisconnected(absl::Time until);
  void FormBatches(bool force);
  void SealBatch(size_t covered);
  void HandleDropped();
  // Reports the events of batches the store could no longer read back (a spilled file gone),
  // `unreadable` in all so far, as a spool loss, once each. mu_ held.
  void ReportUnreadableLocked(uint64_t unreadable);
  grpc::ByteBuffer PrepareWrite(const SealedBatch& batch, uint64_t resume_after,
                                const std::optional<ClockEstimate>& clock);
  // Notes that a message is about to be sent (its ack will carry the collector's times).
  void NoteSend();
  // The counters to send with a batch ending at `batch_last_seq`: unacknowledged bytes are those
  // waiting behind it (its own ack covers it and everything before), so the last batch a
  // caught-up stream sends reports 0.
  AgentCounterValues Counters(uint64_t batch_last_seq);
  void ReportEndOfStream(const grpc::Status& status, bool hello_acked, bool closing);
  bool ForceBatches();

  const TransportOptions options_;
  FailureLog failures_;
  EventQueue queue_;
  StringTable strings_;
  std::shared_ptr<grpc::Channel> channel_;
  const std::function<int64_t()> clock_;
  std::atomic<uint64_t> cupti_dropped_{0};
  std::thread sender_;

  // Used by the sender thread only.
  std::vector<Event> carry_;  // popped from the queue, not yet in a batch
  std::vector<StringDef> batch_strings_;
  std::vector<SealedBatch> dropped_;
  absl::Time partial_due_ = absl::InfiniteFuture();
  Backoff backoff_;
  std::unique_ptr<IngestStream> stream_;
  uint64_t reported_queue_lost_ = 0;

  // Guards store_ alone, and is never held together with mu_: a spool spills, reads back and
  // deletes files in its calls, and Record() takes mu_ to wake the sender, so no file I/O may
  // happen under mu_. Taken by the sender and the ack callback (and stats()).
  mutable std::mutex store_mu_;
  std::unique_ptr<BatchStore> store_;

  // Guards everything below up to shutdown_mu_. std::mutex rather than absl::Mutex so that
  // ThreadSanitizer sees it (Debian's Abseil is not instrumented).
  mutable std::mutex mu_;
  std::condition_variable sender_cv_;
  std::condition_variable ack_cv_;
  bool wake_ = false;
  int flush_waiters_ = 0;
  bool stopping_ = false;
  bool clean_close_ = false;
  absl::Time stop_deadline_ = absl::InfiniteFuture();
  bool sender_exited_ = false;
  bool sender_abandoned_ = false;  // set by Shutdown() alone, before it returns
  uint64_t durable_seq_ = 0;
  // The current stream.
  bool hello_acked_ = false;
  // What its Hello was answered with, and whether a batch was written on it since: a stream
  // that wrote and got no batch acknowledged made no progress (see EndStream).
  uint64_t durable_at_hello_ = 0;
  bool wrote_batch_ = false;
  bool write_in_flight_ = false;
  bool write_failed_ = false;
  bool reads_done_ = false;
  bool stream_done_ = false;
  grpc::Status done_status_;
  // Highest seq written on this stream, or the Hello's durable mark: writing resumes after it.
  uint64_t written_through_ = 0;
  // The highest seq the collector may hold without having said so: what this stream wrote and,
  // until its Hello is answered with the durable mark, what earlier streams wrote. The store
  // drops such batches last (BatchStore::Append).
  uint64_t MayBeStoredThroughLocked() const {
    return hello_acked_ ? written_through_ : std::max(written_through_, max_written_seq_);
  }
  absl::Time opened_at_;
  absl::Time last_progress_;
  // When each message of this stream still waiting for its ack was sent (clock_), oldest
  // first: the collector acks every message once, in order.
  std::deque<int64_t> sent_at_;
  ClockSync clock_sync_;
  // Across streams.
  bool ever_connected_ = false;
  uint64_t durable_at_first_hello_ = 0;  // TransportStats::durable_at_first_hello
  std::optional<uint32_t> stored_attempt_;  // TransportStats::stored_attempt
  std::optional<int32_t> stored_subprocess_of_;  // TransportStats::stored_subprocess_of
  bool closed_cleanly_ = false;
  uint64_t max_written_seq_ = 0;
  uint64_t events_sent_ = 0;
  uint64_t batches_sent_ = 0;
  uint64_t batches_resent_ = 0;
  uint64_t reconnects_ = 0;
  uint64_t stream_errors_ = 0;
  uint64_t lost_spool_full_ = 0;
  uint64_t lost_collector_ = 0;       // TransportStats::events_lost_collector
  uint64_t reported_unreadable_ = 0;  // of store_->unreadable_events()
  std::string last_stream_error_;
  absl::StatusCode last_stream_code_ = absl::StatusCode::kOk;
  bool last_stream_refused_ = false;

  std::mutex shutdown_mu_;
  std::optional<absl::Status> shutdown_result_;
};

Transport::Impl::Impl(TransportOptions options, std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)),
      failures_(options_.log_failures),
      queue_(options_.queue_capacity),
      strings_(options_.max_strings),
      clock_(options_.clock ? options_.clock : RealtimeNanos),
      backoff_(options_.initial_backoff, options_.max_backoff),
      store_(options_.batch_store_factory ? options_.batch_store_factory()
                                          : MakeBatchStore(options_)) {
  channel_ = std::move(channel);
  carry_.reserve(options_.max_batch_events);
}

Transport::Impl::~Impl() {
  // Transport's destructor shuts down first; this only guards against a sender left running.
  if (sender_.joinable()) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      stopping_ = true;
      stop_deadline_ = absl::Now();
      sender_cv_.notify_one();
    }
    sender_.join();
  }
}

void Transport::Impl::Wake() {
  std::unique_lock<std::mutex> lock(mu_);
  wake_ = true;
  sender_cv_.notify_one();
}

bool Transport::Impl::ForceBatches() {
  std::unique_lock<std::mutex> lock(mu_);
  return flush_waiters_ > 0 || stopping_;
}

void Transport::Impl::ReportUnreadableLocked(uint64_t unreadable) {
  if (unreadable <= reported_unreadable_) return;
  const uint64_t lost = unreadable - reported_unreadable_;
  reported_unreadable_ = unreadable;
  lost_spool_full_ += lost;
  // The queue's own lock only: nothing that holds it takes mu_.
  queue_.AddLoss(kLossSpoolFull, lost);
}

// ---------------------------------------------------------------------------------------------
// Batch forming (sender thread).

AgentCounterValues Transport::Impl::Counters(uint64_t batch_last_seq) {
  EventQueue::Counters q = queue_.counters();
  AgentCounterValues c;
  c.events_recorded = q.pushed;
  c.cupti_records_dropped = cupti_dropped_.load(std::memory_order_relaxed);
  {
    std::unique_lock<std::mutex> store_lock(store_mu_);
    c.spool_bytes = store_->BytesAfter(batch_last_seq);
  }
  std::unique_lock<std::mutex> lock(mu_);
  c.events_lost = q.lost_queue_full + q.lost_after_close + lost_spool_full_ + lost_collector_;
  c.reconnects = reconnects_;
  return c;
}

void Transport::Impl::FormBatches(bool force) {
  for (int round = 0; round < kMaxFormRounds; ++round) {
    EventQueue::Counters q = queue_.counters();
    if (q.lost_queue_full > reported_queue_lost_) {
      reported_queue_lost_ = q.lost_queue_full;
      failures_.Report(Failure::kQueueFull,
                       absl::StrCat("event queue full (", options_.queue_capacity,
                                    " events): dropping events, reported as a loss"));
    }
    const size_t waiting = carry_.size() + q.size;
    if (waiting == 0) {
      partial_due_ = absl::InfiniteFuture();
      return;
    }
    if (!force && waiting < options_.max_batch_events) {
      // A partial batch goes once its oldest event has waited max_batch_delay (measured from
      // when the sender first saw it, which is at most one wake-up late).
      const absl::Time now = absl::Now();
      if (partial_due_ == absl::InfiniteFuture()) partial_due_ = now + options_.max_batch_delay;
      if (now < partial_due_) return;
    }
    queue_.Pop(options_.max_batch_events - carry_.size(), &carry_);
    if (carry_.empty()) continue;  // only markers were pending; they are in the queue now
    const size_t covered = strings_.TakeForBatch(carry_, kMaxStringsPerBatch,
                                                 kMaxStringBytesPerBatch, &batch_strings_);
    SealBatch(covered);
    partial_due_ = absl::InfiniteFuture();
  }
}

void Transport::Impl::SealBatch(size_t covered) {
  SealedBatch sealed;
  sealed.first_seq = carry_.front().seq;
  sealed.last_seq = carry_[covered - 1].seq;
  for (size_t i = 0; i < covered; ++i) {
    const Event& e = carry_[i];
    if (e.kind == EventKind::kLoss) {
      sealed.marker_losses[e.memory_kind < sealed.marker_losses.size() ? e.memory_kind : 0] +=
          e.aux;
    } else {
      ++sealed.events;
    }
  }
  sealed.has_strings = !batch_strings_.empty();
  // Without counters and clock: PrepareWrite adds the current ones each time the batch goes out.
  auto bytes = std::make_shared<std::string>();
  AppendBatchWire(absl::MakeConstSpan(carry_.data(), covered), batch_strings_, nullptr, nullptr,
                  bytes.get());
  sealed.bytes = std::move(bytes);
  carry_.erase(carry_.begin(), carry_.begin() + static_cast<std::ptrdiff_t>(covered));
  batch_strings_.clear();
  // Read first, used after: only the Hello's ack changes it meanwhile, and only downwards (to
  // the collector's durable mark), so the store may keep a batch longer, never drop one the
  // collector could still store.
  uint64_t keep_through = 0;
  {
    std::unique_lock<std::mutex> lock(mu_);
    keep_through = MayBeStoredThroughLocked();
  }
  {
    std::unique_lock<std::mutex> store_lock(store_mu_);
    store_->Append(std::move(sealed), keep_through, &dropped_);
  }
  if (!dropped_.empty()) HandleDropped();
}

void Transport::Impl::HandleDropped() {
  uint64_t lost = 0;
  uint64_t first_dropped_end = UINT64_MAX;
  std::vector<StringDef> defs;
  for (const SealedBatch& b : dropped_) {
    lost += b.events;
    first_dropped_end = std::min(first_dropped_end, b.last_seq);
    // Loss markers inside the dropped batch are reported again under their own reason.
    for (uint32_t reason = 0; reason < b.marker_losses.size(); ++reason) {
      queue_.AddLoss(reason, b.marker_losses[reason]);
    }
    v1::EventBatch batch;
    if (b.has_strings && b.bytes != nullptr && batch.ParseFromString(*b.bytes)) {
      for (const v1::StringEntry& s : batch.strings()) {
        defs.push_back(StringDef{s.id(), static_cast<StringKind>(s.kind()), s.value()});
      }
    }
  }
  const uint64_t batches = dropped_.size();
  dropped_.clear();
  queue_.AddLoss(kLossSpoolFull, lost);
  // Later batches may use these ids: the first kept batch after a dropped one that is not on
  // the wire yet carries them, and so does the next new one.
  strings_.Resend(defs);
  uint64_t on_the_wire_through = 0;
  {
    std::unique_lock<std::mutex> lock(mu_);
    lost_spool_full_ += lost;
    on_the_wire_through = MayBeStoredThroughLocked();
  }
  {
    std::unique_lock<std::mutex> store_lock(store_mu_);
    store_->AddStringsAfter(std::max(first_dropped_end, on_the_wire_through), defs);
  }
  failures_.Report(
      Failure::kSpoolFull,
      absl::StrCat("unacknowledged batches exceed ", options_.max_unacked_bytes, " bytes: dropped ",
                   batches, " batch(es) (", lost, " events), reported as a loss"));
}

// ---------------------------------------------------------------------------------------------
// The sender thread.

void Transport::Impl::Run() {
  while (true) {
    {
      // A shutdown with nothing left to flush still opens one stream, if there is time, so the
      // collector learns of the rank and sees it complete.
      std::unique_lock<std::mutex> lock(mu_);
      if (stopping_ && (!clean_close_ || absl::Now() >= stop_deadline_)) break;
    }
    if (ServeStream()) break;
    if (WaitDisconnected(absl::Now() + backoff_.Next())) break;
  }
  uint64_t undelivered = 0;
  {
    std::unique_lock<std::mutex> lock(mu_);
    EventQueue::Counters q = queue_.counters();
    undelivered = q.last_seq > durable_seq_ ? q.last_seq - durable_seq_ : 0;
  }
  if (undelivered > 0) {
    failures_.Report(Failure::kUndelivered, absl::StrCat("shutting down with ", undelivered,
                                                         " events not acknowledged by collector ",
                                                         options_.collector_address));
  }
  std::unique_lock<std::mutex> lock(mu_);
  sender_exited_ = true;
  ack_cv_.notify_all();
}

bool Transport::Impl::WaitDisconnected(absl::Time until) {
  while (true) {
    FormBatches(ForceBatches());
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) return true;
    const absl::Time now = absl::Now();
    if (now >= until) return false;
    if (!wake_) WaitUntil(sender_cv_, lock, std::min(until, partial_due_));
    wake_ = false;
  }
}

bool Transport::Impl::ServeStream() {
  OpenStream();
  StreamProgress progress;
  while (true) {
    FormBatches(ForceBatches());
    Prefetch prefetch = FetchNext();
    Turn turn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stream_done_) break;
      turn = NextTurnLocked(&progress, std::move(prefetch), lock);
    }
    Perform(turn);
  }
  return EndStream(progress);
}

void Transport::Impl::OpenStream() {
  v1::Hello hello;
  *hello.mutable_identity() = options_.identity;
  hello.set_new_attempt_if_taken(options_.new_attempt_if_taken);
  {
    std::unique_lock<std::mutex> lock(mu_);
    hello_acked_ = false;
    wrote_batch_ = false;
    write_in_flight_ = true;  // the Hello
    write_failed_ = false;
    reads_done_ = false;
    stream_done_ = false;
    written_through_ = 0;
    opened_at_ = absl::Now();
    last_progress_ = opened_at_;
    sent_at_.clear();
  }
  stream_ = std::make_unique<IngestStream>(this);
  NoteSend();
  stream_->Open(
      channel_.get(),
      FrameRequest(1, std::make_shared<const std::string>(hello.SerializeAsString()), ""));
}

Transport::Impl::Prefetch Transport::Impl::FetchNext() {
  Prefetch prefetch;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!hello_acked_ || write_in_flight_) return prefetch;
    prefetch.after = written_through_;
  }
  std::unique_lock<std::mutex> store_lock(store_mu_);
  prefetch.fetched = true;
  prefetch.batch = store_->NextAfter(prefetch.after);
  prefetch.unreadable_events = store_->unreadable_events();
  return prefetch;
}

Transport::Impl::Turn Transport::Impl::NextTurnLocked(StreamProgress* progress, Prefetch prefetch,
                                                      std::unique_lock<std::mutex>& lock) {
  const absl::Time now = absl::Now();
  progress->hello_was_acked |= hello_acked_;
  const bool outstanding = written_through_ > durable_seq_;
  Turn turn;
  turn.action = DecideLocked(*progress, now, outstanding, prefetch, &turn.batch);
  switch (turn.action) {
    case Action::kWrite: {
      const SealedBatch& next = *turn.batch;
      turn.resume_after = written_through_;
      if (options_.send_clock_estimate) turn.clock = clock_sync_.Current();
      if (!outstanding) last_progress_ = now;  // the ack clock starts with the first write
      write_in_flight_ = true;
      wrote_batch_ = true;
      written_through_ = next.last_seq;
      events_sent_ += next.last_seq - std::max(next.first_seq - 1, turn.resume_after);
      ++batches_sent_;
      if (next.first_seq <= max_written_seq_) ++batches_resent_;
      max_written_seq_ = std::max(max_written_seq_, next.last_seq);
      break;
    }
    case Action::kClose:
    case Action::kAbort:
      progress->ending = true;
      progress->closing = turn.action == Action::kClose;
      progress->close_deadline = std::max(now, stop_deadline_) + kCloseGrace;
      break;
    case Action::kCancel:
      progress->cancelled = true;
      break;
    case Action::kNone:
      if (!wake_) WaitForWorkLocked(*progress, outstanding, lock);
      wake_ = false;
      break;
    case Action::kRefetch:
      break;
  }
  return turn;
}

Transport::Impl::Action Transport::Impl::DecideLocked(const StreamProgress& progress,
                                                      absl::Time now, bool outstanding,
                                                      Prefetch& prefetch,
                                                      std::optional<SealedBatch>* next) {
  if (progress.ending) {
    const bool close_overdue =
        progress.closing && !progress.cancelled && now >= progress.close_deadline;
    return close_overdue ? Action::kCancel : Action::kNone;
  }
  if (reads_done_ || write_failed_) return Action::kAbort;
  if (!hello_acked_ && now - opened_at_ >= options_.hello_timeout) {
    failures_.Report(
        Failure::kHelloTimeout,
        absl::StrCat("collector ", options_.collector_address, " did not answer the Hello within ",
                     absl::FormatDuration(options_.hello_timeout)));
    return Action::kAbort;
  }
  if (hello_acked_ && outstanding && now - last_progress_ >= options_.ack_timeout) {
    failures_.Report(
        Failure::kAckTimeout,
        absl::StrCat("collector ", options_.collector_address, " sent no ack within ",
                     absl::FormatDuration(options_.ack_timeout), "; reopening the stream"));
    return Action::kAbort;
  }
  if (stopping_ && (!clean_close_ || (!hello_acked_ && now >= stop_deadline_))) {
    return Action::kAbort;
  }
  if (hello_acked_ && !write_in_flight_) {
    // Only this thread moves written_through_ once the Hello is acked, but the stream may have
    // become ready (the Hello's ack, a write completing) after FetchNext looked.
    if (!prefetch.fetched || prefetch.after != written_through_) return Action::kRefetch;
    ReportUnreadableLocked(prefetch.unreadable_events);
    *next = std::move(prefetch.batch);
    if (next->has_value()) return Action::kWrite;
    if (stopping_) return Action::kClose;
  }
  return Action::kNone;
}

void Transport::Impl::WaitForWorkLocked(const StreamProgress& progress, bool outstanding,
                                        std::unique_lock<std::mutex>& lock) {
  absl::Time deadline = partial_due_;
  // Once the stream is ending (aborted for a Hello or ack timeout), those deadlines have passed
  // and mean nothing: waited on, the loop spun on a core until gRPC delivered the call's end.
  if (!progress.ending) {
    if (!hello_acked_) deadline = std::min(deadline, opened_at_ + options_.hello_timeout);
    if (outstanding) deadline = std::min(deadline, last_progress_ + options_.ack_timeout);
    if (stopping_ && !hello_acked_) deadline = std::min(deadline, stop_deadline_);
  }
  if (progress.ending && progress.closing && !progress.cancelled) {
    deadline = std::min(deadline, progress.close_deadline);
  }
  WaitUntil(sender_cv_, lock, deadline);
}

void Transport::Impl::Perform(const Turn& turn) {
  switch (turn.action) {
    case Action::kWrite: {
      grpc::ByteBuffer request = PrepareWrite(*turn.batch, turn.resume_after, turn.clock);
      NoteSend();
      stream_->Write(std::move(request));
      break;
    }
    case Action::kClose:
      stream_->Close();
      break;
    case Action::kAbort:
      stream_->Abort();
      break;
    case Action::kCancel:
      stream_->Cancel();
      break;
    case Action::kNone:
    case Action::kRefetch:
      break;
  }
}

bool Transport::Impl::EndStream(const StreamProgress& progress) {
  grpc::Status status;
  bool stop = false;
  bool hello_was_acked = progress.hello_was_acked;
  bool progressed = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    status = done_status_;
    hello_was_acked |= hello_acked_;
    progressed = hello_was_acked && (!wrote_batch_ || durable_seq_ > durable_at_hello_);
    hello_acked_ = false;
    stop = stopping_;
    const bool closed_cleanly = progress.closing && status.ok();
    if (closed_cleanly) closed_cleanly_ = true;
    if (!closed_cleanly && !stop) {
      ++stream_errors_;
      last_stream_refused_ = !hello_was_acked && IsRefusal(status.error_code());
      // A stream the collector ended with OK was not closed by us: unknown, as far as we know.
      last_stream_code_ = status.ok() ? absl::StatusCode::kUnknown
                                      : static_cast<absl::StatusCode>(status.error_code());
      last_stream_error_ =
          status.ok()
              ? std::string("the collector ended the stream")
              : absl::StrCat(
                    absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())),
                    ": ", status.error_message());
    }
  }
  stream_.reset();  // OnStreamDone was the call's last use of it
  // Only a stream that got somewhere resets the backoff. A collector that answers the Hello and
  // then fails every batch (its disk full) was reconnected to every 10-50 ms by every rank, each
  // time resending the unacknowledged batches.
  if (progressed) backoff_.Reset();
  if (!stop) ReportEndOfStream(status, hello_was_acked, progress.closing);
  return stop;
}

void Transport::Impl::ReportEndOfStream(const grpc::Status& status, bool hello_acked,
                                        bool closing) {
  const std::string what = status.ok()
                               ? std::string("the collector ended the stream")
                               : absl::StrCat("status ", static_cast<int>(status.error_code()),
                                              ": ", status.error_message());
  if (!hello_acked && IsRefusal(status.error_code())) {
    failures_.Report(Failure::kRefused,
                     absl::StrCat("collector ", options_.collector_address, " refused the stream (",
                                  what, "); retrying with backoff"));
  } else if (!hello_acked) {
    failures_.Report(Failure::kConnect,
                     absl::StrCat("cannot reach collector ", options_.collector_address, " (", what,
                                  "); recording continues, retrying with backoff"));
  } else if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    failures_.Report(Failure::kRejected, absl::StrCat("collector ", options_.collector_address,
                                                      " rejected a batch (", what, "); retrying"));
  } else if (!closing) {
    failures_.Report(Failure::kStreamBroken,
                     absl::StrCat("stream to collector ", options_.collector_address, " broke (",
                                  what, "); reconnecting and resending"));
  }
}

grpc::ByteBuffer Transport::Impl::PrepareWrite(const SealedBatch& sealed, uint64_t resume_after,
                                               const std::optional<ClockEstimate>& clock) {
  std::shared_ptr<const std::string> body = sealed.bytes;
  if (sealed.first_seq <= resume_after) {
    // The collector already has the head of this batch: send only the rest, so a reconnect
    // never resends what the Hello ack covered.
    BatchLimits limits;
    limits.max_events = kMaxBatchEvents;
    limits.max_strings = UINT32_MAX;
    limits.max_string_bytes = UINT32_MAX;
    absl::StatusOr<DecodedBatch> decoded = DecodeBatchWire(*sealed.bytes, limits);
    if (decoded.ok()) {  // cannot fail for our own encoding; if it did, send it whole
      auto keep = std::find_if(decoded->events.begin(), decoded->events.end(),
                               [&](const Event& e) { return e.seq > resume_after; });
      auto rest = std::make_shared<std::string>();
      AppendBatchWire(absl::MakeConstSpan(decoded->events).subspan(keep - decoded->events.begin()),
                      decoded->strings, nullptr, nullptr, rest.get());
      body = std::move(rest);
    }
  }
  // Counters as of now, not of when the batch was formed: a resend after a reconnect then
  // reports that reconnect. Likewise the newest clock estimate.
  std::string tail;
  AppendCountersField(Counters(sealed.last_seq), &tail);
  if (clock.has_value()) AppendClockField(*clock, &tail);
  return FrameRequest(2, std::move(body), tail);
}

void Transport::Impl::NoteSend() {
  const int64_t now = clock_();
  std::unique_lock<std::mutex> lock(mu_);
  sent_at_.push_back(now);
  if (sent_at_.size() > kMaxSendTimes) sent_at_.pop_front();
}

// ---------------------------------------------------------------------------------------------
// Listener callbacks (gRPC threads).

void Transport::Impl::OnAck(const v1::IngestAck& ack) {
  const int64_t received = clock_();
  const uint64_t seq = ack.durable_seq();
  {
    // Before durable_seq_ moves, so that a flush that returns finds the store without them.
    // Forgetting what is at or below seq is a no-op for a collector that reports less than
    // before: those batches went with the acks that covered them.
    std::unique_lock<std::mutex> store_lock(store_mu_);
    store_->Acknowledge(seq);
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!sent_at_.empty()) {
    if (ack.collector_time_ns() != 0) {
      clock_sync_.AddSample(sent_at_.front(), ack.collector_receive_ns(), ack.collector_time_ns(),
                            received);
    }
    sent_at_.pop_front();
  }
  if (!hello_acked_) {
    hello_acked_ = true;
    if (seq < durable_seq_) {
      // A collector that lost its data (new data directory, a machine crash under async
      // durability): what it had acknowledged is gone and cannot be resent, but the string
      // table can. The events are counted lost, and a loss marker tells the collector how many
      // its gap holds (the queue's own lock only: nothing that holds it takes mu_).
      strings_.ResendAll();
      lost_collector_ += durable_seq_ - seq;
      queue_.AddLoss(kLossCollectorLost, durable_seq_ - seq);
      failures_.Report(
          Failure::kCollectorRegressed,
          absl::StrCat("collector ", options_.collector_address, " reports durable ", "seq ", seq,
                       " after acknowledging ", durable_seq_, "; events in between are lost"));
    }
    written_through_ = seq;
    durable_at_hello_ = std::max(seq, durable_seq_);
    if (ack.has_attempt()) {
      if (ack.attempt() != options_.identity.attempt() && !stored_attempt_.has_value() &&
          options_.log_failures) {
        // Once: another process had streamed this rank's attempt (this one restarted, or the
        // job ran before under this id).
        AgentStderr().Write(absl::StrCat(
            "memtrace-agent: job ", options_.identity.job_id(), " rank ", options_.identity.rank(),
            " attempt ", options_.identity.attempt(),
            " was recorded by another process before; the collector stores this one as attempt ",
            ack.attempt()));
      }
      stored_attempt_ = ack.attempt();
    }
    if (ack.has_subprocess_of_rank()) {
      if (!stored_subprocess_of_.has_value() && options_.log_failures) {
        // Once: the process inherited the RANK of an ancestor that streams it (an engine or a
        // worker the rank started), or started the process that does, which connected first.
        const std::string pid = absl::StrCat(" (pid ", options_.identity.pid(), ")");
        AgentStderr().Write(absl::StrCat(
            "memtrace-agent: job ", options_.identity.job_id(), " rank ", options_.identity.rank(),
            ack.started_the_rank()
                ? absl::StrCat(" is streamed by a process this one started, which connected "
                               "first; the collector stores this process",
                               pid, " beside it, as it stores the rank's subprocesses")
                : absl::StrCat(" is streamed by a process that started this one; the collector "
                               "stores this process",
                               pid, " as a subprocess of rank ", ack.subprocess_of_rank())));
      }
      stored_subprocess_of_ = ack.subprocess_of_rank();
    }
    if (ever_connected_) ++reconnects_;
    if (!ever_connected_) durable_at_first_hello_ = seq;
    ever_connected_ = true;
  }
  if (seq > durable_seq_) durable_seq_ = seq;
  last_progress_ = absl::Now();
  sender_cv_.notify_one();
  ack_cv_.notify_all();
}

void Transport::Impl::OnWriteDone(bool ok) {
  std::unique_lock<std::mutex> lock(mu_);
  write_in_flight_ = false;
  if (!ok) write_failed_ = true;
  sender_cv_.notify_one();
}

void Transport::Impl::OnReadsDone() {
  std::unique_lock<std::mutex> lock(mu_);
  reads_done_ = true;
  sender_cv_.notify_one();
}

void Transport::Impl::OnStreamDone(const grpc::Status& status) {
  std::unique_lock<std::mutex> lock(mu_);
  stream_done_ = true;
  done_status_ = status;
  sender_cv_.notify_one();
}

// ---------------------------------------------------------------------------------------------
// Flush, Shutdown, stats.

absl::Status Transport::Impl::Flush(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  // A loss still waiting for room in the queue gets its marker once the sender drains it;
  // the flush covers that marker too, so the loss is known to the collector when it returns.
  EventQueue::Sealed sealed = queue_.SealPendingLosses();
  uint64_t target = sealed.last_seq;
  std::unique_lock<std::mutex> lock(mu_);
  if (durable_seq_ >= target && !sealed.loss_pending) return absl::OkStatus();
  ++flush_waiters_;
  wake_ = true;
  sender_cv_.notify_one();
  uint64_t unreadable_seen = reported_unreadable_;
  while (!sender_exited_) {
    if (durable_seq_ >= target) {
      // Spilled batches found unreadable while flushing were recorded before the flush: it
      // covers their loss marker too (placed when they were found, after `target`).
      const bool found_lost = reported_unreadable_ != unreadable_seen;
      if (!sealed.loss_pending && !found_lost) break;
      unreadable_seen = reported_unreadable_;
      lock.unlock();
      sealed = queue_.SealPendingLosses();
      lock.lock();
      target = sealed.last_seq;
      continue;
    }
    if (WaitUntil(ack_cv_, lock, deadline)) break;
  }
  --flush_waiters_;
  if (durable_seq_ >= target && !sealed.loss_pending) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat("flush: ", target - durable_seq_, " events not acknowledged by collector ",
                   options_.collector_address, " within ", absl::FormatDuration(timeout),
                   " (durable seq ", durable_seq_, ", last seq ", target, ", ",
                   hello_acked_ ? "connected" : "not connected", ")"));
}

absl::Status Transport::Impl::Shutdown(absl::Duration drain_timeout) {
  std::lock_guard<std::mutex> shutdown_lock(shutdown_mu_);
  if (shutdown_result_.has_value()) return *shutdown_result_;
  const absl::Time drain_deadline = absl::Now() + drain_timeout;
  // Closing first makes the flush target final: events recorded from now on are dropped and
  // counted, so "flushed" covers everything recorded before Shutdown().
  queue_.Close();
  // A process the collector has only ever refused (a subprocess that inherited its parent's
  // RANK while the parent streams it, a bad token) will not be let in within the drain: every
  // such process waited it out at exit (3 s by default) for nothing.
  bool only_refused = false;
  std::string refusal;
  {
    std::unique_lock<std::mutex> lock(mu_);
    only_refused = !ever_connected_ && last_stream_refused_;
    refusal = last_stream_error_;
  }
  absl::Status result =
      only_refused ? absl::FailedPreconditionError(absl::StrCat(
                         "shutdown: collector ", options_.collector_address,
                         " refused every stream of this process (", refusal, "); nothing stored"))
                   : Flush(drain_timeout);
  {
    std::unique_lock<std::mutex> lock(mu_);
    stopping_ = true;
    clean_close_ = result.ok();
    // With nothing left to send, a stream still opening gets until the drain deadline (at
    // least a moment) to be answered, so that a quick start-and-stop still closes cleanly.
    const absl::Time now = absl::Now();
    stop_deadline_ = result.ok() ? std::max(drain_deadline, now + absl::Milliseconds(200)) : now;
    sender_cv_.notify_one();
  }
  // The sender ends within moments of its stop deadline (a close's grace at most), unless a
  // spool read or write holds it on a disk that does not answer (a hung NFS mount): the process
  // exit waited on that for ever. Past the grace it is left behind, with the Impl it uses.
  bool exited = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    const absl::Time give_up = std::max(stop_deadline_, absl::Now()) + kCloseGrace + kExitGrace;
    while (!sender_exited_ && !WaitUntil(ack_cv_, lock, give_up)) {
    }
    exited = sender_exited_;
  }
  if (exited && sender_.joinable()) sender_.join();
  if (exited) {
    // With everything acknowledged, the spool's directory goes now: the agent never destroys
    // its Transport, so a directory left to the store's destructor stayed behind every process.
    std::unique_lock<std::mutex> store_lock(store_mu_);
    if (store_->batches() == 0) {
      store_ = std::make_unique<MemoryBatchStore>(options_.max_unacked_bytes);
    }
  }
  if (!exited && sender_.joinable()) {
    sender_.detach();
    sender_abandoned_ = true;
    result = absl::DeadlineExceededError(
        "shutdown: the sender did not stop (a spool read or write that does not return?); "
        "left running");
  }
  if (result.ok()) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!closed_cleanly_) {
      result = ever_connected_
                   ? absl::DeadlineExceededError(
                         absl::StrCat("shutdown: collector ", options_.collector_address,
                                      " did not confirm the stream's close"))
                   : absl::UnavailableError(absl::StrCat(
                         "shutdown: collector ", options_.collector_address, " was never reached"));
    }
  }
  shutdown_result_ = result;
  // Its failure lines are written by the agent's stderr thread: a moment for them to come out
  // before the process exits, and no more (stderr may be a pipe nobody reads).
  AgentStderr().Flush(absl::Milliseconds(250));
  return result;
}

TransportStats Transport::Impl::stats() const {
  EventQueue::Counters q = queue_.counters();
  TransportStats s;
  s.events_recorded = q.pushed;
  s.events_lost_queue_full = q.lost_queue_full;
  s.last_seq = q.last_seq;
  s.strings_interned = strings_.size();
  s.strings_refused = strings_.refused();
  {
    std::unique_lock<std::mutex> store_lock(store_mu_);
    s.unacked_batches = store_->batches();
    s.unacked_bytes = store_->bytes();
  }
  std::unique_lock<std::mutex> lock(mu_);
  s.events_lost_spool_full = lost_spool_full_;
  s.events_lost_collector = lost_collector_;
  s.events_lost = q.lost_queue_full + q.lost_after_close + lost_spool_full_ + lost_collector_;
  s.events_sent = events_sent_;
  s.durable_seq = durable_seq_;
  s.durable_at_first_hello = durable_at_first_hello_;
  s.stored_attempt = stored_attempt_;
  s.stored_subprocess_of = stored_subprocess_of_;
  s.reconnects = reconnects_;
  s.connected = hello_acked_ && !reads_done_ && !write_failed_ && !stream_done_;
  s.batches_sent = batches_sent_;
  s.batches_resent = batches_resent_;
  s.stream_errors = stream_errors_;
  s.last_stream_error = last_stream_error_;
  s.last_stream_code = last_stream_code_;
  s.last_stream_refused = last_stream_refused_;
  s.clock = clock_sync_.Current();
  s.clock_samples = clock_sync_.samples();
  return s;
}

// ---------------------------------------------------------------------------------------------
// Transport.

absl::StatusOr<std::unique_ptr<Transport>> Transport::Start(TransportOptions options) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  grpc::ChannelArguments args;
  // gRPC's own reconnect backoff (1 s doubling to 120 s by default) would otherwise dominate
  // ours after a collector restart.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, ToMillis(options.initial_backoff));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, ToMillis(options.max_backoff));
  std::shared_ptr<grpc::Channel> channel =
      options.channel_factory ? options.channel_factory(options.collector_address, args)
                              : grpc::CreateCustomChannel(options.collector_address,
                                                          grpc::InsecureChannelCredentials(), args);
  if (channel == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transport: the channel factory made no channel for ", options.collector_address));
  }
  auto impl = std::make_unique<Impl>(std::move(options), std::move(channel));
  impl->StartSender();
  return absl::WrapUnique(new Transport(std::move(impl)));
}

Transport::Transport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Transport::~Transport() {
  impl_->Shutdown(absl::Seconds(5)).IgnoreError();
  // A sender stuck in its batch store still uses the Impl: it is leaked, not freed under it.
  if (impl_->sender_abandoned()) static_cast<void>(impl_.release());
}

void Transport::Record(const Event& event) { impl_->Record(event); }

void Transport::RecordMany(absl::Span<const Event> events) { impl_->RecordMany(events); }

void Transport::RecordLoss(uint32_t reason, uint64_t n, int64_t /*ts_ns*/) {
  // The marker carries the time of the latest event queued, as every loss marker does.
  impl_->RecordLoss(reason, n);
}

uint32_t Transport::Intern(StringKind kind, std::string_view value) {
  return impl_->Intern(kind, value);
}

void Transport::CountCuptiRecordsDropped(uint64_t n) { impl_->CountCuptiRecordsDropped(n); }

absl::Status Transport::Flush(absl::Duration timeout) { return impl_->Flush(timeout); }

absl::Status Transport::Shutdown(absl::Duration drain_timeout) {
  return impl_->Shutdown(drain_timeout);
}

TransportStats Transport::stats() const { return impl_->stats(); }

}  // namespace memtrace
