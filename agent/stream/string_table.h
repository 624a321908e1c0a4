// A stream's string table: stable ids for (kind, value) and the definitions still to be sent.
//
// A definition must reach the collector in the batch that first uses its id or an earlier one.
// The sender asks TakeForBatch() for the definitions a batch needs: those its events use first,
// then any other pending ones, within per-batch bounds; when the bounds cut a batch short, it
// says how many events are covered so the rest waits for the next batch.
#ifndef MEMTRACE_AGENT_STREAM_STRING_TABLE_H_
#define MEMTRACE_AGENT_STREAM_STRING_TABLE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "proto/codec/event.h"

namespace memtrace {

// The longest value kept (the collector's BatchLimits::max_string_bytes).
inline constexpr size_t kMaxStringValueBytes = 4096;

// `value` cut to at most kMaxStringValueBytes without splitting a UTF-8 sequence, with every
// byte that is not part of valid UTF-8 replaced by '?': proto3 strings must be valid UTF-8 or
// the collector cannot parse the batch.
std::string SanitizeStringValue(std::string_view value);

// The default byte bound of a StringTable: 65536 strings of up to 4096 bytes, each kept twice,
// would have been 0.5 GiB of the training process's memory (MEMTRACE_STACKS=1 sources run to
// kilobytes).
inline constexpr size_t kDefaultMaxStringTableBytes = size_t{32} << 20;

class StringTable {
 public:
  // At most `max_strings` distinct strings get an id, holding at most `max_bytes` of values
  // between them (each value is counted as often as it is kept: its definition, and the keys it
  // is found by): three quarters for sources, a quarter for tags and phases. Sources take at
  // most three quarters of the `max_strings` ids too, so call sites cannot leave new tags and
  // phases unnamed; tags and phases may use any id left. Either bound reached, Intern() returns
  // 0.
  explicit StringTable(size_t max_strings, size_t max_bytes = kDefaultMaxStringTableBytes);

  StringTable(const StringTable&) = delete;
  StringTable& operator=(const StringTable&) = delete;

  // The id (>= 1) of the sanitized (kind, value), assigned on first use and queued for sending;
  // 0 once the table is full. Thread-safe.
  uint32_t Intern(StringKind kind, std::string_view value);

  // Appends to `out` the pending definitions used by `events` (in order of first use), then
  // other pending ones, while `out` stays within `max_entries` and `max_bytes` of values; they
  // are no longer pending. Returns how many leading events have all their ids defined by now
  // (events.size() unless the bounds cut; always >= 1 for a non-empty span). Thread-safe.
  size_t TakeForBatch(absl::Span<const Event> events, size_t max_entries, size_t max_bytes,
                      std::vector<StringDef>* out);

  // Queues definitions again (the batch that carried them was dropped unacknowledged).
  void Resend(absl::Span<const StringDef> defs);
  // Queues every definition again (the collector lost what it had acknowledged).
  void ResendAll();

  size_t size() const;
  uint64_t refused() const;  // Intern() calls that found the table full
  bool has_pending() const;

 private:
  const size_t max_strings_;
  const size_t max_bytes_;
  // Guards everything below. std::mutex, visible to ThreadSanitizer (Debian's Abseil is not
  // instrumented).
  mutable std::mutex mu_;
  // One map per kind so lookups take a string_view without building a key.
  std::array<absl::flat_hash_map<std::string, uint32_t>, 4> ids_;
  std::vector<StringDef> defs_;  // defs_[id - 1]
  std::set<uint32_t> pending_;
  uint64_t refused_ = 0;
  // Of values kept, as max_bytes_ counts them: [0] tags and phases, [1] sources.
  size_t bytes_[2] = {0, 0};
  size_t sources_ = 0;  // ids given to sources
  static size_t ByteClass(size_t kind);
  size_t BytesFor(size_t kind) const;
  // Whether one more id of `kind` fits the count bound.
  bool IdFits(size_t kind) const;
};

}  // namespace memtrace

#endif  // MEMTRACE_AGENT_STREAM_STRING_TABLE_H_
