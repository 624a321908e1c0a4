#include "proto/codec/batch_codec.h"

#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "proto/codec/batch_decode_core.h"

namespace memtrace {

namespace {

// Yields a repeated field's values in order; 0s when the field is empty (an all-default column).
template <typename T>
struct RepeatedCursor {
  const google::protobuf::RepeatedField<T>* column;
  int i = 0;
  T Next() { return column->empty() ? T{0} : column->Get(i++); }
};

// Room for `n` values at the end of `column`, uninitialized, to be written through the pointer.
template <typename T>
T* Grow(google::protobuf::RepeatedField<T>* column, int n) {
  column->Reserve(n);
  return column->AddNAlreadyReserved(n);
}

}  // namespace

void EncodeBatch(absl::Span<const Event> events, absl::Span<const StringDef> strings,
                 const AgentCounterValues& counters, v1::EventBatch* out) {
  out->Clear();
  out->set_count(static_cast<uint32_t>(events.size()));
  if (!events.empty()) {
    const int n = static_cast<int>(events.size());
    out->set_first_seq(events[0].seq);
    out->set_base_ts_ns(events[0].ts_ns);
    // One pass over the events writes every column (instead of a scan and a fill per column:
    // EncodeBatch runs on every batch in the agent and again in the collector's store); columns
    // that turn out to be all default, and seq_delta when the sequence is consecutive, are
    // emptied afterwards.
    uint32_t* kind = Grow(out->mutable_kind(), n);
    uint64_t* seq_delta = Grow(out->mutable_seq_delta(), n);
    int64_t* ts_delta = Grow(out->mutable_ts_delta(), n);
    int64_t* address_delta = Grow(out->mutable_address_delta(), n);
    uint64_t* bytes = Grow(out->mutable_bytes(), n);
    uint64_t* aux = Grow(out->mutable_aux(), n);
    uint32_t* tag_id = Grow(out->mutable_tag_id(), n);
    uint32_t* source_id = Grow(out->mutable_source_id(), n);
    uint32_t* device = Grow(out->mutable_device(), n);
    uint32_t* stream = Grow(out->mutable_stream(), n);
    uint32_t* memory_kind = Grow(out->mutable_memory_kind(), n);
    bool consecutive = true;
    uint64_t any_address = 0, any_bytes = 0, any_aux = 0;
    uint32_t any_tag = 0, any_source = 0, any_device = 0, any_stream = 0, any_memory_kind = 0;
    uint64_t prev_seq = events[0].seq;
    uint64_t prev_ts = static_cast<uint64_t>(events[0].ts_ns);
    uint64_t prev_address = 0;
    for (int i = 0; i < n; ++i) {
      const Event& e = events[i];
      kind[i] = static_cast<uint32_t>(e.kind);
      seq_delta[i] = e.seq - prev_seq;  // 0 for the first event
      consecutive &= i == 0 || e.seq == prev_seq + 1;
      prev_seq = e.seq;
      // Wrapping subtraction in unsigned space: decode adds it back the same way.
      ts_delta[i] = static_cast<int64_t>(static_cast<uint64_t>(e.ts_ns) - prev_ts);
      prev_ts = static_cast<uint64_t>(e.ts_ns);
      address_delta[i] = static_cast<int64_t>(e.address - prev_address);
      prev_address = e.address;
      any_address |= e.address;
      bytes[i] = e.bytes;
      any_bytes |= e.bytes;
      aux[i] = e.aux;
      any_aux |= e.aux;
      tag_id[i] = e.tag_id;
      any_tag |= e.tag_id;
      source_id[i] = e.source_id;
      any_source |= e.source_id;
      device[i] = e.device;
      any_device |= e.device;
      stream[i] = e.stream;
      any_stream |= e.stream;
      memory_kind[i] = e.memory_kind;
      any_memory_kind |= e.memory_kind;
    }
    if (consecutive) out->clear_seq_delta();
    if (any_address == 0) out->clear_address_delta();
    if (any_bytes == 0) out->clear_bytes();
    if (any_aux == 0) out->clear_aux();
    if (any_tag == 0) out->clear_tag_id();
    if (any_source == 0) out->clear_source_id();
    if (any_device == 0) out->clear_device();
    if (any_stream == 0) out->clear_stream();
    if (any_memory_kind == 0) out->clear_memory_kind();
  }
  for (const StringDef& s : strings) {
    v1::StringEntry* entry = out->add_strings();
    entry->set_id(s.id);
    entry->set_kind(static_cast<v1::StringKind>(s.kind));
    entry->set_value(s.value);
  }
  v1::AgentCounters* c = out->mutable_counters();
  c->set_events_recorded(counters.events_recorded);
  c->set_events_lost(counters.events_lost);
  c->set_spool_bytes(counters.spool_bytes);
  c->set_reconnects(counters.reconnects);
  c->set_cupti_records_dropped(counters.cupti_records_dropped);
}

absl::StatusOr<ClockEstimate> CheckClock(int64_t offset_ns, int64_t round_trip_ns) {
  if (round_trip_ns < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("clock estimate has a negative round trip: ", round_trip_ns, " ns"));
  }
  if (offset_ns > kMaxClockOffsetNs || offset_ns < -kMaxClockOffsetNs) {
    return absl::InvalidArgumentError(
        absl::StrCat("clock estimate offset ", offset_ns, " ns is beyond +-2^61 ns"));
  }
  return ClockEstimate{offset_ns, round_trip_ns};
}

absl::StatusOr<DecodedBatch> DecodeBatch(const v1::EventBatch& batch, const BatchLimits& limits) {
  namespace ci = codec_internal;
  const uint32_t n = batch.count();
  const uint32_t sizes[ci::kNumColumns] = {
      static_cast<uint32_t>(batch.kind_size()),          static_cast<uint32_t>(batch.seq_delta_size()),
      static_cast<uint32_t>(batch.ts_delta_size()),      static_cast<uint32_t>(batch.address_delta_size()),
      static_cast<uint32_t>(batch.bytes_size()),         static_cast<uint32_t>(batch.aux_size()),
      static_cast<uint32_t>(batch.tag_id_size()),        static_cast<uint32_t>(batch.source_id_size()),
      static_cast<uint32_t>(batch.device_size()),        static_cast<uint32_t>(batch.stream_size()),
      static_cast<uint32_t>(batch.memory_kind_size())};
  if (absl::Status s = ci::CheckShape(n, static_cast<size_t>(batch.strings_size()), sizes,
                                      batch.first_seq(), limits);
      !s.ok()) {
    return s;
  }
  DecodedBatch out;
  RepeatedCursor<uint32_t> kind{&batch.kind()};
  RepeatedCursor<uint64_t> seq_delta{&batch.seq_delta()};
  RepeatedCursor<int64_t> ts_delta{&batch.ts_delta()};
  RepeatedCursor<int64_t> address_delta{&batch.address_delta()};
  RepeatedCursor<uint64_t> bytes{&batch.bytes()};
  RepeatedCursor<uint64_t> aux{&batch.aux()};
  RepeatedCursor<uint32_t> tag_id{&batch.tag_id()};
  RepeatedCursor<uint32_t> source_id{&batch.source_id()};
  RepeatedCursor<uint32_t> device{&batch.device()};
  RepeatedCursor<uint32_t> stream{&batch.stream()};
  RepeatedCursor<uint32_t> memory_kind{&batch.memory_kind()};
  if (absl::Status s = ci::DecodeEvents(n, batch.first_seq(), batch.base_ts_ns(), kind,
                                        !batch.seq_delta().empty(), seq_delta, ts_delta,
                                        address_delta, bytes, aux, tag_id, source_id, device,
                                        stream, memory_kind, &out.events);
      !s.ok()) {
    return s;
  }
  out.strings.reserve(batch.strings_size());
  for (const v1::StringEntry& s : batch.strings()) {
    if (absl::Status st = ci::AddString(s, limits, &out.strings); !st.ok()) return st;
  }
  out.counters = ci::CountersFrom(batch.counters());
  if (batch.has_clock()) {
    absl::StatusOr<ClockEstimate> clock =
        CheckClock(batch.clock().offset_ns(), batch.clock().round_trip_ns());
    if (!clock.ok()) return clock.status();
    out.clock = *clock;
  }
  if (batch.collector_time_horizon_ns() != 0) {
    out.time_horizon_ns = batch.collector_time_horizon_ns();
  }
  return out;
}

}  // namespace memtrace
