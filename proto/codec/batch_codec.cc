#include "proto/codec/batch_codec.h"

#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace memtrace {

namespace {

template <typename Column>
absl::Status CheckColumn(const Column& column, uint32_t count, const char* name) {
  if (column.empty() || static_cast<uint32_t>(column.size()) == count) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("column ", name, " has ", column.size(),
                                                 " entries, batch count is ", count));
}

// The value of an optional column at i: 0 when the column is empty (all default).
template <typename Column>
auto At(const Column& column, int i) -> std::decay_t<decltype(column.Get(0))> {
  return column.empty() ? 0 : column.Get(i);
}

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

absl::StatusOr<DecodedBatch> DecodeBatch(const v1::EventBatch& batch, const BatchLimits& limits) {
  const uint32_t n = batch.count();
  if (n > limits.max_events) {
    return absl::ResourceExhaustedError(
        absl::StrCat("batch has ", n, " events, limit is ", limits.max_events));
  }
  if (static_cast<uint32_t>(batch.strings_size()) > limits.max_strings) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "batch has ", batch.strings_size(), " string entries, limit is ", limits.max_strings));
  }
  if (n > 0 && static_cast<uint32_t>(batch.kind_size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("column kind has ", batch.kind_size(), " entries, batch count is ", n));
  }
  if (n == 0 && batch.kind_size() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch count is 0 but column kind has ", batch.kind_size(), " entries"));
  }
  for (absl::Status s : {CheckColumn(batch.seq_delta(), n, "seq_delta"),
                         CheckColumn(batch.ts_delta(), n, "ts_delta"),
                         CheckColumn(batch.address_delta(), n, "address_delta"),
                         CheckColumn(batch.bytes(), n, "bytes"), CheckColumn(batch.aux(), n, "aux"),
                         CheckColumn(batch.tag_id(), n, "tag_id"),
                         CheckColumn(batch.source_id(), n, "source_id"),
                         CheckColumn(batch.device(), n, "device"),
                         CheckColumn(batch.stream(), n, "stream"),
                         CheckColumn(batch.memory_kind(), n, "memory_kind")}) {
    if (!s.ok()) return s;
  }
  if (n > 0 && batch.first_seq() == 0) {
    return absl::InvalidArgumentError("first_seq is 0; sequence numbers start at 1");
  }

  DecodedBatch out;
  out.events.resize(n);
  uint64_t seq = batch.first_seq();
  int64_t ts = batch.base_ts_ns();
  uint64_t address = 0;
  for (uint32_t i = 0; i < n; ++i) {
    Event& e = out.events[i];
    const uint32_t kind = batch.kind(i);
    if (kind == 0 || kind > kMaxEventKind) {
      return absl::InvalidArgumentError(absl::StrCat("event ", i, " has unknown kind ", kind));
    }
    e.kind = static_cast<EventKind>(kind);
    if (!batch.seq_delta().empty()) {
      const uint64_t delta = batch.seq_delta(i);
      if (i > 0 && delta == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sequence numbers not increasing within batch: event ", i, " repeats seq ", seq));
      }
      if (seq + delta < seq) {
        return absl::InvalidArgumentError(absl::StrCat("sequence number overflow at event ", i));
      }
      seq += delta;
    } else if (i > 0) {
      if (seq == UINT64_MAX) {
        return absl::InvalidArgumentError(absl::StrCat("sequence number overflow at event ", i));
      }
      ++seq;
    }
    e.seq = seq;
    const int64_t ts_delta = At(batch.ts_delta(), i);
    if (__builtin_add_overflow(ts, ts_delta, &ts)) {
      return absl::InvalidArgumentError(absl::StrCat("timestamp overflow at event ", i));
    }
    e.ts_ns = ts;
    address += static_cast<uint64_t>(At(batch.address_delta(), i));
    e.address = address;
    e.bytes = At(batch.bytes(), i);
    e.aux = At(batch.aux(), i);
    e.tag_id = At(batch.tag_id(), i);
    e.source_id = At(batch.source_id(), i);
    e.device = At(batch.device(), i);
    e.stream = At(batch.stream(), i);
    e.memory_kind = At(batch.memory_kind(), i);
  }
  out.strings.reserve(batch.strings_size());
  for (const v1::StringEntry& s : batch.strings()) {
    if (s.id() == 0) return absl::InvalidArgumentError("string entry with id 0 (0 means none)");
    if (s.value().size() > limits.max_string_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("string ", s.id(), " is ", s.value().size(),
                                                     " bytes, limit is ", limits.max_string_bytes));
    }
    if (s.kind() < v1::STRING_KIND_TAG || s.kind() > v1::STRING_KIND_PHASE) {
      return absl::InvalidArgumentError(
          absl::StrCat("string ", s.id(), " has unknown kind ", static_cast<int>(s.kind())));
    }
    out.strings.push_back(StringDef{s.id(), static_cast<StringKind>(s.kind()), s.value()});
  }
  const v1::AgentCounters& c = batch.counters();
  out.counters = AgentCounterValues{c.events_recorded(), c.events_lost(), c.spool_bytes(),
                                    c.reconnects(), c.cupti_records_dropped()};
  return out;
}

}  // namespace memtrace
