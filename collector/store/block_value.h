// The value of a `blocks` row: a batch's EventBatch wire bytes, LZ4-compressed once, by the
// store, when the batch is appended. The family itself is left uncompressed: RocksDB would
// otherwise compress every flush and recompress at every compaction, and since each stream writes
// its own key range at the same time, every compaction rewrites nearly everything. Compressed
// here, the WAL, the memtables, flushes and compactions all move ~3x fewer bytes and nothing is
// compressed twice (docs/PERFORMANCE.md, "Profiles").
//
// Format: 0x00, the uncompressed size as a varint, the LZ4 block. An EventBatch never starts
// with a 0x00 byte (no field has number 0), so a value without the marker is a block stored
// uncompressed by an older collector, and reads as it is.
#ifndef MEMTRACE_COLLECTOR_STORE_BLOCK_VALUE_H_
#define MEMTRACE_COLLECTOR_STORE_BLOCK_VALUE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memtrace::collector {

// The stored value of a block whose EventBatch bytes are `batch`, written into `scratch` and
// valid until `scratch` next changes. `scratch` only grows: the store compresses block after
// block of about the same size through one per thread, and a fresh string per block cost an
// allocation, the zeroing of LZ4's worst case (~200 KB) and its page faults.
absl::string_view CompressBlock(absl::string_view batch, std::string* scratch);

// The EventBatch bytes of a stored value: `value` itself for an uncompressed one, or the bytes
// decompressed into `scratch`. DATA_LOSS when a compressed value is damaged.
absl::StatusOr<absl::string_view> BlockBatchBytes(absl::string_view value, std::string* scratch);

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_STORE_BLOCK_VALUE_H_
