// Bytes a collector data directory holds once compacted, per column family, measured by opening
// the RocksDB directory the collector left (after it shut down) and compacting every family to
// the bottom level. Optionally recompresses blocks/rollups/checkpoints with another codec to see
// what a change of the collector's options would give (the collector itself is not touched).
#ifndef MEMTRACE_TOOLS_BENCH_STORE_FOOTPRINT_H_
#define MEMTRACE_TOOLS_BENCH_STORE_FOOTPRINT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace memtrace::bench {

struct FamilyFootprint {
  std::string name;
  uint64_t files = 0;
  uint64_t sst_bytes = 0;        // on disk, after compression
  uint64_t entries = 0;          // keys in the SST files
  uint64_t raw_key_bytes = 0;    // before RocksDB's compression
  uint64_t raw_value_bytes = 0;
  // For blocks: the EventBatch bytes the values hold once the store's own LZ4 is undone
  // (collector/store/block_value.h); for other families raw_value_bytes.
  uint64_t decompressed_value_bytes = 0;
};

struct StoreFootprint {
  std::vector<FamilyFootprint> families;
  uint64_t sst_bytes = 0;  // all families
  // The family called `name`; a zero row when absent.
  FamilyFootprint Family(const std::string& name) const;
};

enum class Codec { kAsCollector, kLz4, kZstd, kNone };

struct FootprintOptions {
  // kAsCollector: every family compacted with the options the collector wrote into the
  // directory's OPTIONS file (on Debian's librocksdb: LZ4 for all but blocks, which the store
  // compresses itself). The others: the blocks (over the store's LZ4), rollups and checkpoints
  // recompressed with that codec, the rest as the collector left them.
  Codec codec = Codec::kAsCollector;
  int zstd_level = 3;
  bool compact = true;  // false: flush memtables only
};

// Opens `dir` (no other process may have it open), flushes, compacts every family with the
// bottom level forced, and sums the live SST files and their table properties per family.
absl::StatusOr<StoreFootprint> MeasureStore(const std::string& dir,
                                            const FootprintOptions& options = {});

// Copies the directory `from` to `to` (replacing `to`).
absl::Status CopyDirectory(const std::string& from, const std::string& to);

}  // namespace memtrace::bench

#endif  // MEMTRACE_TOOLS_BENCH_STORE_FOOTPRINT_H_
