#include "agent/stream/batch_store.h"

#include <algorithm>
#include <utility>

#include "proto/memtrace/v1/events.pb.h"

namespace memtrace {

MemoryBatchStore::MemoryBatchStore(uint64_t max_bytes) : max_bytes_(max_bytes) {}

void MemoryBatchStore::Append(SealedBatch batch, std::vector<SealedBatch>* dropped) {
  const uint64_t size = batch.bytes ? batch.bytes->size() : 0;
  while (!batches_.empty() && bytes_ + size > max_bytes_) {
    bytes_ -= batches_.front().bytes ? batches_.front().bytes->size() : 0;
    dropped->push_back(std::move(batches_.front()));
    batches_.pop_front();
  }
  bytes_ += size;
  batches_.push_back(std::move(batch));
}

void MemoryBatchStore::Acknowledge(uint64_t durable_seq) {
  while (!batches_.empty() && batches_.front().last_seq <= durable_seq) {
    bytes_ -= batches_.front().bytes ? batches_.front().bytes->size() : 0;
    batches_.pop_front();
  }
}

std::optional<SealedBatch> MemoryBatchStore::NextAfter(uint64_t seq) const {
  auto it = std::upper_bound(batches_.begin(), batches_.end(), seq,
                             [](uint64_t s, const SealedBatch& b) { return s < b.last_seq; });
  if (it == batches_.end()) return std::nullopt;
  return *it;
}

void MemoryBatchStore::AddStringsToOldest(absl::Span<const StringDef> defs) {
  if (batches_.empty() || defs.empty()) return;
  SealedBatch& oldest = batches_.front();
  v1::EventBatch batch;
  if (oldest.bytes == nullptr || !batch.ParseFromString(*oldest.bytes)) return;
  for (const StringDef& d : defs) {
    v1::StringEntry* entry = batch.add_strings();
    entry->set_id(d.id);
    entry->set_kind(static_cast<v1::StringKind>(d.kind));
    entry->set_value(d.value);
  }
  auto bytes = std::make_shared<std::string>();
  batch.SerializeToString(bytes.get());
  bytes_ += bytes->size() - oldest.bytes->size();
  oldest.bytes = std::move(bytes);
  oldest.has_strings = true;
}

uint64_t MemoryBatchStore::BytesAfter(uint64_t seq) const {
  uint64_t out = 0;
  // Newest first: the batches after seq are at the back.
  for (auto it = batches_.rbegin(); it != batches_.rend() && it->first_seq > seq; ++it) {
    out += it->bytes ? it->bytes->size() : 0;
  }
  return out;
}

}  // namespace memtrace
