// Translates CUPTI activity records into memtrace events:
// - CUPTI_ACTIVITY_KIND_MEMORY2 (CUpti_ActivityMemory4): ALLOC / FREE with address, bytes,
//   memory kind (MEMORY_KIND_POOL when the record names a memory pool), device and stream, plus
//   the tag and source stored under the record's correlation id by the API callbacks (or, when
//   CUPTI's allocation-source tracking is on, the record's own `source` path).
// - CUPTI_ACTIVITY_KIND_MEMORY_POOL (CUpti_ActivityMemoryPool3): POOL_CREATE / POOL_DESTROY /
//   POOL_TRIM (aux = minBytesToKeep) with pool address and size.
// - CUPTI_ACTIVITY_KIND_MARKER (CUpti_ActivityMarker2): only when markers_drive_steps is set
//   (no callback subscriber, so NVTX callbacks are unavailable), STEP and PHASE_BEGIN/END from
//   the range names; otherwise markers are counted and dropped, the callbacks already did it.
//
// The struct layouts are those of CUPTI 13 (cupti_activity.h 13.0): the caller must only
// feed records from a libcupti whose cuptiGetVersion() is >= 130000.
#ifndef MEMTRACE_AGENT_CUPTI_RECORD_TRANSLATOR_H_
#define MEMTRACE_AGENT_CUPTI_RECORD_TRANSLATOR_H_

#include <cupti.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "agent/cupti/correlation_table.h"
#include "agent/cupti/range_classifier.h"
#include "agent/stream/event_sink.h"

namespace memtrace {
namespace cupti {

struct TranslatorOptions {
  // Turn MARKER records into STEP / PHASE events (activity-only mode).
  bool markers_drive_steps = false;
};

struct TranslatorStats {
  uint64_t records = 0;         // every record seen
  uint64_t memory_records = 0;  // MEMORY2 records turned into events
  uint64_t pool_records = 0;
  uint64_t marker_records = 0;       // MARKER records seen (translated or not)
  uint64_t vmm_records_skipped = 0;  // MEMORY2 records of cuMemCreate (VMM events cover them)
  uint64_t tagged = 0;               // MEMORY2 allocations that got a tag from the callbacks
  uint64_t correlated = 0;           // MEMORY2 records found in the correlation table
  uint64_t other_records = 0;        // kinds we do not translate
  uint64_t invalid_records = 0;      // a known kind with an unknown operation type
  uint64_t cupti_dropped = 0;        // records CUPTI reported dropped
};

class RecordTranslator {
 public:
  // `sink`, `correlation` (may be null) and `classifier` must outlive the translator.
  RecordTranslator(EventSink* sink, const CorrelationTable* correlation,
                   const RangeClassifier* classifier, TranslatorOptions options);

  // Translates one record. Thread-safe.
  void Translate(const CUpti_Activity* record);

  // Walks a completed activity buffer with cuptiActivityGetNextRecord and translates every
  // record in it, handing the events to the sink in order, 128 at a time
  // (EventSink::RecordMany). Returns the number of records walked. Thread-safe.
  size_t TranslateBuffer(uint8_t* buffer, size_t valid_size);

  // Reports `n` activity records CUPTI dropped (cuptiActivityGetNumDroppedRecords) as one
  // EVENT_KIND_LOSS event, aux = n, memory_kind = LOSS_REASON_CUPTI_DROPPED. Thread-safe.
  void RecordDropped(uint64_t n, int64_t ts_ns);

  // Switches marker translation on or off (the agent knows only after subscribing whether
  // callbacks will deliver NVTX). Thread-safe.
  void SetMarkersDriveSteps(bool on) { markers_drive_steps_.store(on); }

  // Adds `ns` to every record's timestamp from now on: CUPTI's clock, when it is not
  // CLOCK_REALTIME (the callback events' and samples' clock), is shifted onto it by the offset
  // the agent measured (cuptiGetTimestamp reads the records' clock). Thread-safe.
  void SetClockShift(int64_t ns) { clock_shift_ns_.store(ns, std::memory_order_relaxed); }

  TranslatorStats stats() const;

 private:
  // When the record becomes an event: all of *out set to it, true. Else false (*out is
  // scratch then).
  bool ToEvent(const CUpti_Activity* record, Event* out);
  bool MemoryToEvent(const CUpti_ActivityMemory4& r, Event* out);
  bool PoolToEvent(const CUpti_ActivityMemoryPool3& r, Event* out);
  bool MarkerToEvent(const CUpti_ActivityMarker2& r, Event* out);
  uint32_t SourceFromPath(const char* path);
  int64_t RecordTime(uint64_t timestamp) const {
    return static_cast<int64_t>(timestamp) + clock_shift_ns_.load(std::memory_order_relaxed);
  }

  EventSink* sink_;
  const CorrelationTable* correlation_;
  const RangeClassifier* classifier_;
  std::atomic<bool> markers_drive_steps_;
  std::atomic<int64_t> clock_shift_ns_{0};

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, uint32_t> source_ids_ ABSL_GUARDED_BY(mu_);
  // Marker id -> interned phase name, for phase ranges still open (activity-only mode).
  absl::flat_hash_map<uint32_t, uint32_t> open_phases_ ABSL_GUARDED_BY(mu_);

  std::atomic<uint64_t> records_{0};
  std::atomic<uint64_t> memory_records_{0};
  std::atomic<uint64_t> pool_records_{0};
  std::atomic<uint64_t> marker_records_{0};
  std::atomic<uint64_t> vmm_records_skipped_{0};
  std::atomic<uint64_t> tagged_{0};
  std::atomic<uint64_t> correlated_{0};
  std::atomic<uint64_t> other_records_{0};
  std::atomic<uint64_t> invalid_records_{0};
  std::atomic<uint64_t> cupti_dropped_{0};
};

}  // namespace cupti
}  // namespace memtrace

#endif  // MEMTRACE_AGENT_CUPTI_RECORD_TRANSLATOR_H_
