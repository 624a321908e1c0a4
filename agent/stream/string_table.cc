#include "agent/stream/string_table.h"

#include <algorithm>

#include "absl/strings/string_view.h"

namespace memtrace {

namespace {

inline bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not one.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlong forms
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  const unsigned char second = static_cast<unsigned char>(s[i + 1]);
  if (second < lo || second > hi) return 0;
  for (size_t k = 2; k < len; ++k) {
    if (!IsContinuation(static_cast<unsigned char>(s[i + k]))) return 0;
  }
  return len;
}

}  // namespace

std::string SanitizeStringValue(std::string_view value) {
  std::string out;
  out.reserve(std::min(value.size(), kMaxStringValueBytes));
  size_t i = 0;
  while (i < value.size()) {
    size_t len = Utf8SequenceLength(value, i);
    if (len == 0) {
      if (out.size() + 1 > kMaxStringValueBytes) break;
      out.push_back('?');
      ++i;
      continue;
    }
    if (out.size() + len > kMaxStringValueBytes) break;
    out.append(value.data() + i, len);
    i += len;
  }
  return out;
}

StringTable::StringTable(size_t max_strings, size_t max_bytes)
    : max_strings_(max_strings), max_bytes_(max_bytes) {}

size_t StringTable::ByteClass(size_t kind) {
  return kind == static_cast<size_t>(StringKind::kSource) ? 1 : 0;
}

size_t StringTable::BytesFor(size_t kind) const {
  // Sources (call sites, whole stacks with MEMTRACE_STACKS=1: kilobytes each) get three
  // quarters; tags and phases keep the rest, so that stacks cannot leave them unnamed.
  return ByteClass(kind) == 1 ? max_bytes_ / 4 * 3 : max_bytes_ / 4;
}

bool StringTable::IdFits(size_t kind) const {
  if (defs_.size() >= max_strings_) return false;
  // With one shared count, 65536 call sites (MEMTRACE_STACKS=1 stacks, a long run's many
  // backtraces) left every tag and phase named after them unnamed: sources keep a quarter free.
  return ByteClass(kind) == 0 || sources_ < max_strings_ - max_strings_ / 4;
}

uint32_t StringTable::Intern(StringKind kind, std::string_view value) {
  const size_t k = static_cast<size_t>(kind) < 4 ? static_cast<size_t>(kind) : 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Debian's Abseil has its own string_view type, not std::string_view.
    auto it = ids_[k].find(absl::string_view(value.data(), value.size()));
    if (it != ids_[k].end()) return it->second;
  }
  // Not seen: the sanitized form may still be known (a too-long or invalid value is looked up
  // again by what it becomes).
  std::string clean = SanitizeStringValue(value);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ids_[k].find(clean);
  if (it != ids_[k].end()) {
    const uint32_t id = it->second;  // a copy: emplace may rehash and move the entry
    if (clean != value && value.size() <= kMaxStringValueBytes &&
        bytes_[ByteClass(k)] + value.size() <= BytesFor(k)) {
      bytes_[ByteClass(k)] += value.size();
      ids_[k].emplace(std::string(value), id);
    }
    return id;
  }
  // Kept as the definition and as its key, and the raw spelling as a key of its own when
  // sanitizing changed it.
  const bool keep_raw = clean != value && value.size() <= kMaxStringValueBytes;
  const size_t cost = 2 * clean.size() + (keep_raw ? value.size() : 0);
  if (!IdFits(k) || bytes_[ByteClass(k)] + cost > BytesFor(k)) {
    ++refused_;
    return 0;
  }
  bytes_[ByteClass(k)] += cost;
  if (ByteClass(k) == 1) ++sources_;
  const uint32_t id = static_cast<uint32_t>(defs_.size() + 1);
  defs_.push_back(StringDef{id, static_cast<StringKind>(k), clean});
  if (keep_raw) {
    // Remember the raw spelling too so its next lookup is a plain hit (bounded: only values
    // short enough to be stored at all).
    ids_[k].emplace(std::string(value), id);
  }
  ids_[k].emplace(std::move(clean), id);
  pending_.insert(id);
  return id;
}

size_t StringTable::TakeForBatch(absl::Span<const Event> events, size_t max_entries,
                                 size_t max_bytes, std::vector<StringDef>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_.empty()) return events.size();
  size_t bytes = 0;
  for (const StringDef& d : *out) bytes += d.value.size();
  // `force` sends a definition even beyond the bounds: the first event of a batch always goes,
  // or a batch could never be formed.
  auto take = [&](uint32_t id, bool force) -> bool {
    auto it = pending_.find(id);
    if (it == pending_.end()) return true;  // already sent (or 0: nothing to send)
    const StringDef& def = defs_[id - 1];
    if (!force && (out->size() + 1 > max_entries || bytes + def.value.size() > max_bytes)) {
      return false;
    }
    out->push_back(def);
    bytes += def.value.size();
    pending_.erase(it);
    return true;
  };
  size_t covered = 0;
  for (const Event& e : events) {
    if (pending_.empty()) {
      covered = events.size();
      break;
    }
    const bool first = covered == 0;
    if (!take(e.tag_id, first) || !take(e.source_id, first)) break;
    ++covered;
  }
  while (!pending_.empty()) {
    const StringDef& def = defs_[*pending_.begin() - 1];
    if (out->size() + 1 > max_entries || bytes + def.value.size() > max_bytes) break;
    out->push_back(def);
    bytes += def.value.size();
    pending_.erase(pending_.begin());
  }
  return covered;
}

void StringTable::Resend(absl::Span<const StringDef> defs) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const StringDef& d : defs) {
    if (d.id >= 1 && d.id <= defs_.size()) pending_.insert(d.id);
  }
}

void StringTable::ResendAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const StringDef& d : defs_) pending_.insert(d.id);
}

size_t StringTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return defs_.size();
}

uint64_t StringTable::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

bool StringTable::has_pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.empty() == false;
}

}  // namespace memtrace
