// The on-disk spool: a BatchStore (batch_store.h) for long collector outages that keeps the
// newest unacknowledged batches in memory and spills older ones to files under
// MEMTRACE_SPOOL_DIR, so a rank can ride out minutes without the collector while the agent's
// memory stays bounded.
//
// Bounds: memory holds at most `memory_bytes` of batches (the newest; TransportOptions::
// max_unacked_bytes), the spool directory at most `disk_bytes` (the older ones). Beyond both,
// the oldest batches are dropped and handed back to the Transport, which reports them as one
// LOSS_REASON_SPOOL_FULL marker with the exact number of events. Every batch stays until the
// collector acknowledges it, so a reconnect resends everything unacknowledged, oldest first.
//
// One file per batch (its serialized memtrace.v1.EventBatch) in a directory of its own per
// Transport: "<job>.r<rank>.a<attempt>.p<pid>.<n>" under the spool directory; removed when the
// store is destroyed. Directories left by processes that no longer run (kill -9) are removed
// when a new store starts in the same spool directory. Files are not fsynced: the spool outlives
// a collector outage, not the agent's own process (whose sequence numbers die with it).
//
// Failures (directory not creatable, disk full, unreadable file) are printed once per kind
// ("memtrace-agent: spool: ...") and never stop the transport: a batch that cannot be spilled
// is dropped as a loss like one beyond the bound; an unreadable spilled batch is skipped and
// counted in spool_read_lost() (unreadable_events(), which the Transport reports as a
// LOSS_REASON_SPOOL_FULL marker). A spilled batch rewritten to carry string definitions is
// written to a new file and renamed over the old one, so a failed rewrite loses only the
// definitions. Not thread-safe (the Transport serializes calls).
#ifndef MEMTRACE_AGENT_STREAM_SPOOL_H_
#define MEMTRACE_AGENT_STREAM_SPOOL_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/stream/batch_store.h"
#include "agent/stream/transport_options.h"

namespace memtrace {

// Spool size when MEMTRACE_SPOOL_DIR is set and MEMTRACE_SPOOL_MAX_BYTES is not (or 0).
inline constexpr uint64_t kDefaultSpoolMaxBytes = uint64_t{1} << 30;

class SpoolBatchStore final : public BatchStore {
 public:
  // Creates the store's own directory under `spool_dir` (with parents), named after
  // `identity`, and removes stale sibling directories of dead processes. Fails (naming the
  // directory) when it cannot be created.
  static absl::StatusOr<std::unique_ptr<SpoolBatchStore>> Create(
      const std::string& spool_dir, const v1::RankIdentity& identity, uint64_t memory_bytes,
      uint64_t disk_bytes, bool log_failures);
  ~SpoolBatchStore() override;  // removes its files and directory

  void Append(SealedBatch batch, uint64_t keep_through, std::vector<SealedBatch>* dropped) override;
  void Acknowledge(uint64_t durable_seq) override;
  // A spilled batch is read back from its file.
  std::optional<SealedBatch> NextAfter(uint64_t seq) const override;
  void AddStringsAfter(uint64_t seq, absl::Span<const StringDef> defs) override;
  size_t batches() const override { return disk_.size() + memory_.size(); }
  // Memory and disk together.
  uint64_t bytes() const override { return memory_bytes_ + disk_bytes_; }
  uint64_t BytesAfter(uint64_t seq) const override;

  uint64_t disk_bytes() const { return disk_bytes_; }
  size_t disk_batches() const { return disk_.size(); }
  // Batches spilled to disk so far, and events of spilled batches whose file could not be read
  // back (reported on stderr, and by the Transport as a loss).
  uint64_t spilled() const { return spilled_; }
  uint64_t spool_read_lost() const { return read_lost_; }
  uint64_t unreadable_events() const override { return read_lost_; }
  const std::string& dir() const { return dir_; }

 private:
  // A batch on disk: everything of SealedBatch but the bytes, which are in `path`.
  struct DiskBatch {
    SealedBatch meta;  // bytes == nullptr
    uint64_t size = 0;
    std::string path;
  };
  enum class Problem { kWrite, kRead, kRemove };

  // `lock_fd`: the directory's lock file, flock()ed; closed by the destructor (-1: none).
  SpoolBatchStore(std::string dir, uint64_t memory_bytes, uint64_t disk_limit, bool log,
                  int lock_fd);
  // Moves the oldest memory batch to disk; false (batch left in memory) when writing fails.
  bool SpillOldest();
  // Drops the disk batch BatchToDrop picks.
  void DropFromDisk(uint64_t keep_through, std::vector<SealedBatch>* dropped);
  std::shared_ptr<const std::string> ReadBatch(const DiskBatch& b) const;
  void Report(Problem problem, const std::string& message) const;

  const std::string dir_;
  const uint64_t memory_limit_;
  const uint64_t disk_limit_;
  const bool log_;
  const int lock_fd_;
  // NextAfter() is const for the interface, but a spilled batch whose file cannot be read back
  // is forgotten there (it cannot be sent), hence mutable.
  mutable std::deque<DiskBatch> disk_;  // oldest batches, in seq order
  std::deque<SealedBatch> memory_;      // newer batches, in seq order
  uint64_t memory_bytes_ = 0;
  mutable uint64_t disk_bytes_ = 0;
  uint64_t spilled_ = 0;
  uint64_t next_file_ = 0;
  mutable uint64_t read_lost_ = 0;
  mutable bool reported_[3] = {false, false, false};
};

// The BatchStore a Transport with `options` uses: a SpoolBatchStore when options.spool_dir is
// set (spool_max_bytes, 0 = kDefaultSpoolMaxBytes), else a MemoryBatchStore bounded by
// max_unacked_bytes. A spool directory that cannot be created is reported once on stderr and
// the memory store is used instead: the spool never keeps the transport from starting.
std::unique_ptr<BatchStore> MakeBatchStore(const TransportOptions& options);

}  // namespace memtrace

#endif  // MEMTRACE_AGENT_STREAM_SPOOL_H_
