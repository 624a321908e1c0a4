// Follows the NVTX ranges each thread has open and turns them into memtrace semantics:
// a step range emits EVENT_KIND_STEP (aux = step number) when it opens, a phase range emits
// PHASE_BEGIN / PHASE_END (tag_id = interned phase name), and any other range is a tag scope:
// the innermost open tag range of a thread names the tag of the allocations that thread makes.
//
// Push/pop ranges are per thread and per NVTX domain (each domain has its own stack, as in the
// NVTX specification); start/end ranges are process-wide ids that may end on another thread,
// and count as open on the thread that started them.
#ifndef MEMTRACE_AGENT_CUPTI_NVTX_TRACKER_H_
#define MEMTRACE_AGENT_CUPTI_NVTX_TRACKER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "agent/cupti/clock.h"
#include "agent/cupti/range_classifier.h"
#include "agent/stream/event_sink.h"

namespace memtrace {
namespace cupti {

struct NvtxStats {
  uint64_t pushes = 0;
  uint64_t pops = 0;
  uint64_t pops_without_push = 0;  // a pop on a thread/domain with nothing open
  uint64_t starts = 0;
  uint64_t ends = 0;
  uint64_t ends_unknown_id = 0;  // an end for an id never started (or already ended)
  uint64_t steps = 0;
  uint64_t phases = 0;
  uint64_t overflowed = 0;  // pushes/starts deeper than the kept depth
  // Push/pop ranges still open on a thread when it ended (a pop skipped on an error path): they
  // are dropped then; a phase among them gets its PHASE_END then, counted here too.
  uint64_t dropped_at_thread_exit = 0;
  uint64_t phases_ended_at_thread_exit = 0;
  size_t threads_with_ranges = 0;  // threads with a range open now
};

class NvtxTracker {
 public:
  // `sink` must outlive the tracker. Domain keys identify NVTX domains (0 = default domain;
  // the callback layer passes the nvtxDomainHandle_t value).
  NvtxTracker(EventSink* sink, RangeClassifier classifier, Clock clock);
  ~NvtxTracker();
  NvtxTracker(const NvtxTracker&) = delete;
  NvtxTracker& operator=(const NvtxTracker&) = delete;

  // The calling thread opens a push/pop range `name` in `domain`.
  void Push(uint64_t domain, std::string_view name);
  // The calling thread closes its innermost push/pop range of `domain`; counted, never fatal,
  // when there is none.
  void Pop(uint64_t domain);
  // The calling thread starts a process-wide range with NVTX id `id`.
  void Start(uint64_t id, std::string_view name);
  // Ends range `id`, on whichever thread started it; counted when unknown.
  void End(uint64_t id);
  // An instantaneous marker: only a step name has an effect (emits STEP).
  void Mark(std::string_view name);

  // The tag id (StringKind::kTag) of the calling thread's innermost open tag range, 0 when
  // none. Interns the name on first use of each open range. Thread-safe.
  uint32_t CurrentTag();

  NvtxStats stats() const;

  // Drops the push/pop ranges thread `thread` (its number in the .cc, ThisThread) left open,
  // emitting PHASE_END for each phase among them; its start/end ranges stay, as another thread
  // may end them. Called when a thread that opened a range ends, for every tracker alive then.
  void ForgetThread(uint64_t thread);

 private:
  struct OpenRange {
    std::string name;
    RangeClass cls;
    uint64_t domain = 0;
    bool is_start = false;  // start/end range (else push/pop)
    uint64_t start_id = 0;
    uint32_t tag_id = 0;  // interned lazily by CurrentTag; phase id for phases
  };
  struct ThreadRanges {
    std::vector<OpenRange> open;  // innermost last
    // Pushes beyond kMaxDepth are not kept, only counted, so the next pops match them; this
    // bounds the memory a program that never pops can cost.
    uint64_t overflow = 0;
  };
  static constexpr size_t kMaxDepth = 1024;

  // Classifies, emits STEP / PHASE_BEGIN, and returns the range to keep open.
  OpenRange Open(std::string_view name, uint64_t domain, bool is_start, uint64_t start_id);
  void Close(const OpenRange& range);

  EventSink* sink_;
  const RangeClassifier classifier_;
  const Clock clock_;

  mutable absl::Mutex mu_;
  // Only threads with an open range have an entry, so exited threads leave nothing behind once
  // their ranges are closed. One that exits with push ranges open (a pop skipped on an error
  // path) has them dropped at its exit (ForgetThread): a pool that made and ended such threads
  // kept up to kMaxDepth names for each, for the life of the process.
  // Keyed by a number per thread that is never reused (see ThisThread in the .cc).
  absl::flat_hash_map<uint64_t, ThreadRanges> threads_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, uint64_t> start_owner_ ABSL_GUARDED_BY(mu_);
  NvtxStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cupti
}  // namespace memtrace

#endif  // MEMTRACE_AGENT_CUPTI_NVTX_TRACKER_H_
