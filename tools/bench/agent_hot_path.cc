#include "tools/bench/agent_hot_path.h"

#include <cupti.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/cupti/record_order.h"
#include "agent/cupti/record_translator.h"
#include "agent/stream/transport.h"
#include "collector/server/collector_server.h"
#include "proto/codec/batch_codec.h"
#include "proto/codec/batch_wire.h"

namespace memtrace::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Keeps the compiler from dropping work whose result is otherwise unused.
template <typename T>
void KeepAlive(T* p) {
  asm volatile("" : : "r"(p) : "memory");
}

// The floor of any sink: one copy into a preallocated array. Not thread-safe (one thread).
class ArraySink final : public EventSink {
 public:
  explicit ArraySink(size_t capacity) : events_(capacity) {}
  void Record(const Event& event) override {
    events_[next_] = event;
    if (++next_ == events_.size()) next_ = 0;
    ++count_;
  }
  uint32_t Intern(StringKind, std::string_view) override { return 1; }
  const std::vector<Event>& events() const { return events_; }
  uint64_t count() const { return count_; }

 private:
  std::vector<Event> events_;
  size_t next_ = 0;
  uint64_t count_ = 0;
};

constexpr uint64_t kSizes[] = {2ull << 20, 20ull << 20, 2ull << 20,   64ull << 20,
                               2ull << 20, 20ull << 20, 256ull << 20, 2ull << 20};

}  // namespace

CuptiBuffer BuildMemoryBuffer(size_t bytes, cupti::CorrelationTable* table) {
  static_assert(sizeof(CUpti_ActivityMemory4) % 8 == 0, "records are 8-byte aligned");
  CuptiBuffer b;
  b.records = bytes / sizeof(CUpti_ActivityMemory4);
  b.valid_bytes = b.records * sizeof(CUpti_ActivityMemory4);
  b.storage.assign((bytes + 7) / 8, 0);
  auto* r = reinterpret_cast<CUpti_ActivityMemory4*>(b.data());
  for (size_t i = 0; i < b.records; ++i) {
    CUpti_ActivityMemory4& m = r[i];
    std::memset(&m, 0, sizeof m);
    const size_t pair = i / 2;
    const bool alloc = i % 2 == 0;
    const uint32_t correlation = static_cast<uint32_t>(i + 1);
    m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    m.memoryOperationType = alloc ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                                  : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
    m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.correlationId = correlation;
    m.address = 0x7f0000000000ull + (pair % 512) * (512ull << 20);
    m.bytes = kSizes[pair % 8];
    m.timestamp = 1'700'000'000'000'000'000ull + i * 1500;
    m.PC = 0x7f00deadbeef;
    m.processId = 4242;
    m.deviceId = 0;
    m.contextId = 1;
    m.streamId = 7;
    m.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
    if (alloc && table != nullptr) {
      table->Put(correlation,
                 cupti::CorrelationInfo{static_cast<uint32_t>(1 + pair % 64), 1, false});
    }
  }
  return b;
}

void ShiftTimestamps(CuptiBuffer* buffer, uint64_t delta_ns) {
  auto* r = reinterpret_cast<CUpti_ActivityMemory4*>(buffer->data());
  for (size_t i = 0; i < buffer->records; ++i) r[i].timestamp += delta_ns;
}

namespace {

int64_t FirstTimestamp(CuptiBuffer& buffer) {
  return static_cast<int64_t>(reinterpret_cast<CUpti_ActivityMemory4*>(buffer.data())->timestamp);
}

// RecordTranslator into an array sink, `rounds` times over `buffer`: the events of one round.
absl::StatusOr<std::vector<Event>> MeasureTranslation(CuptiBuffer& buffer,
                                                      cupti::CorrelationTable& table, int rounds,
                                                      double total, HotPathResult* out) {
  ArraySink sink(buffer.records);
  cupti::RecordTranslator translator(&sink, &table, nullptr, cupti::TranslatorOptions());
  translator.TranslateBuffer(buffer.data(), buffer.valid_bytes);  // warm caches and page faults
  auto t0 = Clock::now();
  for (int i = 0; i < rounds; ++i) translator.TranslateBuffer(buffer.data(), buffer.valid_bytes);
  out->translate_events_per_s = total / Seconds(t0, Clock::now());
  if (sink.count() != buffer.records * (rounds + 1)) {
    return absl::InternalError(absl::StrCat("translated ", sink.count(), " events from ",
                                            buffer.records * (rounds + 1), " records"));
  }
  // The same into a RecordOrder in front of an array sink, as the agent ships it (one clock,
  // nothing held: records pass straight through, counted against released callback events).
  ArraySink behind(buffer.records);
  cupti::RecordOrder order(&behind, 4096, nullptr);
  order.set_records_share_clock(true);
  cupti::RecordTranslator ordered(order.records(), &table, nullptr, cupti::TranslatorOptions());
  ordered.TranslateBuffer(buffer.data(), buffer.valid_bytes);
  t0 = Clock::now();
  for (int i = 0; i < rounds; ++i) ordered.TranslateBuffer(buffer.data(), buffer.valid_bytes);
  out->translate_ordered_events_per_s = total / Seconds(t0, Clock::now());
  return sink.events();
}

// The bare record walk and memcpy of the same bytes, as baselines.
void MeasureBaselines(CuptiBuffer& buffer, int rounds, double total, HotPathResult* out) {
  uint64_t kinds = 0;
  auto t0 = Clock::now();
  for (int i = 0; i < rounds; ++i) {
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer.data(), buffer.valid_bytes, &record) ==
           CUPTI_SUCCESS) {
      kinds += record->kind;
    }
  }
  out->walk_records_per_s = total / Seconds(t0, Clock::now());
  KeepAlive(&kinds);
  std::vector<uint64_t> copy(buffer.storage.size());
  std::memcpy(copy.data(), buffer.data(), buffer.valid_bytes);
  t0 = Clock::now();
  for (int i = 0; i < rounds; ++i) {
    std::memcpy(copy.data(), buffer.data(), buffer.valid_bytes);
    KeepAlive(copy.data());
  }
  const double memcpy_s = Seconds(t0, Clock::now());
  out->memcpy_records_per_s = total / memcpy_s;
  out->buffer_memcpy_ms = memcpy_s / rounds * 1e3;
}

// Both ends of batching, protobuf's way and the wire codec's, on `events` in 4096-event batches;
// the wire codec's bytes are checked against protobuf's.
absl::Status MeasureBatching(std::vector<Event> events, HotPathResult* out) {
  constexpr size_t kBatch = 4096;
  std::vector<std::string> wire;
  v1::EventBatch batch;
  uint64_t wire_bytes = 0;
  double build_s = 0;
  auto t0 = Clock::now();
  for (size_t i = 0; i < events.size(); i += kBatch) {
    const size_t n = std::min(kBatch, events.size() - i);
    const auto b0 = Clock::now();
    EncodeBatch(absl::MakeConstSpan(events).subspan(i, n), {}, AgentCounterValues(), &batch);
    build_s += Seconds(b0, Clock::now());
    wire.emplace_back();
    batch.SerializeToString(&wire.back());
    wire_bytes += wire.back().size();
  }
  out->encode_events_per_s = events.size() / Seconds(t0, Clock::now());
  out->build_events_per_s = events.size() / build_s;
  out->wire_bytes_per_event = static_cast<double>(wire_bytes) / events.size();
  uint64_t decoded = 0;
  t0 = Clock::now();
  for (const std::string& w : wire) {
    v1::EventBatch parsed;
    if (!parsed.ParseFromString(w)) return absl::InternalError("encoded batch does not parse");
    absl::StatusOr<DecodedBatch> d = DecodeBatch(parsed);
    if (!d.ok()) return d.status();
    decoded += d->events.size();
  }
  out->decode_events_per_s = decoded / Seconds(t0, Clock::now());
  std::string sealed;
  t0 = Clock::now();
  for (size_t i = 0, b = 0; i < events.size(); i += kBatch, ++b) {
    const size_t n = std::min(kBatch, events.size() - i);
    const AgentCounterValues counters;
    sealed.clear();
    AppendBatchWire(absl::MakeConstSpan(events).subspan(i, n), {}, &counters, nullptr, &sealed);
    if (sealed != wire[b]) return absl::InternalError("AppendBatchWire differs from protobuf");
  }
  out->wire_encode_events_per_s = events.size() / Seconds(t0, Clock::now());
  decoded = 0;
  t0 = Clock::now();
  for (const std::string& w : wire) {
    absl::StatusOr<DecodedBatch> d = DecodeBatchWire(w);
    if (!d.ok()) return d.status();
    decoded += d->events.size();
  }
  out->wire_decode_events_per_s = decoded / Seconds(t0, Clock::now());

  return absl::OkStatus();
}

// The real Transport streaming to an in-process collector (default durability): the added
// latency per buffer translated into it, and Record / RecordMany against copying the events.
absl::Status MeasureTransport(const HotPathOptions& options, CuptiBuffer& buffer,
                              cupti::CorrelationTable& table, std::vector<Event> events, int rounds,
                              double total, HotPathResult* out) {
  std::error_code ec;
  std::filesystem::remove_all(options.data_dir, ec);
  collector::CollectorServerOptions server_options;
  server_options.listen = "127.0.0.1:0";
  server_options.store.dir = options.data_dir;
  absl::StatusOr<std::unique_ptr<collector::CollectorServer>> server =
      collector::CollectorServer::Start(server_options);
  if (!server.ok()) return server.status();
  TransportOptions t;
  t.collector_address = (*server)->address();
  t.identity.set_job_id("agent-hot-path");
  t.identity.set_rank(0);
  absl::StatusOr<std::unique_ptr<Transport>> transport = Transport::Start(t);
  if (!transport.ok()) return transport.status();
  cupti::RecordTranslator to_transport(transport->get(), &table, nullptr,
                                       cupti::TranslatorOptions());
  // As the agent ships: records through a RecordOrder, here with a STEP waiting in it that the
  // buffer's first later record releases.
  cupti::RecordOrder order(transport->get(), 4096, nullptr);
  order.set_records_share_clock(true);
  cupti::RecordTranslator through_order(order.records(), &table, nullptr,
                                        cupti::TranslatorOptions());
  const uint64_t span_ns = buffer.records * 1500 + 1000;
  std::vector<double> latencies, ordered_latencies;
  double record_s = 0, record_many_s = 0, copy_s = 0;
  std::vector<Event> copied(events.size());
  for (int i = 0; i < rounds; ++i) {
    ShiftTimestamps(&buffer, span_ns);
    auto t0 = Clock::now();
    to_transport.TranslateBuffer(buffer.data(), buffer.valid_bytes);
    latencies.push_back(Seconds(t0, Clock::now()) * 1e3);
    if (absl::Status s = (*transport)->Flush(absl::Seconds(60)); !s.ok()) return s;
    ShiftTimestamps(&buffer, span_ns);
    Event step;
    step.kind = EventKind::kStep;
    step.ts_ns = FirstTimestamp(buffer);
    order.callbacks()->Record(step);
    t0 = Clock::now();
    through_order.TranslateBuffer(buffer.data(), buffer.valid_bytes);
    ordered_latencies.push_back(Seconds(t0, Clock::now()) * 1e3);
    if (absl::Status s = (*transport)->Flush(absl::Seconds(60)); !s.ok()) return s;
    for (Event& e : events) e.ts_ns += static_cast<int64_t>(span_ns);
    t0 = Clock::now();
    for (const Event& e : events) (*transport)->Record(e);
    record_s += Seconds(t0, Clock::now());
    if (absl::Status s = (*transport)->Flush(absl::Seconds(60)); !s.ok()) return s;
    // The same events handed over 128 at a time, as TranslateBuffer does.
    for (Event& e : events) e.ts_ns += static_cast<int64_t>(span_ns);
    t0 = Clock::now();
    for (size_t k = 0; k < events.size(); k += 128) {
      (*transport)->RecordMany(absl::MakeConstSpan(events).subspan(k, 128));
    }
    record_many_s += Seconds(t0, Clock::now());
    if (absl::Status s = (*transport)->Flush(absl::Seconds(60)); !s.ok()) return s;
    t0 = Clock::now();
    for (size_t k = 0; k < events.size(); ++k) copied[k] = events[k];
    KeepAlive(copied.data());
    copy_s += Seconds(t0, Clock::now());
  }
  out->events_lost = (*transport)->stats().events_lost;
  (void)(*transport)->Shutdown(absl::Seconds(10));
  (*server)->Shutdown();
  std::sort(latencies.begin(), latencies.end());
  out->buffer_latency_ms_median = latencies[latencies.size() / 2];
  out->buffer_latency_ms_max = latencies.back();
  std::sort(ordered_latencies.begin(), ordered_latencies.end());
  out->buffer_latency_ordered_ms_median = ordered_latencies[ordered_latencies.size() / 2];
  out->record_ns_per_event = record_s / total * 1e9;
  out->record_many_ns_per_event = record_many_s / total * 1e9;
  out->copy_ns_per_event = copy_s / total * 1e9;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HotPathResult> MeasureHotPath(const HotPathOptions& options) {
  HotPathResult out;
  out.record_bytes = sizeof(CUpti_ActivityMemory4);
  cupti::CorrelationTable table;
  CuptiBuffer buffer = BuildMemoryBuffer(options.buffer_bytes, &table);
  out.records_per_buffer = buffer.records;
  const int rounds = std::max(1, options.buffers);
  const double total = static_cast<double>(buffer.records) * rounds;
  absl::StatusOr<std::vector<Event>> events =
      MeasureTranslation(buffer, table, rounds, total, &out);
  if (!events.ok()) return events.status();
  MeasureBaselines(buffer, rounds, total, &out);
  for (size_t i = 0; i < events->size(); ++i) (*events)[i].seq = i + 1;
  if (absl::Status s = MeasureBatching(*events, &out); !s.ok()) return s;
  if (absl::Status s =
          MeasureTransport(options, buffer, table, *std::move(events), rounds, total, &out);
      !s.ok()) {
    return s;
  }
  return out;
}

}  // namespace memtrace::bench
