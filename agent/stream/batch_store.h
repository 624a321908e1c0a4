// Where encoded batches wait between being formed and being acknowledged by the collector.
//
// BatchStore is the seam for the on-disk spool (spool.h): MemoryBatchStore keeps batches in
// memory under a byte bound; the spool keeps the newest in memory and spills the rest to
// MEMTRACE_SPOOL_DIR behind the same interface. Not thread-safe: the Transport serializes
// every call under a lock of the store's own, never the one Record() takes, since a spool's
// calls do file I/O.
#ifndef MEMTRACE_AGENT_STREAM_BATCH_STORE_H_
#define MEMTRACE_AGENT_STREAM_BATCH_STORE_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "proto/codec/event.h"

namespace memtrace {

// One encoded batch. `bytes` is a serialized memtrace.v1.EventBatch, shared so that a reader
// can send it without copying while the store moves on.
struct SealedBatch {
  uint64_t first_seq = 0;
  uint64_t last_seq = 0;
  // Events it holds, loss markers excluded.
  uint64_t events = 0;
  // Sum of the loss markers' aux it holds, by LossReasonValue: if the batch itself is dropped,
  // those losses must be reported again.
  std::array<uint64_t, kLossCollectorLost + 1> marker_losses = {};
  bool has_strings = false;
  std::shared_ptr<const std::string> bytes;
};

// The collector's per-batch bound on string entries (BatchLimits::max_strings): a batch the
// agent sends must stay within it, or the collector refuses it on every resend.
inline constexpr size_t kMaxStringsPerBatch = 4096;
// The agent's own bound on a batch's string values, far below the collector's default 16 MiB
// message limit (values are up to 4096 B each), leaving room for the events.
inline constexpr size_t kMaxStringBytesPerBatch = 1 << 20;

// `batch_bytes` (a serialized EventBatch) with the definitions of `defs` it lacks added: ids
// it already defines, or that come twice in `defs`, are skipped, so a batch that inherits the
// definitions of dropped batches again and again grows by each id once. Stops at
// kMaxStringsPerBatch entries (the ids left out still reach the collector in the next new
// batch, which the Transport queues them for), and at kMaxStringBytesPerBatch of values. Null
// when the bytes do not parse or nothing is added.
std::shared_ptr<std::string> WithStringDefs(const std::string& batch_bytes,
                                            absl::Span<const StringDef> defs);

// Which of `batches` (in seq order, not empty) a store over its bound drops: the oldest that
// ends after `keep_through` (see BatchStore::Append), else the oldest. `last_seq` reads a
// batch's last seq.
template <typename Batches, typename LastSeq>
typename Batches::iterator BatchToDrop(Batches& batches, uint64_t keep_through, LastSeq last_seq) {
  auto it = std::upper_bound(batches.begin(), batches.end(), keep_through,
                             [&](uint64_t s, const auto& b) { return s < last_seq(b); });
  return it != batches.end() ? it : batches.begin();
}

class BatchStore {
 public:
  virtual ~BatchStore() = default;

  // Takes a batch whose first_seq is above every stored batch's last_seq. To stay within its
  // bound the store may drop batches (never the one just appended); they are appended to
  // `dropped` so the caller can report the loss. Batches ending at or before
  // `keep_through` may already be stored at the collector (written, not yet acknowledged): the
  // store drops the oldest of the others first and one of those only when nothing else is left
  // (the spool: nothing else on disk, where its bound is), since a batch the collector stores
  // after all would be counted twice, lost and kept.
  virtual void Append(SealedBatch batch, uint64_t keep_through,
                      std::vector<SealedBatch>* dropped) = 0;

  // Forgets every batch whose last_seq <= durable_seq (the collector has them).
  virtual void Acknowledge(uint64_t durable_seq) = 0;

  // The oldest batch with last_seq > seq, if any.
  virtual std::optional<SealedBatch> NextAfter(uint64_t seq) const = 0;

  // Adds string definitions (those of a dropped batch that ended at `seq`, which later batches
  // may use) to the oldest stored batch that begins after `seq`, as WithStringDefs does. No-op
  // when there is none or `defs` is empty.
  virtual void AddStringsAfter(uint64_t seq, absl::Span<const StringDef> defs) = 0;

  virtual size_t batches() const = 0;
  virtual uint64_t bytes() const = 0;
  // Bytes of the stored batches that come after `seq` (first_seq > seq): what still waits
  // behind a batch ending at seq, which its own ack does not cover.
  virtual uint64_t BytesAfter(uint64_t seq) const = 0;

  // Events of stored batches that NextAfter() had to skip because they could no longer be
  // read (a spilled file gone or damaged), in all: the caller reports them as lost.
  virtual uint64_t unreadable_events() const { return 0; }
};

class MemoryBatchStore final : public BatchStore {
 public:
  explicit MemoryBatchStore(uint64_t max_bytes);

  void Append(SealedBatch batch, uint64_t keep_through, std::vector<SealedBatch>* dropped) override;
  void Acknowledge(uint64_t durable_seq) override;
  std::optional<SealedBatch> NextAfter(uint64_t seq) const override;
  void AddStringsAfter(uint64_t seq, absl::Span<const StringDef> defs) override;
  size_t batches() const override { return batches_.size(); }
  uint64_t bytes() const override { return bytes_; }
  uint64_t BytesAfter(uint64_t seq) const override;

 private:
  const uint64_t max_bytes_;
  std::deque<SealedBatch> batches_;
  uint64_t bytes_ = 0;
};

}  // namespace memtrace

#endif  // MEMTRACE_AGENT_STREAM_BATCH_STORE_H_
