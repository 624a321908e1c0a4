// Carries what is only known on the application thread at API-call time (the NVTX tag, the
// owning shared object) to the activity record that CUPTI delivers later on its own thread.
// Both sides share CUPTI's correlation id: the driver/runtime callback's
// CUpti_CallbackData::correlationId equals CUpti_ActivityMemory4::correlationId of the record
// the call produced (cupti_activity.h). Entries are written at API ENTER, before the record can
// exist, so there is no race with the buffer-completion thread.
//
// Lock-free and bounded: a direct-mapped array indexed by the low bits of the id. Each slot is
// two 64-bit atomic words that both carry the id in their high half, so a reader that sees a
// torn or overwritten slot finds an id mismatch and gets "absent" rather than a wrong tag.
// An entry is lost only when a later call whose id differs by a multiple of the table size is
// stored before the earlier record is read (>= 2^17 intervening API calls by default).
#ifndef MEMTRACE_AGENT_CUPTI_CORRELATION_TABLE_H_
#define MEMTRACE_AGENT_CUPTI_CORRELATION_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

namespace memtrace {
namespace cupti {

struct CorrelationInfo {
  uint32_t tag_id = 0;
  uint32_t source_id = 0;  // < 2^31
  // The call was a VMM cuMemCreate: its memory is reported by VMM_MAP events instead.
  bool vmm = false;

  bool operator==(const CorrelationInfo& o) const {
    return tag_id == o.tag_id && source_id == o.source_id && vmm == o.vmm;
  }
};

class CorrelationTable {
 public:
  // 2^log2_slots slots (16 bytes each; 2 MiB for the default 17).
  explicit CorrelationTable(int log2_slots = 17);

  // Stores `info` for correlation id `id` (0 is CUPTI's "none" and is ignored). Thread-safe,
  // wait-free.
  void Put(uint32_t id, const CorrelationInfo& info);

  // The info stored for `id`, if it is still in the table. Thread-safe, wait-free.
  std::optional<CorrelationInfo> Find(uint32_t id) const;

 private:
  struct Slot {
    std::atomic<uint64_t> tag{0};     // id << 32 | tag_id
    std::atomic<uint64_t> source{0};  // id << 32 | vmm << 31 | source_id
  };
  const uint32_t mask_;
  std::unique_ptr<Slot[]> slots_;
};

}  // namespace cupti
}  // namespace memtrace

#endif  // MEMTRACE_AGENT_CUPTI_CORRELATION_TABLE_H_
