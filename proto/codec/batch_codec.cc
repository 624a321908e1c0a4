#include "proto/codec/batch_codec.h"

#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace memtrace {

namespace {

// Fills a column only when some value differs from the default, so sparse columns cost nothing.
template <typename Field, typename Get>
void FillColumn(absl::Span<const Event> events, Field* column, Get get) {
  bool any = false;
  for (const Event& e : events) {
    if (get(e) != 0) {
      any = true;
      break;
    }
  }
  if (!any) return;
  column->Reserve(events.size());
  for (const Event& e : events) column->Add(get(e));
}

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

}  // namespace

void EncodeBatch(absl::Span<const Event> events, absl::Span<const StringDef> strings,
                 const AgentCounterValues& counters, v1::EventBatch* out) {
  out->Clear();
  out->set_count(static_cast<uint32_t>(events.size()));
  if (!events.empty()) {
    out->set_first_seq(events[0].seq);
    out->set_base_ts_ns(events[0].ts_ns);
    bool consecutive = true;
    for (size_t i = 1; i < events.size(); ++i) {
      if (events[i].seq != events[i - 1].seq + 1) {
        consecutive = false;
        break;
      }
    }
    auto* kinds = out->mutable_kind();
    kinds->Reserve(events.size());
    for (const Event& e : events) kinds->Add(static_cast<uint32_t>(e.kind));
    if (!consecutive) {
      auto* col = out->mutable_seq_delta();
      col->Reserve(events.size());
      col->Add(0);
      for (size_t i = 1; i < events.size(); ++i) col->Add(events[i].seq - events[i - 1].seq);
    }
    {
      auto* col = out->mutable_ts_delta();
      col->Reserve(events.size());
      int64_t prev = events[0].ts_ns;
      for (const Event& e : events) {
        // Wrapping subtraction in unsigned space: decode adds it back the same way.
        col->Add(static_cast<int64_t>(static_cast<uint64_t>(e.ts_ns) - static_cast<uint64_t>(prev)));
        prev = e.ts_ns;
      }
    }
    bool any_address = false;
    for (const Event& e : events) any_address |= e.address != 0;
    if (any_address) {
      auto* col = out->mutable_address_delta();
      col->Reserve(events.size());
      uint64_t prev = 0;
      for (const Event& e : events) {
        col->Add(static_cast<int64_t>(e.address - prev));
        prev = e.address;
      }
    }
    FillColumn(events, out->mutable_bytes(), [](const Event& e) { return e.bytes; });
    FillColumn(events, out->mutable_aux(), [](const Event& e) { return e.aux; });
    FillColumn(events, out->mutable_tag_id(), [](const Event& e) { return e.tag_id; });
    FillColumn(events, out->mutable_source_id(), [](const Event& e) { return e.source_id; });
    FillColumn(events, out->mutable_device(), [](const Event& e) { return e.device; });
    FillColumn(events, out->mutable_stream(), [](const Event& e) { return e.stream; });
    FillColumn(events, out->mutable_memory_kind(), [](const Event& e) { return e.memory_kind; });
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
