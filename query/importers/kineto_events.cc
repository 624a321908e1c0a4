#include "query/importers/kineto_events.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace memtrace::importers {
namespace {

// The allocator a memory event belongs to: one per (device type, device id).
using PoolKey = std::pair<int32_t, int32_t>;

uint32_t MemoryKindOf(int32_t device_type) {
  if (device_type == kKinetoDeviceCuda) return kMemoryDevice;
  if (device_type == kKinetoDeviceCpu) return kMemoryPageable;
  return kMemoryUnknown;
}

uint32_t DeviceOf(const KinetoMemoryRecord& r) {
  return r.device_id >= 0 ? static_cast<uint32_t>(r.device_id) : 0;
}

// Protobuf string fields must be UTF-8; annotation names come from user code.
std::string SanitizeUtf8(const std::string& in) {
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  while (i < in.size()) {
    unsigned char c = static_cast<unsigned char>(in[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xE  ? 3
                 : (c >> 3) == 0x1E ? 4
                                    : 0;
    bool ok = len > 0 && i + len <= in.size();
    for (size_t k = 1; ok && k < len; ++k) {
      ok = (static_cast<unsigned char>(in[i + k]) & 0xC0) == 0x80;
    }
    if (ok) {
      out.append(in, i, len);
      i += len;
    } else {
      out.push_back('?');
      ++i;
    }
  }
  return out;
}

// Per allocation record, the annotation (index + 1, 0 = none) innermost around it on its
// thread. Records must be sorted by time.
std::vector<uint32_t> InnermostAnnotations(const KinetoTrace& trace, bool include_cpu) {
  std::vector<uint32_t> tag_of(trace.memory.size(), 0);
  if (trace.annotations.empty()) return tag_of;
  absl::flat_hash_map<uint64_t, std::vector<uint32_t>> ranges_by_thread;
  for (uint32_t i = 0; i < trace.annotations.size(); ++i) {
    ranges_by_thread[trace.annotations[i].thread].push_back(i);
  }
  absl::flat_hash_map<uint64_t, std::vector<uint32_t>> allocs_by_thread;
  for (uint32_t i = 0; i < trace.memory.size(); ++i) {
    const KinetoMemoryRecord& r = trace.memory[i];
    if (r.bytes <= 0 || (!include_cpu && r.device_type == kKinetoDeviceCpu)) continue;
    if (ranges_by_thread.contains(r.thread)) allocs_by_thread[r.thread].push_back(i);
  }
  for (auto& [thread, allocs] : allocs_by_thread) {
    std::vector<uint32_t>& ranges = ranges_by_thread[thread];
    // Outer ranges first at equal starts, so the inner one ends up on top of the stack.
    std::sort(ranges.begin(), ranges.end(), [&](uint32_t a, uint32_t b) {
      const KinetoRange& ra = trace.annotations[a];
      const KinetoRange& rb = trace.annotations[b];
      if (ra.start_ns != rb.start_ns) return ra.start_ns < rb.start_ns;
      return ra.end_ns > rb.end_ns;
    });
    std::vector<uint32_t> open;
    size_t next = 0;
    for (uint32_t record : allocs) {
      int64_t t = trace.memory[record].ts_ns;
      while (next < ranges.size() && trace.annotations[ranges[next]].start_ns <= t) {
        open.push_back(ranges[next++]);
      }
      // Ranges on one thread nest; one that has ended is done for every later allocation.
      while (!open.empty() && trace.annotations[open.back()].end_ns < t) open.pop_back();
      if (!open.empty()) tag_of[record] = trace.annotations[open.back()].name + 1;
    }
  }
  return tag_of;
}

// The STEP markers: CPU-timeline ProfilerStep ranges, one per step number (the earliest), by
// start time. A trace with only GPU-timeline ranges uses those.
std::vector<KinetoStepRange> StepMarkers(const KinetoTrace& trace) {
  bool any_cpu = std::any_of(trace.steps.begin(), trace.steps.end(),
                             [](const KinetoStepRange& s) { return !s.gpu; });
  std::map<int64_t, KinetoStepRange> by_number;
  for (const KinetoStepRange& s : trace.steps) {
    if (any_cpu && s.gpu) continue;
    auto [it, inserted] = by_number.try_emplace(s.step, s);
    if (!inserted && s.range.start_ns < it->second.range.start_ns) it->second = s;
  }
  std::vector<KinetoStepRange> steps;
  for (auto& [number, s] : by_number) steps.push_back(s);
  std::stable_sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) {
    return a.range.start_ns < b.range.start_ns;
  });
  return steps;
}

// a + b, held within +-2^62 instead of overflowing: the parser bounds each byte count to 2^53,
// but a sum over many events of malformed input could still pass int64 (a finding of the Kineto
// fuzzer under UBSan). Real traces are far below the bound.
int64_t ClampedSum(int64_t a, int64_t b) {
  constexpr int64_t kBound = int64_t{1} << 62;
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return b > 0 ? kBound : -kBound;
  return std::clamp(sum, -kBound, kBound);
}

struct Seed {
  uint64_t address;
  uint64_t bytes;
  PoolKey pool;
};

// Walks the sorted memory records once: the pre-trace blocks to seed, the frees that match
// nothing, and the consistency of Total Allocated.
struct BaselineScan {
  std::vector<Seed> seeds;
  // By record: a free of an address the trace saw allocated or freed before, and not allocated
  // again since (a double free, or an allocation missing from the trace). Not recorded: it is
  // not a pre-trace block, and no allocation is live there to free.
  std::vector<bool> unmatched_free;
  uint64_t unmatched_frees = 0;
  uint64_t mismatches = 0;
  uint64_t seeded_cuda_bytes = 0;
  int64_t final_cuda_total = 0;
  std::vector<int32_t> cuda_devices;
};

BaselineScan ScanBaseline(const KinetoTrace& trace, bool include_cpu) {
  struct Pool {
    int64_t before_first = 0;  // Total Allocated before the first event
    int64_t running = 0;
    int64_t pre_trace_freed = 0;
  };
  std::map<PoolKey, Pool> pools;
  // Blocks are matched by address alone, across pools, as the collector's live set matches
  // them: one process's host and device pointers never share an address (UVA), so a trace
  // where they do is malformed, and matching per pool here let two seeds take one address.
  absl::flat_hash_set<uint64_t> live;
  absl::flat_hash_set<uint64_t> seen;  // every address allocated or freed so far
  BaselineScan scan;
  scan.unmatched_free.assign(trace.memory.size(), false);
  for (size_t i = 0; i < trace.memory.size(); ++i) {
    const KinetoMemoryRecord& r = trace.memory[i];
    if (!include_cpu && r.device_type == kKinetoDeviceCpu) continue;
    PoolKey key{r.device_type, r.device_id};
    auto [it, first] = pools.try_emplace(key);
    Pool& pool = it->second;
    if (first) {
      pool.before_first = r.total_allocated - r.bytes;
      pool.running = pool.before_first;
    }
    pool.running += r.bytes;
    if (pool.running != r.total_allocated) {
      ++scan.mismatches;
      pool.running = r.total_allocated;
    }
    if (r.bytes == 0) continue;
    const bool first_sight = seen.insert(r.address).second;
    if (r.bytes > 0) {
      live.insert(r.address);
    } else if (live.erase(r.address) == 0) {
      if (first_sight) {
        scan.seeds.push_back({r.address, static_cast<uint64_t>(-r.bytes), key});
        pool.pre_trace_freed = ClampedSum(pool.pre_trace_freed, -r.bytes);
      } else {
        scan.unmatched_free[i] = true;
        ++scan.unmatched_frees;
      }
    }
  }
  for (auto& [key, pool] : pools) {
    int64_t remainder = pool.before_first - pool.pre_trace_freed;
    if (remainder < 0) {
      ++scan.mismatches;  // frees of unseen blocks exceed what was allocated before: lost events
    } else if (remainder > 0) {
      scan.seeds.push_back(
          {BaselineAddress(key.first, key.second), static_cast<uint64_t>(remainder), key});
    }
    if (key.first == kKinetoDeviceCuda) {
      scan.cuda_devices.push_back(key.second);
      scan.final_cuda_total = ClampedSum(scan.final_cuda_total, pool.running);
      scan.seeded_cuda_bytes = static_cast<uint64_t>(ClampedSum(
          static_cast<int64_t>(scan.seeded_cuda_bytes), std::max<int64_t>(pool.before_first, 0)));
    }
  }
  return scan;
}

// Sends events and calls the checkpoint every N of them.
class Emitter {
 public:
  Emitter(EventSink& sink, const KinetoEventOptions& options, KinetoEventStats* stats)
      : sink_(sink), options_(options), stats_(stats) {}

  absl::Status Emit(const Event& event) {
    sink_.Record(event);
    if (stats_->events_recorded == 0) stats_->first_ts_ns = event.ts_ns;
    stats_->last_ts_ns = event.ts_ns;
    ++stats_->events_recorded;
    if (options_.checkpoint && options_.checkpoint_events > 0 &&
        stats_->events_recorded % options_.checkpoint_events == 0) {
      return options_.checkpoint();
    }
    return absl::OkStatus();
  }

 private:
  EventSink& sink_;
  const KinetoEventOptions& options_;
  KinetoEventStats* stats_;
};

}  // namespace

absl::StatusOr<KinetoEventStats> RecordKinetoTrace(KinetoTrace* trace,
                                                   const KinetoEventOptions& options,
                                                   EventSink& sink) {
  std::vector<KinetoMemoryRecord>& memory = trace->memory;
  std::stable_sort(memory.begin(), memory.end(),
                   [](const KinetoMemoryRecord& a, const KinetoMemoryRecord& b) {
                     if (a.ts_ns != b.ts_ns) return a.ts_ns < b.ts_ns;
                     return a.ev_idx < b.ev_idx;
                   });
  const bool include_cpu = options.include_cpu_memory;
  const int64_t base = trace->base_time_ns;
  KinetoEventStats stats;
  BaselineScan baseline = ScanBaseline(*trace, include_cpu);
  stats.total_allocated_mismatches = baseline.mismatches;
  stats.unmatched_frees = baseline.unmatched_frees;
  stats.cuda_devices = baseline.cuda_devices;
  stats.final_total_allocated = baseline.final_cuda_total;
  std::vector<uint32_t> tag_of = InnermostAnnotations(*trace, include_cpu);
  std::vector<KinetoStepRange> steps = StepMarkers(*trace);

  std::vector<uint32_t> tag_ids(trace->names.size() + 1, 0);  // annotation -> interned id
  auto tag_id = [&](uint32_t annotation) -> uint32_t {
    if (annotation == 0) return 0;
    if (tag_ids[annotation] == 0) {
      tag_ids[annotation] =
          sink.Intern(StringKind::kTag, SanitizeUtf8(trace->names[annotation - 1]));
      ++stats.tags;
    }
    return tag_ids[annotation];
  };

  Emitter emitter(sink, options, &stats);
  int64_t start_ns = INT64_MAX;
  if (!memory.empty()) start_ns = memory.front().ts_ns;
  if (!steps.empty()) start_ns = std::min(start_ns, steps.front().range.start_ns);
  if (start_ns == INT64_MAX) return stats;

  std::map<int32_t, int64_t> last_reserved;  // by CUDA device id
  size_t next_step = 0;
  auto reserved_sample = [&](int32_t device_id, int64_t reserved, int64_t ts_ns) {
    Event sample;
    sample.kind = EventKind::kDeviceSample;
    sample.ts_ns = ts_ns;
    sample.device = device_id >= 0 ? static_cast<uint32_t>(device_id) : 0;
    sample.bytes = reserved > 0 ? static_cast<uint64_t>(reserved) : 0;
    if (device_id >= 0 && static_cast<size_t>(device_id) < trace->device_total_bytes.size()) {
      sample.aux = trace->device_total_bytes[device_id];
    }
    ++stats.device_samples;
    return emitter.Emit(sample);
  };
  // Each step starts with the reserved memory as it stands, so a step in which it does not
  // change still reports it.
  auto emit_step = [&](const KinetoStepRange& s) {
    Event e;
    e.kind = EventKind::kStep;
    e.ts_ns = base + s.range.start_ns;
    e.aux = static_cast<uint64_t>(s.step);
    ++stats.steps;
    if (absl::Status status = emitter.Emit(e); !status.ok()) return status;
    for (const auto& [device_id, reserved] : last_reserved) {
      if (absl::Status status = reserved_sample(device_id, reserved, e.ts_ns); !status.ok()) {
        return status;
      }
    }
    return absl::OkStatus();
  };
  // The seeds stand for memory allocated before the trace began, at its first moment. When a
  // step starts then, its marker follows them at the same instant, and the collector makes them
  // the start of that step (its floor), not a step 0 of their own (RankState::OnStep).
  if (!baseline.seeds.empty()) {
    uint32_t seed_tag = sink.Intern(StringKind::kTag, kBaselineTag);
    for (const Seed& seed : baseline.seeds) {
      Event e;
      e.kind = EventKind::kAlloc;
      e.ts_ns = base + start_ns;
      e.address = seed.address;
      e.bytes = seed.bytes;
      e.tag_id = seed_tag;
      e.device = seed.pool.second >= 0 ? static_cast<uint32_t>(seed.pool.second) : 0;
      e.memory_kind = MemoryKindOf(seed.pool.first);
      if (absl::Status s = emitter.Emit(e); !s.ok()) return s;
      ++stats.seeded_allocations;
    }
  }
  stats.seeded_bytes = baseline.seeded_cuda_bytes;
  for (size_t i = 0; i < memory.size(); ++i) {
    const KinetoMemoryRecord& r = memory[i];
    // A step that starts at the same moment as an allocation owns it.
    while (next_step < steps.size() && steps[next_step].range.start_ns <= r.ts_ns) {
      if (absl::Status s = emit_step(steps[next_step++]); !s.ok()) return s;
    }
    if (r.device_type == kKinetoDeviceCpu && !include_cpu) {
      ++stats.cpu_memory_skipped;
      continue;
    }
    if (r.bytes == 0) {  // Kineto never writes these; nothing was allocated
      ++stats.zero_byte_skipped;
      continue;
    }
    if (baseline.unmatched_free[i]) continue;  // counted in stats.unmatched_frees
    Event e;
    e.ts_ns = base + r.ts_ns;
    e.address = r.address;
    e.device = DeviceOf(r);
    e.memory_kind = MemoryKindOf(r.device_type);
    if (r.bytes > 0) {
      e.kind = EventKind::kAlloc;
      e.bytes = static_cast<uint64_t>(r.bytes);
      e.tag_id = tag_id(tag_of[i]);
      if (e.tag_id != 0) ++stats.tagged_allocs;
      ++stats.allocs;
    } else {
      e.kind = EventKind::kFree;
      e.bytes = static_cast<uint64_t>(-r.bytes);
      ++stats.frees;
    }
    if (absl::Status s = emitter.Emit(e); !s.ok()) return s;
    ++stats.memory_events;
    if (r.device_type == kKinetoDeviceCuda) {
      ++stats.cuda_memory_events;
      if (r.total_reserved >= 0) {  // -1: unreadable, no sample
        auto [it, first] = last_reserved.try_emplace(r.device_id, r.total_reserved);
        if (first || it->second != r.total_reserved) {
          it->second = r.total_reserved;
          if (absl::Status s = reserved_sample(r.device_id, r.total_reserved, e.ts_ns); !s.ok()) {
            return s;
          }
        }
      }
    } else if (r.device_type == kKinetoDeviceCpu) {
      ++stats.cpu_memory_events;
    } else {
      ++stats.other_memory_events;
    }
  }
  while (next_step < steps.size()) {
    if (absl::Status s = emit_step(steps[next_step++]); !s.ok()) return s;
  }
  if (options.checkpoint) {
    if (absl::Status s = options.checkpoint(); !s.ok()) return s;
  }
  return stats;
}

}  // namespace memtrace::importers
