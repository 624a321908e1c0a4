#include "agent/cupti/correlation_table.h"

namespace memtrace {
namespace cupti {

CorrelationTable::CorrelationTable(int log2_slots)
    : mask_((uint32_t{1} << log2_slots) - 1),
      slots_(std::make_unique<Slot[]>(size_t{1} << log2_slots)) {}

void CorrelationTable::Put(uint32_t id, const CorrelationInfo& info) {
  if (id == 0) return;
  Slot& s = slots_[id & mask_];
  const uint64_t key = uint64_t{id} << 32;
  s.source.store(key | (info.vmm ? uint64_t{1} << 31 : 0) | (info.source_id & 0x7fffffffu),
                 std::memory_order_relaxed);
  s.tag.store(key | info.tag_id, std::memory_order_release);
}

std::optional<CorrelationInfo> CorrelationTable::Find(uint32_t id) const {
  if (id == 0) return std::nullopt;
  const Slot& s = slots_[id & mask_];
  const uint64_t tag = s.tag.load(std::memory_order_acquire);
  const uint64_t source = s.source.load(std::memory_order_relaxed);
  if ((tag >> 32) != id || (source >> 32) != id) return std::nullopt;
  CorrelationInfo info;
  info.tag_id = static_cast<uint32_t>(tag);
  info.source_id = static_cast<uint32_t>(source) & 0x7fffffffu;
  info.vmm = (source >> 31) & 1;
  return info;
}

}  // namespace cupti
}  // namespace memtrace
