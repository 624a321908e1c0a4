#include "agent/cupti/record_translator.h"

#include <array>
#include <optional>
#include <string_view>

#include "absl/types/span.h"
#include "agent/cupti/alloc_source.h"

namespace memtrace {
namespace cupti {
namespace {

uint32_t MemoryKindOf(const CUpti_ActivityMemory4& r) {
  if (r.memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID) {
    return kMemoryPool;
  }
  const uint32_t k = static_cast<uint32_t>(r.memoryKind);
  // CUpti_ActivityMemoryKind values 0..7 are memtrace.v1.MemoryKind values.
  return k <= kMemoryManagedStatic ? k : kMemoryUnknown;
}

// CUPTI_INVALID_STREAM_ID marks a synchronous operation; memtrace uses 0 for "no stream".
uint32_t StreamOf(uint32_t stream_id) {
  return stream_id == CUPTI_INVALID_STREAM_ID ? 0 : stream_id;
}

}  // namespace

RecordTranslator::RecordTranslator(EventSink* sink, const CorrelationTable* correlation,
                                   const RangeClassifier* classifier, TranslatorOptions options)
    : sink_(sink),
      correlation_(correlation),
      classifier_(classifier),
      markers_drive_steps_(options.markers_drive_steps) {}

void RecordTranslator::Translate(const CUpti_Activity* record) {
  Event e;
  if (ToEvent(record, &e)) sink_->Record(e);
}

bool RecordTranslator::ToEvent(const CUpti_Activity* record, Event* out) {
  if (record == nullptr) return false;
  records_.fetch_add(1, std::memory_order_relaxed);
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_MEMORY2:
      return MemoryToEvent(*reinterpret_cast<const CUpti_ActivityMemory4*>(record), out);
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
      return PoolToEvent(*reinterpret_cast<const CUpti_ActivityMemoryPool3*>(record), out);
    case CUPTI_ACTIVITY_KIND_MARKER:
      return MarkerToEvent(*reinterpret_cast<const CUpti_ActivityMarker2*>(record), out);
    default:
      other_records_.fetch_add(1, std::memory_order_relaxed);
      return false;
  }
}

size_t RecordTranslator::TranslateBuffer(uint8_t* buffer, size_t valid_size) {
  if (buffer == nullptr || valid_size == 0) return 0;
  // Events are translated straight into a chunk and handed to the sink together
  // (EventSink::RecordMany): the Transport then locks its queue once per chunk instead of
  // once per event, which was half of Record()'s cost (docs/PERFORMANCE.md).
  constexpr size_t kChunk = 128;
  std::array<Event, kChunk> chunk;
  size_t n = 0;
  size_t walked = 0;
  CUpti_Activity* record = nullptr;
  // CUPTI_ERROR_MAX_LIMIT_REACHED ends the buffer; CUPTI_ERROR_INVALID_KIND (an incomplete
  // record after a forced flush) ends it too: nothing after it can be walked.
  while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    ++walked;
    if (ToEvent(record, &chunk[n]) && ++n == kChunk) {
      sink_->RecordMany(absl::MakeConstSpan(chunk.data(), n));
      n = 0;
    }
  }
  if (n > 0) sink_->RecordMany(absl::MakeConstSpan(chunk.data(), n));
  return walked;
}

uint32_t RecordTranslator::SourceFromPath(const char* path) {
  if (path == nullptr || *path == '\0') return 0;
  std::string base(Basename(path));
  {
    absl::MutexLock lock(&mu_);
    auto it = source_ids_.find(base);
    if (it != source_ids_.end()) return it->second;
  }
  const uint32_t id = sink_->Intern(StringKind::kSource, base);
  absl::MutexLock lock(&mu_);
  if (source_ids_.size() < 4096) source_ids_.emplace(std::move(base), id);
  return id;
}

bool RecordTranslator::MemoryToEvent(const CUpti_ActivityMemory4& r, Event* out) {
  Event& e = *out;
  e = Event();
  switch (r.memoryOperationType) {
    case CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION:
      e.kind = EventKind::kAlloc;
      break;
    case CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE:
      e.kind = EventKind::kFree;
      break;
    default:
      invalid_records_.fetch_add(1, std::memory_order_relaxed);
      return false;
  }
  std::optional<CorrelationInfo> info;
  if (correlation_ != nullptr) info = correlation_->Find(r.correlationId);
  if (info && info->vmm) {
    // cuMemCreate's physical memory has no address until cuMemMap; VMM_MAP events count it.
    vmm_records_skipped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  e.ts_ns = RecordTime(r.timestamp);
  e.address = r.address;
  e.bytes = r.bytes;
  e.device = r.deviceId;
  e.stream = StreamOf(r.streamId);
  e.memory_kind = MemoryKindOf(r);
  if (info) {
    correlated_.fetch_add(1, std::memory_order_relaxed);
    if (e.kind == EventKind::kAlloc) {
      e.tag_id = info->tag_id;
      e.source_id = info->source_id;
      if (info->tag_id != 0) tagged_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (e.kind == EventKind::kAlloc && e.source_id == 0) e.source_id = SourceFromPath(r.source);
  memory_records_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool RecordTranslator::PoolToEvent(const CUpti_ActivityMemoryPool3& r, Event* out) {
  Event& e = *out;
  e = Event();
  switch (r.memoryPoolOperationType) {
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED:
      e.kind = EventKind::kPoolCreate;
      break;
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED:
      e.kind = EventKind::kPoolDestroy;
      break;
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED:
      e.kind = EventKind::kPoolTrim;
      e.aux = r.minBytesToKeep;
      break;
    default:
      invalid_records_.fetch_add(1, std::memory_order_relaxed);
      return false;
  }
  e.ts_ns = RecordTime(r.timestamp);
  e.address = r.address;
  e.bytes = r.size;
  e.device = r.deviceId;
  e.memory_kind = kMemoryPool;
  pool_records_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool RecordTranslator::MarkerToEvent(const CUpti_ActivityMarker2& r, Event* out) {
  marker_records_.fetch_add(1, std::memory_order_relaxed);
  if (!markers_drive_steps_.load(std::memory_order_relaxed) || classifier_ == nullptr) return false;
  const uint32_t flags = static_cast<uint32_t>(r.flags);
  const int64_t ts = RecordTime(r.timestamp);
  if ((flags & CUPTI_ACTIVITY_FLAG_MARKER_END) != 0) {
    uint32_t phase_id = 0;
    {
      absl::MutexLock lock(&mu_);
      auto it = open_phases_.find(r.id);
      if (it == open_phases_.end()) return false;
      phase_id = it->second;
      open_phases_.erase(it);
    }
    Event& e = *out;
    e = Event();
    e.kind = EventKind::kPhaseEnd;
    e.ts_ns = ts;
    e.tag_id = phase_id;
    return true;
  }
  const bool start = (flags & CUPTI_ACTIVITY_FLAG_MARKER_START) != 0;
  const bool instant = (flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) != 0;
  if ((!start && !instant) || r.name == nullptr) return false;
  RangeClass cls = classifier_->Classify(r.name);
  Event& e = *out;
  e = Event();
  e.ts_ns = ts;
  if (cls.kind == RangeClass::Kind::kStep) {
    e.kind = EventKind::kStep;
    e.aux = cls.step;
    return true;
  } else if (cls.kind == RangeClass::Kind::kPhase && start) {
    e.kind = EventKind::kPhaseBegin;
    e.tag_id = sink_->Intern(StringKind::kPhase, cls.phase);
    {
      absl::MutexLock lock(&mu_);
      if (open_phases_.size() >= 4096) open_phases_.clear();
      open_phases_[r.id] = e.tag_id;
    }
    return true;
  }
  return false;
}

void RecordTranslator::RecordDropped(uint64_t n, int64_t ts_ns) {
  if (n == 0) return;
  cupti_dropped_.fetch_add(n, std::memory_order_relaxed);
  // Not Record(): CUPTI drops records when the agent is overloaded, which is when the queue is
  // full too, and a dropped marker would turn n lost records into one.
  sink_->RecordLoss(kLossCuptiDropped, n, ts_ns);
}

TranslatorStats RecordTranslator::stats() const {
  TranslatorStats s;
  s.records = records_.load();
  s.memory_records = memory_records_.load();
  s.pool_records = pool_records_.load();
  s.marker_records = marker_records_.load();
  s.vmm_records_skipped = vmm_records_skipped_.load();
  s.tagged = tagged_.load();
  s.correlated = correlated_.load();
  s.other_records = other_records_.load();
  s.invalid_records = invalid_records_.load();
  s.cupti_dropped = cupti_dropped_.load();
  return s;
}

}  // namespace cupti
}  // namespace memtrace
