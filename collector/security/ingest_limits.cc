#include "collector/security/ingest_limits.h"

#include "absl/strings/str_cat.h"

namespace memtrace::security {

absl::Status CheckStringTable(const DecodedBatch& batch, const IngestLimits& limits) {
  for (const StringDef& s : batch.strings) {
    if (s.id > limits.max_string_table) {
      return absl::ResourceExhaustedError(
          absl::StrCat("string id ", s.id, " exceeds the stream's string-table limit of ",
                       limits.max_string_table, " (--max_string_table)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace memtrace::security
