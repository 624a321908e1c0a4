// RocksDB key layout of the collector store: fixed-width big-endian fields, so that one stream's
// rows are one contiguous, correctly ordered key range and a prefix seek finds them.
//
// Column families and their keys (see collector/README.md for the values):
//   blocks:      job_no(4) rank(4) attempt(4) first_seq(8)                 -> EventBatch bytes
//   rollups:     job_no(4) rank(4) attempt(4) axis(1) key(8, offset binary) -> StepRollup bytes
//   checkpoints: job_no(4) rank(4) attempt(4) seq(8)                       -> RankState bytes
//   meta:        tag(1) ...                                                -> records.proto messages
// Decoders reject keys of the wrong length or tag, so a corrupt or foreign key is an error, never a
// misread.
#ifndef MEMTRACE_COLLECTOR_STORE_KEY_CODEC_H_
#define MEMTRACE_COLLECTOR_STORE_KEY_CODEC_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memtrace::collector {

// One stream in the store: a job's number (assigned on first sight), the stored rank number and
// the attempt. Orders like its encoded key.
struct StreamKey {
  uint32_t job_no = 0;
  uint32_t rank = 0;
  uint32_t attempt = 0;

  bool operator==(const StreamKey& o) const {
    return job_no == o.job_no && rank == o.rank && attempt == o.attempt;
  }
  bool operator<(const StreamKey& o) const {
    if (job_no != o.job_no) return job_no < o.job_no;
    if (rank != o.rank) return rank < o.rank;
    return attempt < o.attempt;
  }
  template <typename H>
  friend H AbslHashValue(H h, const StreamKey& k) {
    return H::combine(std::move(h), k.job_no, k.rank, k.attempt);
  }
};

// Which rollup series a row belongs to. Values are stored in keys: never renumber.
enum class RollupAxis : uint8_t { kStep = 0, kTime = 1 };

inline constexpr size_t kStreamKeyBytes = 12;
inline constexpr size_t kBlockKeyBytes = 20;
inline constexpr size_t kRollupKeyBytes = 21;
inline constexpr size_t kCheckpointKeyBytes = 20;

// The 4-byte job prefix and the 12-byte stream prefix shared by blocks, rollups and checkpoints.
std::string JobPrefix(uint32_t job_no);
std::string StreamPrefix(const StreamKey& stream);

std::string BlockKey(const StreamKey& stream, uint64_t first_seq);
struct BlockKeyParts {
  StreamKey stream;
  uint64_t first_seq = 0;
};
absl::StatusOr<BlockKeyParts> DecodeBlockKey(absl::string_view key);

// The prefix of every rollup row of one stream on one axis.
std::string RollupPrefix(const StreamKey& stream, RollupAxis axis);
// `key` is a step number or a time-bucket index; negative values sort before positive ones.
std::string RollupKey(const StreamKey& stream, RollupAxis axis, int64_t key);
struct RollupKeyParts {
  StreamKey stream;
  RollupAxis axis = RollupAxis::kStep;
  int64_t key = 0;
};
absl::StatusOr<RollupKeyParts> DecodeRollupKey(absl::string_view key);

// `seq` is the last sequence number the checkpointed state includes.
std::string CheckpointKey(const StreamKey& stream, uint64_t seq);
struct CheckpointKeyParts {
  StreamKey stream;
  uint64_t seq = 0;
};
absl::StatusOr<CheckpointKeyParts> DecodeCheckpointKey(absl::string_view key);

// Meta column family. The first byte says what a row is; values are records.proto messages.
enum class MetaTag : uint8_t {
  kJob = 'J',          // 'J' job name (raw bytes)                -> JobRecord
  kStream = 'R',       // 'R' stream(12)                          -> StreamRecord
  kString = 'S',       // 'S' stream(12) string_id(4)             -> memtrace.v1.StringEntry
  kSynthetic = 'H',    // 'H' job_no(4) device(4) pid(4) host      -> uint32 rank (4 bytes BE)
  kSyntheticStarted = 'P',  // 'P' job_no(4) device(4) pid(4) start_ns(8) host -> the same
  kCheckpointTs = 'C'  // 'C' stream(12) seq(8)                   -> int64 ts (8 bytes BE)
};

std::string JobMetaKey(absl::string_view job_id);
absl::StatusOr<std::string> DecodeJobMetaKey(absl::string_view key);

std::string StreamMetaKey(const StreamKey& stream);
// The prefix of every StreamRecord row of one job.
std::string StreamMetaPrefix(uint32_t job_no);
// The records of one rank's streams (all its attempts).
std::string StreamMetaPrefix(uint32_t job_no, uint32_t rank);
absl::StatusOr<StreamKey> DecodeStreamMetaKey(absl::string_view key);

std::string StringMetaPrefix(const StreamKey& stream);
std::string StringMetaKey(const StreamKey& stream, uint32_t string_id);
struct StringMetaKeyParts {
  StreamKey stream;
  uint32_t string_id = 0;
};
absl::StatusOr<StringMetaKeyParts> DecodeStringMetaKey(absl::string_view key);

// A worker without a launcher rank is named by host, device ordinal and pid within its job.
// The row naming a worker without a launcher rank: by host, device and pid, and by its
// process_start_ns when the agent sent one (then a separate tag, so that keys of agents that
// did not stay as they were).
std::string SyntheticRankKey(uint32_t job_no, absl::string_view host, int32_t device, uint32_t pid,
                             uint64_t start_ns);

std::string CheckpointTsPrefix(const StreamKey& stream);
std::string CheckpointTsKey(const StreamKey& stream, uint64_t seq);
absl::StatusOr<CheckpointKeyParts> DecodeCheckpointTsKey(absl::string_view key);

// Fixed-width big-endian scalars used in keys and small values.
void PutU32(std::string* out, uint32_t v);
void PutU64(std::string* out, uint64_t v);
absl::StatusOr<uint32_t> DecodeU32(absl::string_view bytes);
absl::StatusOr<uint64_t> DecodeU64(absl::string_view bytes);
// int64 as offset binary (sign bit flipped) so byte order equals numeric order.
void PutOrderedI64(std::string* out, int64_t v);
absl::StatusOr<int64_t> DecodeOrderedI64(absl::string_view bytes);

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_STORE_KEY_CODEC_H_
