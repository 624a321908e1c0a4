#include "agent/stream/batch_store.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "proto/memtrace/v1/events.pb.h"

namespace memtrace {

std::shared_ptr<std::string> WithStringDefs(const std::string& batch_bytes,
                                            absl::Span<const StringDef> defs) {
  v1::EventBatch batch;
  if (!batch.ParseFromString(batch_bytes)) return nullptr;
  absl::flat_hash_set<uint32_t> defined;
  size_t value_bytes = 0;
  for (const v1::StringEntry& s : batch.strings()) {
    defined.insert(s.id());
    value_bytes += s.value().size();
  }
  bool added = false;
  for (const StringDef& d : defs) {
    if (static_cast<size_t>(batch.strings_size()) >= kMaxStringsPerBatch) break;
    if (value_bytes + d.value.size() > kMaxStringBytesPerBatch) continue;
    if (!defined.insert(d.id).second) continue;
    value_bytes += d.value.size();
    v1::StringEntry* entry = batch.add_strings();
    entry->set_id(d.id);
    entry->set_kind(static_cast<v1::StringKind>(d.kind));
    entry->set_value(d.value);
    added = true;
  }
  if (!added) return nullptr;
  auto bytes = std::make_shared<std::string>();
  batch.SerializeToString(bytes.get());
  return bytes;
}

MemoryBatchStore::MemoryBatchStore(uint64_t max_bytes) : max_bytes_(max_bytes) {}

void MemoryBatchStore::Append(SealedBatch batch, uint64_t keep_through,
                              std::vector<SealedBatch>* dropped) {
  const uint64_t size = batch.bytes ? batch.bytes->size() : 0;
  while (!batches_.empty() && bytes_ + size > max_bytes_) {
    auto victim =
        BatchToDrop(batches_, keep_through, [](const SealedBatch& b) { return b.last_seq; });
    bytes_ -= victim->bytes ? victim->bytes->size() : 0;
    dropped->push_back(std::move(*victim));
    batches_.erase(victim);
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

void MemoryBatchStore::AddStringsAfter(uint64_t seq, absl::Span<const StringDef> defs) {
  auto it = std::find_if(batches_.begin(), batches_.end(),
                         [seq](const SealedBatch& b) { return b.first_seq > seq; });
  if (it == batches_.end() || defs.empty() || it->bytes == nullptr) return;
  std::shared_ptr<std::string> bytes = WithStringDefs(*it->bytes, defs);
  if (bytes == nullptr) return;
  bytes_ += bytes->size() - it->bytes->size();
  it->bytes = std::move(bytes);
  it->has_strings = true;
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
