#include "agent/cupti/nvtx_tracker.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

namespace memtrace {
namespace cupti {
namespace {

// This thread's number, never reused in the process: glibc hands a new thread the
// std::thread::id (its pthread_t) of one that exited, and the new thread inherited the ranges the
// old one left open (a pop skipped on an error path): its allocations took their stale tag.
uint64_t ThisThread() {
  static std::atomic<uint64_t> next{1};
  thread_local const uint64_t self = next.fetch_add(1, std::memory_order_relaxed);
  return self;
}

// The trackers alive, to be told when a thread that opened a range ends. Never destroyed:
// threads end during process teardown too, after static destructors.
struct LiveTrackers {
  absl::Mutex mu;
  std::vector<NvtxTracker*> trackers ABSL_GUARDED_BY(mu);
};

LiveTrackers& TheLiveTrackers() {
  static LiveTrackers* const live = new LiveTrackers;
  return *live;
}

// Destroyed when its thread ends (a thread_local), which is when that thread's push ranges can
// no longer be popped.
struct ThreadEndNotice {
  uint64_t thread = 0;
  pid_t pid = 0;
  ~ThreadEndNotice() {
    // A forked child (a DataLoader worker forked inside a step range) inherits the forking
    // thread's notice, and may inherit the locks below held by another thread of the parent:
    // taking them at its exit would hang it.
    if (thread == 0 || ::getpid() != pid) return;
    LiveTrackers& live = TheLiveTrackers();
    absl::MutexLock lock(&live.mu);
    for (NvtxTracker* t : live.trackers) t->ForgetThread(thread);
  }
};

// Arms the calling thread's notice: only threads that open ranges get one, not every thread
// that allocates.
void NoticeWhenThisThreadEnds(uint64_t self) {
  thread_local ThreadEndNotice notice;
  if (notice.thread != 0) return;
  notice.thread = self;
  notice.pid = ::getpid();
}

}  // namespace

NvtxTracker::NvtxTracker(EventSink* sink, RangeClassifier classifier, Clock clock)
    : sink_(sink), classifier_(std::move(classifier)), clock_(std::move(clock)) {
  LiveTrackers& live = TheLiveTrackers();
  absl::MutexLock lock(&live.mu);
  live.trackers.push_back(this);
}

NvtxTracker::~NvtxTracker() {
  // A thread ending now is told under live.mu: once out of the list, none can reach this one.
  LiveTrackers& live = TheLiveTrackers();
  absl::MutexLock lock(&live.mu);
  live.trackers.erase(std::remove(live.trackers.begin(), live.trackers.end(), this),
                      live.trackers.end());
}

void NvtxTracker::ForgetThread(uint64_t thread) {
  std::vector<OpenRange> phases;  // the phases among the dropped ranges, outermost first
  {
    absl::MutexLock lock(&mu_);
    auto it = threads_.find(thread);
    if (it == threads_.end()) return;
    std::vector<OpenRange>& open = it->second.open;
    const auto push_ranges = std::stable_partition(open.begin(), open.end(),
                                                   [](const OpenRange& r) { return r.is_start; });
    stats_.dropped_at_thread_exit +=
        static_cast<uint64_t>(open.end() - push_ranges) + it->second.overflow;
    for (auto r = push_ranges; r != open.end(); ++r) {
      if (r->cls.kind == RangeClass::Kind::kPhase) phases.push_back(std::move(*r));
    }
    stats_.phases_ended_at_thread_exit += phases.size();
    open.erase(push_ranges, open.end());
    it->second.overflow = 0;
    if (open.empty()) threads_.erase(it);
  }
  // The phase did end here: no pop can come for it once its thread is gone. Without the end,
  // the analyses saw it open until the rank's last event, its floor and peak taken over the
  // phases that followed. Innermost first, as pops would have closed them.
  for (auto r = phases.rbegin(); r != phases.rend(); ++r) Close(*r);
}

NvtxTracker::OpenRange NvtxTracker::Open(std::string_view name, uint64_t domain, bool is_start,
                                         uint64_t start_id) {
  OpenRange r;
  r.name = std::string(name);
  r.cls = classifier_.Classify(name);
  r.domain = domain;
  r.is_start = is_start;
  r.start_id = start_id;
  if (r.cls.kind == RangeClass::Kind::kStep) {
    Event e;
    e.kind = EventKind::kStep;
    e.ts_ns = clock_();
    e.aux = r.cls.step;
    sink_->Record(e);
  } else if (r.cls.kind == RangeClass::Kind::kPhase) {
    r.tag_id = sink_->Intern(StringKind::kPhase, r.cls.phase);
    Event e;
    e.kind = EventKind::kPhaseBegin;
    e.ts_ns = clock_();
    e.tag_id = r.tag_id;
    sink_->Record(e);
  }
  return r;
}

void NvtxTracker::Close(const OpenRange& range) {
  if (range.cls.kind != RangeClass::Kind::kPhase) return;
  Event e;
  e.kind = EventKind::kPhaseEnd;
  e.ts_ns = clock_();
  e.tag_id = range.tag_id;
  sink_->Record(e);
}

void NvtxTracker::Push(uint64_t domain, std::string_view name) {
  const uint64_t self = ThisThread();
  NoticeWhenThisThreadEnds(self);
  {
    absl::MutexLock lock(&mu_);
    ++stats_.pushes;
    ThreadRanges& t = threads_[self];
    if (t.open.size() >= kMaxDepth) {
      ++t.overflow;
      ++stats_.overflowed;
      return;
    }
  }
  // Classification and the sink calls happen outside mu_; only this thread touches its own
  // push/pop entries, so nothing can change between the two critical sections that matters.
  OpenRange r = Open(name, domain, /*is_start=*/false, 0);
  absl::MutexLock lock(&mu_);
  if (r.cls.kind == RangeClass::Kind::kStep) ++stats_.steps;
  if (r.cls.kind == RangeClass::Kind::kPhase) ++stats_.phases;
  threads_[self].open.push_back(std::move(r));
}

void NvtxTracker::Pop(uint64_t domain) {
  const uint64_t self = ThisThread();
  OpenRange closed;
  {
    absl::MutexLock lock(&mu_);
    ++stats_.pops;
    auto it = threads_.find(self);
    if (it == threads_.end()) {
      ++stats_.pops_without_push;
      return;
    }
    ThreadRanges& t = it->second;
    if (t.overflow > 0) {
      --t.overflow;
      return;
    }
    auto& open = t.open;
    auto r = open.rbegin();
    while (r != open.rend() && (r->is_start || r->domain != domain)) ++r;
    if (r == open.rend()) {
      ++stats_.pops_without_push;
      return;
    }
    closed = std::move(*r);
    open.erase(std::next(r).base());
    if (open.empty()) threads_.erase(it);
  }
  Close(closed);
}

void NvtxTracker::Start(uint64_t id, std::string_view name) {
  const uint64_t self = ThisThread();
  {
    absl::MutexLock lock(&mu_);
    ++stats_.starts;
    ThreadRanges& t = threads_[self];
    if (t.open.size() >= kMaxDepth) {
      ++stats_.overflowed;
      if (t.open.empty()) threads_.erase(self);
      return;
    }
  }
  OpenRange r = Open(name, 0, /*is_start=*/true, id);
  absl::MutexLock lock(&mu_);
  if (r.cls.kind == RangeClass::Kind::kStep) ++stats_.steps;
  if (r.cls.kind == RangeClass::Kind::kPhase) ++stats_.phases;
  threads_[self].open.push_back(std::move(r));
  start_owner_[id] = self;
}

void NvtxTracker::End(uint64_t id) {
  OpenRange closed;
  {
    absl::MutexLock lock(&mu_);
    ++stats_.ends;
    auto owner = start_owner_.find(id);
    if (owner == start_owner_.end()) {
      ++stats_.ends_unknown_id;
      return;
    }
    auto it = threads_.find(owner->second);
    start_owner_.erase(owner);
    if (it == threads_.end()) {
      ++stats_.ends_unknown_id;
      return;
    }
    auto& open = it->second.open;
    auto r = open.rbegin();
    while (r != open.rend() && !(r->is_start && r->start_id == id)) ++r;
    if (r == open.rend()) {
      ++stats_.ends_unknown_id;
      return;
    }
    closed = std::move(*r);
    open.erase(std::next(r).base());
    if (open.empty() && it->second.overflow == 0) threads_.erase(it);
  }
  Close(closed);
}

void NvtxTracker::Mark(std::string_view name) {
  std::optional<uint64_t> step = classifier_.ParseStep(name);
  if (!step) return;
  {
    absl::MutexLock lock(&mu_);
    ++stats_.steps;
  }
  Event e;
  e.kind = EventKind::kStep;
  e.ts_ns = clock_();
  e.aux = *step;
  sink_->Record(e);
}

uint32_t NvtxTracker::CurrentTag() {
  const uint64_t self = ThisThread();
  absl::MutexLock lock(&mu_);
  auto it = threads_.find(self);
  if (it == threads_.end()) return 0;
  for (auto r = it->second.open.rbegin(); r != it->second.open.rend(); ++r) {
    // Unnamed ranges (an unreadable NVTX message) keep their level but name nothing.
    if (r->cls.kind != RangeClass::Kind::kTag || r->name.empty()) continue;
    // Interned once per open range: the sink never calls back into the tracker, so holding
    // mu_ across Intern cannot deadlock.
    if (r->tag_id == 0) r->tag_id = sink_->Intern(StringKind::kTag, r->name);
    return r->tag_id;
  }
  return 0;
}

NvtxStats NvtxTracker::stats() const {
  absl::MutexLock lock(&mu_);
  NvtxStats s = stats_;
  s.threads_with_ranges = threads_.size();
  return s;
}

}  // namespace cupti
}  // namespace memtrace
