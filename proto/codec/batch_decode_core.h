// Internal to batch_codec.cc and batch_wire.cc: the validation both decoders share, written
// once so that they cannot drift apart (same checks, same order, same messages). A decoder
// supplies the column sizes and one cursor per column that yields the column's values in order
// (0 for an empty column).
#ifndef MEMTRACE_PROTO_CODEC_BATCH_DECODE_CORE_H_
#define MEMTRACE_PROTO_CODEC_BATCH_DECODE_CORE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "proto/codec/batch_codec.h"
#include "proto/codec/event.h"
#include "proto/memtrace/v1/events.pb.h"

namespace memtrace::codec_internal {

// Entries per column, in field order (kind first); 0 = empty column.
enum Column : int {
  kKind = 0,
  kSeqDelta,
  kTsDelta,
  kAddressDelta,
  kBytes,
  kAux,
  kTagId,
  kSourceId,
  kDevice,
  kStream,
  kMemoryKind,
  kNumColumns
};
inline constexpr const char* kColumnNames[kNumColumns] = {
    "kind",  "seq_delta", "ts_delta", "address_delta", "bytes",      "aux",
    "tag_id", "source_id", "device",  "stream",        "memory_kind"};

// Count, string-entry count and column lengths against the limits and each other, and
// first_seq >= 1: everything DecodeBatch checks before looking at a value.
inline absl::Status CheckShape(uint32_t n, size_t string_entries,
                               const uint32_t (&sizes)[kNumColumns], uint64_t first_seq,
                               const BatchLimits& limits) {
  if (n > limits.max_events) {
    return absl::ResourceExhaustedError(
        absl::StrCat("batch has ", n, " events, limit is ", limits.max_events));
  }
  if (string_entries > limits.max_strings) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "batch has ", string_entries, " string entries, limit is ", limits.max_strings));
  }
  if (n > 0 && sizes[kKind] != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("column kind has ", sizes[kKind], " entries, batch count is ", n));
  }
  if (n == 0 && sizes[kKind] != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch count is 0 but column kind has ", sizes[kKind], " entries"));
  }
  for (int c = kSeqDelta; c < kNumColumns; ++c) {
    if (sizes[c] != 0 && sizes[c] != n) {
      return absl::InvalidArgumentError(absl::StrCat("column ", kColumnNames[c], " has ",
                                                     sizes[c], " entries, batch count is ", n));
    }
  }
  if (n > 0 && first_seq == 0) {
    return absl::InvalidArgumentError("first_seq is 0; sequence numbers start at 1");
  }
  return absl::OkStatus();
}

// Decodes every event (DecodeEvents' default).
struct NeverStop {
  bool operator()(uint64_t /*seq*/, int64_t /*ts_ns*/) const { return false; }
};

// Fills `events` (resized to n) from the column cursors, checking known kinds, strictly
// increasing sequence numbers and timestamps without overflow. Each Cursor has Next() (the next
// value of its column, 0 for an empty column); seq_delta_present says whether seq_delta has
// values. Shape must have been checked. Stops, leaving the events before it, at the first event
// for which stop(seq, ts_ns) is true; the rest of the columns are then not read (nor checked).
template <typename KindCursor, typename U64Cursor, typename S64Cursor, typename U32Cursor,
          typename Stop = NeverStop>
absl::Status DecodeEvents(uint32_t n, uint64_t first_seq, int64_t base_ts_ns, KindCursor& kind,
                          bool seq_delta_present, U64Cursor& seq_delta, S64Cursor& ts_delta,
                          S64Cursor& address_delta, U64Cursor& bytes, U64Cursor& aux,
                          U32Cursor& tag_id, U32Cursor& source_id, U32Cursor& device,
                          U32Cursor& stream, U32Cursor& memory_kind, std::vector<Event>* events,
                          Stop stop = Stop()) {
  // Appended one by one rather than resized and overwritten: zeroing n events first cost as
  // much as a column's decoding.
  events->clear();
  events->reserve(n);
  uint64_t seq = first_seq;
  int64_t ts = base_ts_ns;
  uint64_t address = 0;
  for (uint32_t i = 0; i < n; ++i) {
    Event& e = events->emplace_back();
    const uint32_t k = kind.Next();
    if (k == 0 || k > kMaxEventKind) {
      return absl::InvalidArgumentError(absl::StrCat("event ", i, " has unknown kind ", k));
    }
    e.kind = static_cast<EventKind>(k);
    if (seq_delta_present) {
      const uint64_t delta = seq_delta.Next();
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
    if (__builtin_add_overflow(ts, ts_delta.Next(), &ts)) {
      return absl::InvalidArgumentError(absl::StrCat("timestamp overflow at event ", i));
    }
    e.ts_ns = ts;
    if (stop(seq, ts)) {
      events->pop_back();
      return absl::OkStatus();
    }
    address += static_cast<uint64_t>(address_delta.Next());
    e.address = address;
    e.bytes = bytes.Next();
    e.aux = aux.Next();
    e.tag_id = tag_id.Next();
    e.source_id = source_id.Next();
    e.device = device.Next();
    e.stream = stream.Next();
    e.memory_kind = memory_kind.Next();
  }
  return absl::OkStatus();
}

// Validates one string-table entry and appends it to `out`.
inline absl::Status AddString(const v1::StringEntry& s, const BatchLimits& limits,
                              std::vector<StringDef>* out) {
  if (s.id() == 0) return absl::InvalidArgumentError("string entry with id 0 (0 means none)");
  if (s.value().size() > limits.max_string_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("string ", s.id(), " is ", s.value().size(),
                                                   " bytes, limit is ", limits.max_string_bytes));
  }
  if (s.kind() < v1::STRING_KIND_TAG || s.kind() > v1::STRING_KIND_PHASE) {
    return absl::InvalidArgumentError(
        absl::StrCat("string ", s.id(), " has unknown kind ", static_cast<int>(s.kind())));
  }
  out->push_back(StringDef{s.id(), static_cast<StringKind>(s.kind()), s.value()});
  return absl::OkStatus();
}

inline AgentCounterValues CountersFrom(const v1::AgentCounters& c) {
  return AgentCounterValues{c.events_recorded(), c.events_lost(), c.spool_bytes(),
                            c.reconnects(), c.cupti_records_dropped()};
}

}  // namespace memtrace::codec_internal

#endif  // MEMTRACE_PROTO_CODEC_BATCH_DECODE_CORE_H_
