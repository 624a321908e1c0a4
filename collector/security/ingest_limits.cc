#include "collector/security/ingest_limits.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace memtrace::security {
namespace {

// memtrace.v1.MemoryKind values are below it (proto/codec/event.h: CUPTI's kinds, pool 100,
// VMM 101).
constexpr uint32_t kMaxMemoryKinds = 128;

}  // namespace

absl::Status CheckIds(const DecodedBatch& batch, const IngestLimits& limits) {
  for (const StringDef& s : batch.strings) {
    if (s.id > limits.max_string_table) {
      return absl::ResourceExhaustedError(
          absl::StrCat("string id ", s.id, " exceeds the stream's string-table limit of ",
                       limits.max_string_table, " (--max_string_table)"));
    }
  }
  for (size_t i = 0; i < batch.events.size(); ++i) {
    const Event& e = batch.events[i];
    const uint32_t id = std::max(e.tag_id, e.source_id);
    if (id > limits.max_string_table) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "event ", i, " refers to string id ", id, ", above the stream's string-table limit of ",
          limits.max_string_table, " (--max_string_table)"));
    }
    if ((e.kind == EventKind::kAlloc || e.kind == EventKind::kVmmMap) &&
        e.memory_kind >= kMaxMemoryKinds) {
      return absl::InvalidArgumentError(absl::StrCat("event ", i, " has memory kind ",
                                                     e.memory_kind, " (kinds are below ",
                                                     kMaxMemoryKinds, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace memtrace::security
