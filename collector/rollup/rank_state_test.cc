#include "collector/rollup/rank_state.h"

#include <limits>
#include <vector>

#include "collector/rollup/rank_state.pb.h"
#include "gtest/gtest.h"

namespace memtrace::collector {
namespace {

constexpr int64_t kSecond = 1'000'000'000;
constexpr uint64_t kMiB = 1 << 20;

// Builds an event sequence with consecutive sequence numbers; each call advances time by 1 ms
// unless a timestamp is given.
class Script {
 public:
  Script& Alloc(uint64_t address, uint64_t bytes, uint32_t tag = 0, uint32_t source = 0,
                uint32_t kind = kMemoryDevice) {
    Event e = Next(EventKind::kAlloc);
    e.address = address;
    e.bytes = bytes;
    e.tag_id = tag;
    e.source_id = source;
    e.memory_kind = kind;
    return Push(e);
  }
  Script& Free(uint64_t address) {
    Event e = Next(EventKind::kFree);
    e.address = address;
    return Push(e);
  }
  Script& Map(uint64_t address, uint64_t bytes, uint32_t tag = 0, uint32_t kind = kMemoryUnknown) {
    Event e = Next(EventKind::kVmmMap);
    e.address = address;
    e.bytes = bytes;
    e.tag_id = tag;
    e.memory_kind = kind;
    return Push(e);
  }
  Script& Unmap(uint64_t address) {
    Event e = Next(EventKind::kVmmUnmap);
    e.address = address;
    return Push(e);
  }
  Script& Step(int64_t step) {
    Event e = Next(EventKind::kStep);
    e.aux = static_cast<uint64_t>(step);
    return Push(e);
  }
  Script& PhaseBegin(uint32_t id) {
    Event e = Next(EventKind::kPhaseBegin);
    e.tag_id = id;
    return Push(e);
  }
  Script& PhaseEnd(uint32_t id) {
    Event e = Next(EventKind::kPhaseEnd);
    e.tag_id = id;
    return Push(e);
  }
  Script& Simple(EventKind kind, uint64_t address, uint64_t bytes, uint64_t aux) {
    Event e = Next(kind);
    e.address = address;
    e.bytes = bytes;
    e.aux = aux;
    return Push(e);
  }
  Script& At(int64_t ts_ns) {
    ts_ = ts_ns - 1'000'000;
    return *this;
  }

  const std::vector<Event>& events() const { return events_; }

 private:
  Event Next(EventKind kind) {
    Event e;
    e.seq = ++seq_;
    ts_ += 1'000'000;
    e.ts_ns = ts_;
    e.kind = kind;
    return e;
  }
  Script& Push(const Event& e) {
    events_.push_back(e);
    return *this;
  }

  uint64_t seq_ = 0;
  int64_t ts_ = 10 * kSecond;
  std::vector<Event> events_;
};

const v1::GroupBytes* FindGroup(const google::protobuf::RepeatedPtrField<v1::GroupBytes>& groups,
                                uint32_t id) {
  for (const v1::GroupBytes& g : groups) {
    if (g.id() == id) return &g;
  }
  return nullptr;
}

TEST(RankStateTest, StepRollupsHaveKnownStartFloorPeakAndEnd) {
  Script s;
  s.Step(1).Alloc(0x1000, 100).Alloc(0x2000, 50).Free(0x1000).Alloc(0x3000, 10);
  // Step 1: start 0, peak 150, floor 0 (at start), end 60.
  s.Step(2).Free(0x2000).Free(0x3000).Alloc(0x4000, 500);
  // Step 2: start 60, floor 0 (after both frees), peak 500, end 500.
  s.Step(3);
  RankState state(kSecond);
  ClosedRollups closed;
  state.Apply(s.events(), &closed);

  ASSERT_EQ(closed.steps.size(), 2u);
  const v1::StepRollup& s1 = closed.steps[0];
  EXPECT_EQ(s1.step(), 1);
  EXPECT_EQ(s1.start_bytes(), 0u);
  EXPECT_EQ(s1.floor_bytes(), 0u);
  EXPECT_EQ(s1.peak_bytes(), 150u);
  EXPECT_EQ(s1.end_bytes(), 60u);
  EXPECT_EQ(s1.allocs(), 3u);
  EXPECT_EQ(s1.frees(), 1u);
  EXPECT_EQ(s1.alloc_bytes(), 160u);
  EXPECT_EQ(s1.free_bytes(), 100u);

  const v1::StepRollup& s2 = closed.steps[1];
  EXPECT_EQ(s2.step(), 2);
  EXPECT_EQ(s2.start_bytes(), 60u);
  EXPECT_EQ(s2.floor_bytes(), 0u);
  EXPECT_EQ(s2.peak_bytes(), 500u);
  EXPECT_EQ(s2.end_bytes(), 500u);
  // A step runs from its marker to the next one.
  EXPECT_EQ(s2.start_ns(), s.events()[5].ts_ns);
  EXPECT_EQ(s2.end_ns(), s.events()[9].ts_ns);

  EXPECT_EQ(state.current_step(), 3);
  EXPECT_EQ(state.live_bytes(), 500u);
  const v1::StepRollup open = state.OpenStepRollup();
  EXPECT_EQ(open.step(), 3);
  EXPECT_EQ(open.start_bytes(), 500u);
  EXPECT_EQ(open.floor_bytes(), 500u);
  EXPECT_EQ(open.peak_bytes(), 500u);
}

TEST(RankStateTest, RollupsKeepTheMomentOfTheirPeak) {
  Script s;
  s.Step(1).Alloc(0x1000, 100).Alloc(0x2000, 50).Free(0x1000).Alloc(0x3000, 100);
  // Step 1 peaks at 150 (event 2) and reaches it again at event 4: the first moment counts.
  s.Step(2).Free(0x2000).Alloc(0x4000, 10);
  // Step 2 never rises above the 150 it starts at: its peak is the level carried in, reached
  // when the live bytes last changed (event 4), which is where the live set holds it.
  s.Step(3);
  RankState state(kSecond);
  ClosedRollups closed;
  state.Apply(s.events(), &closed);
  ASSERT_EQ(closed.steps.size(), 2u);
  EXPECT_EQ(closed.steps[0].peak_bytes(), 150u);
  EXPECT_EQ(closed.steps[0].peak_ns(), s.events()[2].ts_ns);
  EXPECT_EQ(closed.steps[0].peak_seq(), s.events()[2].seq);
  EXPECT_EQ(closed.steps[1].peak_bytes(), 150u);
  EXPECT_EQ(closed.steps[1].peak_ns(), s.events()[4].ts_ns);
  EXPECT_EQ(closed.steps[1].peak_seq(), s.events()[4].seq);

  // A checkpoint keeps the open step's moment.
  Script more;
  more.At(s.events().back().ts_ns + kSecond).Alloc(0x5000, 1000);
  std::vector<Event> e = more.events();
  e[0].seq = s.events().size() + 1;
  state.Apply(e, &closed);
  absl::StatusOr<RankState> resumed = RankState::Deserialize(state.Serialize());
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->OpenStepRollup().peak_ns(), e[0].ts_ns);
  EXPECT_EQ(resumed->OpenStepRollup().peak_seq(), e[0].seq);
  // And the level a new step starts from: dated and numbered by the event that made it.
  Script next;
  next.At(e[0].ts_ns + kSecond).Step(4);
  std::vector<Event> marker = next.events();
  marker[0].seq = e[0].seq + 1;
  resumed->Apply(marker, &closed);
  EXPECT_EQ(resumed->OpenStepRollup().peak_ns(), e[0].ts_ns);
  EXPECT_EQ(resumed->OpenStepRollup().peak_seq(), e[0].seq);
}

TEST(RankStateTest, ABucketsPeakMomentIsInTheRanksClock) {
  // The rank's clock runs 2.5 s ahead: its bucket is keyed by collector time (7.2-8 s), its peak
  // moment kept in the rank's clock (10.4 s), which queries shift by the rank's latest offset as
  // they shift step rows (EventStore::VisitRollups).
  Script s;
  s.At(10 * kSecond + 200'000'000).Alloc(0x1, 100);
  s.At(10 * kSecond + 400'000'000).Alloc(0x2, 100);
  s.At(10 * kSecond + 450'000'000).Free(0x2);
  s.At(10 * kSecond + 600'000'000).Free(0x1);  // 8.1 s: bucket 8
  RankState state(kSecond);
  state.SetClockOffset(-2'500'000'000);
  ClosedRollups closed;
  state.Apply(s.events(), &closed);
  ASSERT_EQ(closed.buckets.size(), 1u);
  EXPECT_EQ(closed.buckets[0].peak_bytes(), 200u);
  EXPECT_EQ(closed.buckets[0].start_ns(), 7 * kSecond);
  EXPECT_EQ(closed.buckets[0].peak_ns(), 10 * kSecond + 400'000'000);
}

TEST(RankStateTest, RisingFloorShowsAcrossSteps) {
  // A leak: each step allocates 10 MiB of activations (freed) and keeps 1 MiB.
  Script s;
  uint64_t address = 0x10000;
  for (int step = 1; step <= 5; ++step) {
    s.Step(step);
    s.Alloc(address, 10 * kMiB, 1).Free(address);
    address += 0x1000;
    s.Alloc(address, kMiB, 2);
    address += 0x1000;
  }
  s.Step(6);
  RankState state(kSecond);
  ClosedRollups closed;
  state.Apply(s.events(), &closed);
  ASSERT_EQ(closed.steps.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    const v1::StepRollup& r = closed.steps[i];
    EXPECT_EQ(r.floor_bytes(), i * kMiB) << "step " << r.step();
    EXPECT_EQ(r.peak_bytes(), (i + 10) * kMiB) << "step " << r.step();
    EXPECT_EQ(r.end_bytes(), (i + 1) * kMiB) << "step " << r.step();
    const v1::GroupBytes* leak = FindGroup(r.by_tag(), 2);
    ASSERT_NE(leak, nullptr);
    EXPECT_EQ(leak->live_bytes(), (i + 1) * kMiB);
    const v1::GroupBytes* act = FindGroup(r.by_tag(), 1);
    ASSERT_NE(act, nullptr);
    EXPECT_EQ(act->live_bytes(), 0u);
    EXPECT_EQ(act->peak_bytes(), 10 * kMiB);
  }
}

TEST(RankStateTest, EventsBeforeTheFirstStepBelongToStepZero) {
  Script s;
  s.Alloc(0x1, 7).Alloc(0x2, 3).Step(5).Alloc(0x3, 1);
  RankState state(kSecond);
  ClosedRollups closed;
  state.Apply(s.events(), &closed);
  ASSERT_EQ(closed.steps.size(), 1u);
  EXPECT_EQ(closed.steps[0].step(), 0);
  EXPECT_EQ(closed.steps[0].peak_bytes(), 10u);
  EXPECT_EQ(closed.steps[0].start_ns(), s.events()[0].ts_ns);
  EXPECT_EQ(state.current_step(), 5);
  // The allocation remembers the step it was made in.
  EXPECT_EQ(state.allocations().at(0x1).step, 0);
  EXPECT_EQ(state.allocations().at(0x3).step, 5);
}

TEST(RankStateTest, AStreamThatStartsWithAMarkerHasNoEmptyStepZero) {
  Script s;
  s.Step(7).Alloc(0x1, 5).Step(8);
  RankState state(kSecond);
  ClosedRollups closed;
  state.Apply(s.events(), &closed);
  ASSERT_EQ(closed.steps.size(), 1u);
  EXPECT_EQ(closed.steps[0].step(), 7);
  EXPECT_EQ(closed.steps[0].start_ns(), s.events()[0].ts_ns);
  EXPECT_EQ(state.allocations().at(0x1).step, 7);
}

// An importer seeds the memory that was there before the trace at the instant of the trace's
// first step marker: that instant is not a step 0 of its own, and the step's floor is the seeds.
TEST(RankStateTest, EventsAtTheFirstMarkersInstantStartItsStep) {
  Script s;
  s.At(5 * kSecond).Alloc(0x1, 7).At(5 * kSecond).Alloc(0x2, 3).At(5 * kSecond).Step(2);
  s.Alloc(0x3, 1).Free(0x3).Step(3);
  RankState state(kSecond);
  ClosedRollups closed;
  state.Apply(s.events(), &closed);
  ASSERT_EQ(closed.steps.size(), 1u);
  EXPECT_EQ(closed.steps[0].step(), 2);
  EXPECT_EQ(closed.steps[0].start_ns(), 5 * kSecond);
  EXPECT_EQ(closed.steps[0].start_bytes(), 10u);
  EXPECT_EQ(closed.steps[0].floor_bytes(), 10u);
  EXPECT_EQ(closed.steps[0].peak_bytes(), 11u);
  EXPECT_EQ(state.current_step(), 3);
  // So does the time bucket they fell in (its floor was 0, the state before them).
  ASSERT_EQ(closed.buckets.size(), 0u);
  const v1::StepRollup bucket = state.OpenBucketRollup();
  EXPECT_EQ(bucket.start_bytes(), 10u);
  EXPECT_EQ(bucket.floor_bytes(), 10u);
  EXPECT_EQ(bucket.allocs(), 1u);
  // A live set dates them to that step too, not to a step 0 no rollup shows.
  ASSERT_EQ(state.allocations().size(), 2u);
  for (const auto& [address, allocation] : state.allocations()) {
    EXPECT_EQ(allocation.step, 2) << address;
  }
}

TEST(RankStateTest, EventsBeforeTheFirstMarkerAtOtherInstantsStayAStepOfTheirOwn) {
  // The first of them shares the marker's instant, a later one does not (the marker arrived
  // reordered): they are step 0's, not seeds to fold into step 2.
  Script s;
  s.At(5 * kSecond).Alloc(0x1, 7).At(5 * kSecond + 10).Alloc(0x2, 3).At(5 * kSecond).Step(2);
  s.Alloc(0x3, 1).Step(3);
  RankState state(kSecond);
  ClosedRollups closed;
  state.Apply(s.events(), &closed);
  ASSERT_EQ(closed.steps.size(), 2u);
  EXPECT_EQ(closed.steps[0].step(), 0);
  EXPECT_EQ(closed.steps[0].allocs(), 2u);
  EXPECT_EQ(closed.steps[0].end_bytes(), 10u);
  EXPECT_EQ(closed.steps[1].step(), 2);
  EXPECT_TRUE(closed.abandoned_steps.empty());
  EXPECT_EQ(state.allocations().at(0x1).step, 0);
  EXPECT_EQ(state.allocations().at(0x2).step, 0);
  EXPECT_EQ(state.allocations().at(0x3).step, 2);
}

TEST(RankStateTest, FirstMarkerForStepZeroContinuesTheImplicitStep) {
  Script s;
  s.Alloc(0x1, 7).Step(0).Alloc(0x2, 3).Step(0).Step(1);
  RankState state(kSecond);
  ClosedRollups closed;
  state.Apply(s.events(), &closed);
  ASSERT_EQ(closed.steps.size(), 1u);
  EXPECT_EQ(closed.steps[0].step(), 0);
  EXPECT_EQ(closed.steps[0].allocs(), 2u);
  EXPECT_EQ(closed.steps[0].end_bytes(), 10u);
}

TEST(RankStateTest, UnknownFreeAndDoubleFreeAreCountedNotApplied) {
  Script s;
  s.Alloc(0x1, 100).Free(0x99).Free(0x1).Free(0x1).Unmap(0x5);
  RankState state(kSecond);
  state.Apply(s.events(), nullptr);
  EXPECT_EQ(state.live_bytes(), 0u);
  EXPECT_EQ(state.anomalies().free_unknown, 2u);
  EXPECT_EQ(state.anomalies().unmap_unknown, 1u);
  EXPECT_EQ(state.anomalies().total(), 3u);
  EXPECT_EQ(state.OpenStepRollup().frees(), 1u);
}

TEST(RankStateTest, AllocOverALiveAddressReplacesIt) {
  Script s;
  s.Alloc(0x1, 100, 1).Alloc(0x1, 30, 2);
  RankState state(kSecond);
  state.Apply(s.events(), nullptr);
  EXPECT_EQ(state.live_bytes(), 30u);
  EXPECT_EQ(state.anomalies().alloc_over_live, 1u);
  EXPECT_EQ(state.allocations().at(0x1).tag_id, 2u);
  const v1::StepRollup r = state.OpenStepRollup();
  EXPECT_EQ(FindGroup(r.by_tag(), 1)->live_bytes(), 0u);
  EXPECT_EQ(FindGroup(r.by_tag(), 1)->peak_bytes(), 100u);
  EXPECT_EQ(FindGroup(r.by_tag(), 2)->live_bytes(), 30u);
}

// The replaced allocation's bytes and the new one's change live bytes in one move: removed first
// on their own, the step's floor took a value live bytes never held (a segment's worth lower).
TEST(RankStateTest, AllocOverALiveAddressDoesNotDipTheFloor) {
  Script s;
  s.Alloc(0x9, 1000).Alloc(0x1, 100).Step(1).Alloc(0x1, 300);
  RankState state(kSecond);
  state.Apply(s.events(), nullptr);
  EXPECT_EQ(state.live_bytes(), 1300u);
  const v1::StepRollup r = state.OpenStepRollup();
  EXPECT_EQ(r.floor_bytes(), 1100u);  // where step 1 began; it dipped to 1000
  EXPECT_EQ(r.peak_bytes(), 1300u);
}

// A host allocation over a live device address (its free lost) takes the device bytes away: the
// floor follows, or it stood above the step's end.
TEST(RankStateTest, AHostAllocationOverALiveDeviceAddressLowersTheFloor) {
  Script s;
  s.Alloc(0x9, 1000).Alloc(0x1, 100).Step(1);
  RankState state(kSecond);
  state.Apply(s.events(), nullptr);
  Event host;
  host.seq = 100;
  host.ts_ns = state.last_ts_ns() + 1;
  host.kind = EventKind::kAlloc;
  host.address = 0x1;
  host.bytes = 50;
  host.memory_kind = kMemoryPageable;
  state.Apply({host}, nullptr);
  EXPECT_EQ(state.live_bytes(), 1000u);
  const v1::StepRollup r = state.OpenStepRollup();
  EXPECT_EQ(r.floor_bytes(), 1000u);
  EXPECT_LE(r.floor_bytes(), r.end_bytes());
}

TEST(RankStateTest, VmmMappingsCountAsLiveDeviceMemory) {
  Script s;
  s.Map(0xA000, 2 * kMiB, 3).Map(0xC000, 2 * kMiB, 3).Alloc(0x1, 100).Unmap(0xA000);
  RankState state(kSecond);
  state.Apply(s.events(), nullptr);
  EXPECT_EQ(state.live_bytes(), 2 * kMiB + 100);
  EXPECT_EQ(state.mappings().size(), 1u);
  const v1::StepRollup r = state.OpenStepRollup();
  EXPECT_EQ(r.peak_bytes(), 4 * kMiB + 100);
  const v1::GroupBytes* vmm = FindGroup(r.by_memory_kind(), kMemoryVmm);
  ASSERT_NE(vmm, nullptr);
  EXPECT_EQ(vmm->live_bytes(), 2 * kMiB);
  EXPECT_EQ(vmm->peak_bytes(), 4 * kMiB);
  EXPECT_EQ(FindGroup(r.by_memory_kind(), kMemoryDevice)->live_bytes(), 100u);
  // An unmap is not a free of an allocation.
  Script t;
  t.Map(0xA000, 10).Free(0xA000);
  RankState other(kSecond);
  other.Apply(t.events(), nullptr);
  EXPECT_EQ(other.live_bytes(), 10u);
  EXPECT_EQ(other.anomalies().free_unknown, 1u);
}

// Another process's physical memory mapped here (NCCL's peer buffers): kept, per kind, but not
// this rank's live bytes, or every rank's total carried its peers'.
TEST(RankStateTest, ImportedVmmMappingsAreKeptButNotLiveBytes) {
  Script s;
  s.Map(0x1000, 100).Map(0x9000, 64, 0, kMemoryVmmImported);
  RankState state(kSecond);
  state.Apply(s.events(), nullptr);
  EXPECT_EQ(state.live_bytes(), 100u);
  EXPECT_EQ(state.mappings().size(), 2u);
  Script unmap;
  unmap.At(s.events().back().ts_ns + 1000).Unmap(0x9000);
  Event e = unmap.events().back();
  e.seq = s.events().back().seq + 1;
  state.Apply(absl::MakeConstSpan(&e, 1), nullptr);
  EXPECT_EQ(state.live_bytes(), 100u);
  EXPECT_EQ(state.mappings().size(), 1u);
  EXPECT_EQ(state.anomalies().unmap_unknown, 0u);
}

TEST(RankStateTest, HostAllocationsAreLiveButNotDeviceBytes) {
  Script s;
  s.Alloc(0x1, 1000, 1, 0, kMemoryPinned).Alloc(0x2, 10, 1, 0, kMemoryDevice);
  RankState state(kSecond);
  state.Apply(s.events(), nullptr);
  EXPECT_EQ(state.live_bytes(), 10u);
  EXPECT_EQ(state.allocations().size(), 2u);
  const v1::StepRollup r = state.OpenStepRollup();
  EXPECT_EQ(r.peak_bytes(), 10u);
  EXPECT_EQ(FindGroup(r.by_tag(), 1)->live_bytes(), 10u);
  EXPECT_EQ(FindGroup(r.by_memory_kind(), kMemoryPinned)->live_bytes(), 1000u);
  EXPECT_EQ(r.allocs(), 1u);
}

TEST(RankStateTest, PoolReservationsAreTrackedApartFromLiveBytes) {
  Script s;
  s.Simple(EventKind::kPoolCreate, 0xB00, 64 * kMiB, 0)
      .Alloc(0x100, kMiB, 0, 0, kMemoryPool)
      .Simple(EventKind::kPoolTrim, 0xB00, 0, 8 * kMiB);
  RankState state(kSecond);
  state.Apply(s.events(), nullptr);
  EXPECT_EQ(state.live_bytes(), kMiB);
  EXPECT_EQ(state.pool_reserved_bytes(), 8 * kMiB);
  EXPECT_EQ(state.OpenStepRollup().pool_reserved_bytes(), 8 * kMiB);
  Script t;
  t.Simple(EventKind::kPoolCreate, 0x1, 5, 0).Simple(EventKind::kPoolDestroy, 0x1, 0, 0);
  RankState other(kSecond);
  other.Apply(t.events(), nullptr);
  EXPECT_EQ(other.pool_reserved_bytes(), 0u);
}

TEST(RankStateTest, PhasesRecordPeakWhileOpenAndLiveAtEnd) {
  constexpr uint32_t kRollout = 7, kUpdate = 8;
  Script s;
  s.Step(1).Alloc(0x1, 100);
  s.PhaseBegin(kRollout).Alloc(0x2, 400).Free(0x2).Alloc(0x3, 50).PhaseEnd(kRollout);
  s.PhaseBegin(kUpdate).Alloc(0x4, 1000).Free(0x4).Free(0x3);
  s.Step(2);  // kUpdate still open across the boundary
  s.Alloc(0x5, 20).PhaseEnd(kUpdate).Step(3);
  RankState state(kSecond);
  ClosedRollups closed;
  state.Apply(s.events(), &closed);
  ASSERT_EQ(closed.steps.size(), 2u);
  const v1::GroupBytes* rollout = FindGroup(closed.steps[0].by_phase(), kRollout);
  ASSERT_NE(rollout, nullptr);
  EXPECT_EQ(rollout->peak_bytes(), 500u);
  EXPECT_EQ(rollout->live_bytes(), 150u);
  EXPECT_FALSE(rollout->open());
  const v1::GroupBytes* update = FindGroup(closed.steps[0].by_phase(), kUpdate);
  ASSERT_NE(update, nullptr);
  EXPECT_EQ(update->peak_bytes(), 1150u);
  EXPECT_EQ(update->live_bytes(), 100u);  // open at step end: live then, and marked so
  EXPECT_TRUE(update->open());
  EXPECT_FALSE(update->closed());
  EXPECT_TRUE(rollout->closed());
  const v1::GroupBytes* update2 = FindGroup(closed.steps[1].by_phase(), kUpdate);
  ASSERT_NE(update2, nullptr);
  EXPECT_EQ(update2->peak_bytes(), 120u);
  EXPECT_EQ(update2->live_bytes(), 120u);
  EXPECT_FALSE(update2->open());
  EXPECT_EQ(FindGroup(closed.steps[1].by_phase(), kRollout), nullptr);

  Script t;
  t.PhaseEnd(9);
  RankState other(kSecond);
  other.Apply(t.events(), nullptr);
  EXPECT_EQ(other.anomalies().phase_unmatched, 1u);
}

// A phase that closes and opens again within one row (each time bucket holds the end of one
// actor update and the start of the next): open at the row's end, yet what it left behind at
// its close is kept, and says so (`closed`), and survives a checkpoint.
TEST(RankStateTest, APhaseClosedAndReopenedInARowKeepsWhatItLeftAtTheClose) {
  constexpr uint32_t kUpdate = 8;
  Script s;
  s.Step(1).PhaseBegin(kUpdate).Alloc(0x1, 100).Alloc(0x2, 40).Free(0x1).PhaseEnd(kUpdate);
  s.PhaseBegin(kUpdate).Alloc(0x3, 500);  // the next run, still going at the step's end
  RankState state(kSecond);
  ClosedRollups closed;
  state.Apply(s.events(), &closed);
  absl::StatusOr<RankState> resumed = RankState::Deserialize(state.Serialize());
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  for (const RankState* st : {&state, &*resumed}) {
    const v1::StepRollup row = st->OpenStepRollup();
    const v1::GroupBytes* update = FindGroup(row.by_phase(), kUpdate);
    ASSERT_NE(update, nullptr);
    EXPECT_TRUE(update->open());
    EXPECT_TRUE(update->closed());
    EXPECT_EQ(update->live_bytes(), 40u);  // at its close, not 540 at the row's end
    EXPECT_EQ(update->peak_bytes(), 540u);
  }
}

TEST(RankStateTest, APhaseWhoseEndWasLostDoesNotStayOpenForTheRestOfTheJob) {
  // Step 1's END of "rollout" was in a batch the agent dropped (the LOSS says so); steps 2 and
  // 3 run it as usual. Without the loss in view, step 2's BEGIN would nest in the lost one and
  // every later row would show rollout open, its peak the whole row's.
  constexpr uint32_t kRollout = 7;
  Script s;
  s.Step(1).PhaseBegin(kRollout).Alloc(0x1, 100).Free(0x1);
  s.Simple(EventKind::kLoss, 0, 0, 3);
  for (int64_t step = 2; step <= 3; ++step) {
    s.Step(step).Alloc(0x10 + step, 1000);
    s.PhaseBegin(kRollout).Alloc(0x2, 50).Free(0x2).PhaseEnd(kRollout);
  }
  s.Step(4);
  for (bool through_checkpoint : {false, true}) {
    SCOPED_TRACE(through_checkpoint);
    RankState whole(kSecond);
    ClosedRollups closed;
    const size_t cut = 6;  // just after the LOSS
    whole.Apply(absl::MakeConstSpan(s.events()).subspan(0, cut), &closed);
    RankState state = whole;
    if (through_checkpoint) {
      absl::StatusOr<RankState> restored = RankState::Deserialize(whole.Serialize());
      ASSERT_TRUE(restored.ok()) << restored.status();
      state = *std::move(restored);
    }
    state.Apply(absl::MakeConstSpan(s.events()).subspan(cut), &closed);
    ASSERT_EQ(closed.steps.size(), 3u);
    for (int i = 1; i <= 2; ++i) {
      const v1::GroupBytes* rollout = FindGroup(closed.steps[i].by_phase(), kRollout);
      ASSERT_NE(rollout, nullptr) << "step " << closed.steps[i].step();
      EXPECT_FALSE(rollout->open()) << "step " << closed.steps[i].step();
      EXPECT_EQ(rollout->peak_bytes(), closed.steps[i].end_bytes() + 50);
    }
    EXPECT_TRUE(state.open_phases().empty());
    EXPECT_EQ(state.anomalies().phase_unmatched, 1u);
  }
}

TEST(RankStateTest, WithoutALossAPhaseMayNestInItself) {
  constexpr uint32_t kRollout = 7;
  Script s;
  s.PhaseBegin(kRollout).PhaseBegin(kRollout).PhaseEnd(kRollout);
  RankState state(kSecond);
  state.Apply(s.events(), nullptr);
  EXPECT_EQ(state.open_phases().size(), 1u);
  EXPECT_EQ(state.anomalies().phase_unmatched, 0u);
}

TEST(RankStateTest, PhasesOpenAtOnceAreBoundedAndTheRestCounted) {
  // 3000 distinct phases opened, then 3000 steps: every step carries the open phases into its
  // row. Unbounded, that took minutes and gigabytes; bounded, each row has at most 64.
  Script s;
  for (uint32_t id = 1; id <= 3000; ++id) s.PhaseBegin(id);
  for (int64_t step = 1; step <= 3000; ++step) s.Step(step);
  RankState state(kSecond);
  ClosedRollups closed;
  state.Apply(s.events(), &closed);
  EXPECT_EQ(state.open_phases().size(), RankState::kMaxOpenPhases);
  EXPECT_EQ(state.open_phases().front(), 1u);
  EXPECT_EQ(state.anomalies().phase_too_deep, 3000 - RankState::kMaxOpenPhases);
  ASSERT_EQ(closed.steps.size(), 3000u);  // steps 0 (the events before the first marker) to 2999
  for (const v1::StepRollup& row : closed.steps) {
    ASSERT_EQ(row.by_phase_size(), static_cast<int>(RankState::kMaxOpenPhases));
  }
  // The anomaly survives a checkpoint, and a begin that was ignored ends unmatched.
  absl::StatusOr<RankState> restored = RankState::Deserialize(state.Serialize());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->anomalies().phase_too_deep, 3000 - RankState::kMaxOpenPhases);
  Script end;
  end.PhaseEnd(3000);
  restored->Apply(end.events(), nullptr);
  EXPECT_EQ(restored->anomalies().phase_unmatched, 1u);
}

// A range nested too deep is ignored, and so is its END: it belongs to the ignored BEGIN, not to
// an outer open range of the same name, which stays open until its own END (also after a
// checkpoint taken in between).
TEST(RankStateTest, TheEndOfAPhaseIgnoredForDepthLeavesTheOuterOneOpen) {
  constexpr uint32_t kOuter = 7;
  Script s;
  s.PhaseBegin(kOuter);
  for (uint32_t id = 100; id < 100 + RankState::kMaxOpenPhases - 1; ++id) s.PhaseBegin(id);
  s.PhaseBegin(kOuter);  // the 65th: too deep
  RankState state(kSecond);
  state.Apply(s.events(), nullptr);
  ASSERT_EQ(state.anomalies().phase_too_deep, 1u);
  absl::StatusOr<RankState> restored = RankState::Deserialize(state.Serialize());
  ASSERT_TRUE(restored.ok()) << restored.status();
  for (RankState* st : {&state, &*restored}) {
    Script end;
    end.PhaseEnd(kOuter);  // the ignored one's
    st->Apply(end.events(), nullptr);
    ASSERT_EQ(st->open_phases().size(), RankState::kMaxOpenPhases);
    EXPECT_EQ(st->open_phases().front(), kOuter);
    EXPECT_EQ(st->anomalies().phase_unmatched, 1u);
    Script rest;
    for (uint32_t id = 100 + RankState::kMaxOpenPhases - 2; id >= 100; --id) rest.PhaseEnd(id);
    rest.PhaseEnd(kOuter);  // the outer one's own END closes it, matched
    st->Apply(rest.events(), nullptr);
    EXPECT_TRUE(st->open_phases().empty());
    EXPECT_EQ(st->anomalies().phase_unmatched, 1u);
  }
}

// The step's highest device-used sample keeps the live bytes of its moment, so the memory used
// outside traced allocations is known even when no sample lands on the step's peak; a
// checkpoint keeps it.
TEST(RankStateTest, TheHighestDeviceSampleKeepsTheLiveBytesOfItsMoment) {
  Script s;
  s.Step(1)
      .Alloc(0x1000, 10 * kMiB)
      .Simple(EventKind::kDeviceSample, 0, 12 * kMiB, 80 * kMiB)  // 2 MiB outside
      .Alloc(0x2000, 30 * kMiB)                                   // the peak, unsampled
      .Free(0x2000)
      .Alloc(0x3000, 5 * kMiB)
      .Simple(EventKind::kDeviceSample, 0, 17 * kMiB, 80 * kMiB)  // the highest: 15 live
      .Free(0x3000);
  RankState state(kSecond);
  state.Apply(s.events(), nullptr);
  v1::StepRollup r = state.OpenStepRollup();
  EXPECT_EQ(r.peak_bytes(), 40 * kMiB);
  EXPECT_EQ(r.device_used_max(), 17 * kMiB);
  EXPECT_EQ(r.live_at_device_used_max(), 15 * kMiB);
  absl::StatusOr<RankState> restored = RankState::Deserialize(state.Serialize());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->OpenStepRollup().live_at_device_used_max(), 15 * kMiB);
}

TEST(RankStateTest, SamplesOomAndLossFillTheirFields) {
  Script s;
  s.Step(1)
      .Simple(EventKind::kDeviceSample, 0, 30 * kMiB, 80 * kMiB)
      .Simple(EventKind::kDeviceSample, 0, 50 * kMiB, 80 * kMiB)
      .Simple(EventKind::kDeviceSample, 0, 40 * kMiB, 80 * kMiB)
      .Simple(EventKind::kHostSample, 0, 7 * kMiB, 0)
      .Simple(EventKind::kHostSample, 0, 5 * kMiB, 0)
      .Simple(EventKind::kOom, 0, 2 * kMiB, 0)
      .Simple(EventKind::kOom, 0, 9 * kMiB, 0)
      .Simple(EventKind::kLoss, 0, 0, 12)
      .Simple(EventKind::kLoss, 0, 0, 3);
  RankState state(kSecond);
  state.Apply(s.events(), nullptr);
  const v1::StepRollup r = state.OpenStepRollup();
  EXPECT_EQ(r.device_used_max(), 50 * kMiB);
  EXPECT_EQ(r.device_total(), 80 * kMiB);
  EXPECT_EQ(r.host_rss_max(), 7 * kMiB);
  EXPECT_EQ(r.ooms(), 2u);
  EXPECT_EQ(r.oom_requested_bytes(), 9 * kMiB);
  EXPECT_EQ(r.events_lost(), 15u);
  EXPECT_EQ(state.ooms(), 2u);
  EXPECT_EQ(state.first_oom_seq(), 7u);
  EXPECT_EQ(state.first_oom_bytes(), 2 * kMiB);
  EXPECT_EQ(state.first_oom_ts_ns(), s.events()[6].ts_ns);
}

TEST(RankStateTest, TimeBucketsGiveAnAxisWithoutSteps) {
  Script s;
  s.At(10 * kSecond).Alloc(0x1, 100);
  s.At(10 * kSecond + 500'000'000).Alloc(0x2, 100);
  s.At(11 * kSecond + 1).Free(0x1);
  s.At(13 * kSecond).Free(0x2).Alloc(0x3, 5);
  RankState state(kSecond);
  ClosedRollups closed;
  state.Apply(s.events(), &closed);
  EXPECT_TRUE(closed.steps.empty());
  ASSERT_EQ(closed.buckets.size(), 2u);
  EXPECT_EQ(closed.buckets[0].step(), 10);
  EXPECT_EQ(closed.buckets[0].start_ns(), 10 * kSecond);
  EXPECT_EQ(closed.buckets[0].end_ns(), 11 * kSecond);
  EXPECT_EQ(closed.buckets[0].peak_bytes(), 200u);
  EXPECT_EQ(closed.buckets[0].end_bytes(), 200u);
  EXPECT_EQ(closed.buckets[1].step(), 11);
  EXPECT_EQ(closed.buckets[1].start_bytes(), 200u);
  EXPECT_EQ(closed.buckets[1].end_bytes(), 100u);
  EXPECT_EQ(closed.buckets[1].floor_bytes(), 100u);
  // Bucket 12 saw no event and is not emitted; 13 is open.
  EXPECT_EQ(state.current_bucket(), 13);
  EXPECT_EQ(state.OpenBucketRollup().floor_bytes(), 0u);
  EXPECT_EQ(state.OpenBucketRollup().end_bytes(), 5u);
}

TEST(RankStateTest, TimeBucketsAreKeyedByCollectorTime) {
  // The rank's clock is 2.5 s ahead of the collector's: its event at 10.2 s (rank clock) is at
  // 7.7 s collector time, in bucket 7, and rows carry collector time.
  Script s;
  s.At(10 * kSecond + 200'000'000).Alloc(0x1, 100);
  s.At(10 * kSecond + 400'000'000).Alloc(0x2, 100);  // 7.9 s: still bucket 7
  s.At(10 * kSecond + 600'000'000).Free(0x1);        // 8.1 s: bucket 8
  RankState state(kSecond);
  state.SetClockOffset(-2'500'000'000);
  ClosedRollups closed;
  state.Apply(s.events(), &closed);
  ASSERT_EQ(closed.buckets.size(), 1u);
  EXPECT_EQ(closed.buckets[0].step(), 7);
  EXPECT_EQ(closed.buckets[0].start_ns(), 7 * kSecond);
  EXPECT_EQ(closed.buckets[0].end_ns(), 8 * kSecond);
  EXPECT_EQ(closed.buckets[0].end_bytes(), 200u);
  EXPECT_EQ(state.current_bucket(), 8);
  // Steps and events keep the rank's own clock.
  EXPECT_EQ(state.last_ts_ns(), 10 * kSecond + 600'000'000);
  // A later, better estimate moving the clock back a little: the event counts in the open
  // bucket rather than reopening a closed one.
  state.SetClockOffset(-2'700'000'000);
  Script later;
  later.At(10 * kSecond + 650'000'000).Alloc(0x3, 7);  // 7.95 s collector time
  std::vector<Event> e = later.events();
  e[0].seq = 4;
  state.Apply(e, &closed);
  EXPECT_EQ(closed.buckets.size(), 1u);
  EXPECT_EQ(state.current_bucket(), 8);
  EXPECT_EQ(state.OpenBucketRollup().allocs(), 1u);
  // The offset survives a checkpoint.
  absl::StatusOr<RankState> resumed = RankState::Deserialize(state.Serialize());
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->clock_offset_ns(), -2'700'000'000);
}

TEST(RankStateTest, AnOffsetAtTheEndOfTheClockSaturates) {
  Script s;
  s.At(std::numeric_limits<int64_t>::max() - 5).Alloc(0x1, 1);
  RankState state(kSecond);
  state.SetClockOffset(kSecond);
  state.Apply(s.events(), nullptr);
  EXPECT_EQ(state.current_bucket(), std::numeric_limits<int64_t>::max() / kSecond);
}

TEST(RankStateTest, TimeGoingBackIsCountedAndStaysInTheOpenBucket) {
  Script s;
  s.At(5 * kSecond).Alloc(0x1, 1);
  s.At(3 * kSecond).Alloc(0x2, 1);
  RankState state(kSecond);
  ClosedRollups closed;
  state.Apply(s.events(), &closed);
  EXPECT_EQ(state.anomalies().time_backwards, 1u);
  EXPECT_TRUE(closed.buckets.empty());
  EXPECT_EQ(state.current_bucket(), 5);
  EXPECT_EQ(state.OpenBucketRollup().allocs(), 2u);
  // The latest time seen stays the later one, through a checkpoint too.
  EXPECT_EQ(state.last_ts_ns(), 3 * kSecond);
  EXPECT_EQ(state.max_ts_ns(), 5 * kSecond);
  absl::StatusOr<RankState> restored = RankState::Deserialize(state.Serialize());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->max_ts_ns(), 5 * kSecond);
}

TEST(RankStateTest, AnEventStampedPastTheHorizonIsHeldAtTheTimeOfTheOneBeforeIt) {
  constexpr int64_t kYear2200 = int64_t{7'258'118'400} * kSecond;  // a clock gone wrong
  constexpr int64_t kMs = 1'000'000;
  Script s;
  s.At(1 * kSecond).Alloc(0x1, 1).Step(1);
  s.At(kYear2200).Alloc(0x2, 1).Step(2);
  s.At(2 * kSecond + 500 * kMs).Alloc(0x3, 1).Step(3);
  RankState state(kSecond);
  state.SetTimeHorizon(10 * kSecond);
  ClosedRollups closed;
  state.Apply(s.events(), &closed);
  EXPECT_EQ(state.anomalies().time_future, 2u);
  EXPECT_EQ(state.anomalies().time_backwards, 0u);
  EXPECT_EQ(state.anomalies().total(), 2u);
  EXPECT_EQ(state.max_ts_ns(), 2 * kSecond + 501 * kMs);
  // The time bucket moved from 1 s to 2 s, as the events after the garbage say, with the held
  // allocation in the first.
  ASSERT_EQ(closed.buckets.size(), 1);
  EXPECT_EQ(closed.buckets[0].step(), 1);
  EXPECT_EQ(closed.buckets[0].allocs(), 2u);
  EXPECT_EQ(state.current_bucket(), 2);
  // Step 2 began where its held marker was: at the event before it.
  ASSERT_EQ(closed.steps.size(), 3);
  EXPECT_EQ(closed.steps[1].end_ns(), 1 * kSecond + 1 * kMs);
  EXPECT_EQ(closed.steps[2].step(), 2);
  EXPECT_EQ(closed.steps[2].start_ns(), 1 * kSecond + 1 * kMs);
  EXPECT_EQ(closed.steps[2].end_ns(), 2 * kSecond + 501 * kMs);
  EXPECT_EQ(state.allocations().at(0x2).ts_ns, 1 * kSecond + 1 * kMs);
  // The count survives a checkpoint; the horizon is the store's to set again.
  absl::StatusOr<RankState> restored = RankState::Deserialize(state.Serialize());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->anomalies().time_future, 2u);
  EXPECT_EQ(restored->time_horizon_ns(), kNoTimeHorizon);

  // A first event past it has no event before it: it is held at the horizon.
  Script first;
  first.At(kYear2200).Alloc(0x1, 1);
  RankState held(kSecond);
  held.SetTimeHorizon(10 * kSecond);
  held.Apply(first.events(), nullptr);
  EXPECT_EQ(held.first_ts_ns(), 10 * kSecond);
  EXPECT_EQ(held.current_bucket(), 10);
  // Without a horizon, a timestamp is a time however late.
  RankState unbounded(kSecond);
  unbounded.Apply(first.events(), nullptr);
  EXPECT_EQ(unbounded.anomalies().time_future, 0u);
  EXPECT_EQ(unbounded.first_ts_ns(), kYear2200);
}

TEST(RankStateTest, NegativeTimestampsUseFloorBuckets) {
  Script s;
  s.At(-1).Alloc(0x1, 1);
  RankState state(kSecond);
  state.Apply(s.events(), nullptr);
  EXPECT_EQ(state.current_bucket(), -1);
}

TEST(RankStateTest, StepGoingBackIsCounted) {
  Script s;
  s.Step(5).Step(3);
  RankState state(kSecond);
  ClosedRollups closed;
  state.Apply(s.events(), &closed);
  EXPECT_EQ(state.anomalies().step_backwards, 1u);
  EXPECT_EQ(state.current_step(), 3);
}

TEST(RankStateTest, SourceGroupsTrackLiveAndPeak) {
  Script s;
  s.Alloc(0x1, 10, 0, 4).Alloc(0x2, 20, 0, 5).Free(0x1);
  RankState state(kSecond);
  state.Apply(s.events(), nullptr);
  const v1::StepRollup r = state.OpenStepRollup();
  EXPECT_EQ(FindGroup(r.by_source(), 4)->live_bytes(), 0u);
  EXPECT_EQ(FindGroup(r.by_source(), 4)->peak_bytes(), 10u);
  EXPECT_EQ(FindGroup(r.by_source(), 5)->live_bytes(), 20u);
}

TEST(RankStateTest, GroupPeaksResetAtEachStep) {
  Script s;
  s.Alloc(0x1, 10, 1).Free(0x1).Step(1).Alloc(0x2, 3, 1);
  RankState state(kSecond);
  state.Apply(s.events(), nullptr);
  const v1::GroupBytes* g = FindGroup(state.OpenStepRollup().by_tag(), 1);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->peak_bytes(), 3u);
}

TEST(RankStateTest, SplittingASequenceAnywhereGivesTheSameRollups) {
  // The store applies batch by batch and checkpoints in between: the result must not depend on
  // where batches end or whether the state went through Serialize/Deserialize.
  Script s;
  uint64_t a = 0x100;
  for (int step = 1; step <= 6; ++step) {
    s.At(step * kSecond / 2).Step(step).PhaseBegin(9);
    s.Alloc(a, 1000 + step, step % 3, 1).Map(a + 0x10000000, 2 * kMiB, 4);
    s.Alloc(a + 8, 50, 2, 2).Free(a).PhaseEnd(9);
    if (step % 2 == 0) s.Unmap(a + 0x10000000);
    s.Simple(EventKind::kDeviceSample, 0, step * kMiB, 80 * kMiB);
    a += 0x40;
  }
  s.Free(0x5555).PhaseBegin(9).Simple(EventKind::kPoolCreate, 0x77, 123, 0);
  const std::vector<Event>& all = s.events();

  RankState whole(kSecond);
  ClosedRollups whole_closed;
  whole.Apply(all, &whole_closed);

  for (size_t cut = 0; cut <= all.size(); ++cut) {
    RankState first(kSecond);
    ClosedRollups closed;
    first.Apply(absl::MakeConstSpan(all).subspan(0, cut), &closed);
    absl::StatusOr<RankState> resumed = RankState::Deserialize(first.Serialize());
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    resumed->Apply(absl::MakeConstSpan(all).subspan(cut), &closed);
    ASSERT_EQ(closed.steps.size(), whole_closed.steps.size()) << "cut " << cut;
    for (size_t i = 0; i < closed.steps.size(); ++i) {
      EXPECT_EQ(closed.steps[i].SerializeAsString(), whole_closed.steps[i].SerializeAsString())
          << "cut " << cut << " step " << closed.steps[i].step();
    }
    ASSERT_EQ(closed.buckets.size(), whole_closed.buckets.size()) << "cut " << cut;
    for (size_t i = 0; i < closed.buckets.size(); ++i) {
      EXPECT_EQ(closed.buckets[i].SerializeAsString(),
                whole_closed.buckets[i].SerializeAsString())
          << "cut " << cut << " bucket " << i;
    }
    EXPECT_EQ(resumed->OpenStepRollup().SerializeAsString(),
              whole.OpenStepRollup().SerializeAsString())
        << "cut " << cut;
    EXPECT_EQ(resumed->OpenBucketRollup().SerializeAsString(),
              whole.OpenBucketRollup().SerializeAsString())
        << "cut " << cut;
    EXPECT_EQ(resumed->live_bytes(), whole.live_bytes());
    EXPECT_EQ(resumed->anomalies().total(), whole.anomalies().total());
    EXPECT_EQ(resumed->Serialize(), whole.Serialize()) << "cut " << cut;
  }
}

TEST(RankStateTest, LiveBytesEqualTheLiveSetsSumAfterARestoreEvenWhenSizesWrap) {
  // A "negative" size (2^64-1) from a broken agent, then a real one, then the first freed.
  Script s;
  s.Alloc(0xA, ~uint64_t{0}, 1, 2).Alloc(0xB, 2, 1, 2).Free(0xA);
  RankState state(kSecond);
  state.Apply(s.events(), nullptr);
  EXPECT_EQ(state.live_bytes(), 2u);
  EXPECT_EQ(state.OpenStepRollup().by_tag(0).live_bytes(), 2u);
  absl::StatusOr<RankState> restored = RankState::Deserialize(state.Serialize());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->live_bytes(), state.live_bytes());
  EXPECT_EQ(restored->OpenStepRollup().by_tag(0).live_bytes(), 2u);
}

TEST(RankStateTest, SerializeKeepsEveryLiveAllocation) {
  Script s;
  s.Step(4).Alloc(0xFFFF000000000000ull, 5, 1, 2, kMemoryManaged).Alloc(0x10, 6).Map(0x20, 7);
  s.Simple(EventKind::kOom, 0, 99, 0);
  RankState state(kSecond * 2);
  state.Apply(s.events(), nullptr);
  absl::StatusOr<RankState> back = RankState::Deserialize(state.Serialize());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->bucket_ns(), 2 * kSecond);
  ASSERT_EQ(back->allocations().size(), 2u);
  const LiveAllocation& big = back->allocations().at(0xFFFF000000000000ull);
  EXPECT_EQ(big.bytes, 5u);
  EXPECT_EQ(big.tag_id, 1u);
  EXPECT_EQ(big.source_id, 2u);
  EXPECT_EQ(big.step, 4);
  EXPECT_EQ(big.seq, 2u);
  EXPECT_EQ(big.ts_ns, s.events()[1].ts_ns);
  EXPECT_EQ(big.memory_kind, kMemoryManaged);
  EXPECT_EQ(back->mappings().at(0x20).memory_kind, kMemoryVmm);
  EXPECT_EQ(back->live_bytes(), 18u);
  EXPECT_EQ(back->current_step(), 4);
  EXPECT_EQ(back->first_oom_seq(), 5u);
  EXPECT_EQ(back->last_seq(), 5u);
  EXPECT_EQ(back->events_applied(), 5u);
}

// Each allocation and mapping keeps the innermost phase open when it was made, through a
// checkpoint too; the open phases are kept outermost first.
TEST(RankStateTest, AnAllocationKeepsTheInnermostPhaseOpenWhenItWasMade) {
  Script s;
  s.PhaseBegin(7).Alloc(0x1, 1).PhaseBegin(8).Alloc(0x2, 1).Map(0x5, 1);
  s.PhaseBegin(7).Alloc(0x6, 1).PhaseEnd(7);  // a nested range of the same name
  s.PhaseEnd(8).Alloc(0x3, 1).PhaseEnd(7).Alloc(0x4, 1).PhaseBegin(9);
  RankState state(kSecond);
  state.Apply(s.events(), nullptr);
  EXPECT_EQ(state.allocations().at(0x1).phase_id, 7u);
  EXPECT_EQ(state.allocations().at(0x2).phase_id, 8u);
  EXPECT_EQ(state.mappings().at(0x5).phase_id, 8u);
  EXPECT_EQ(state.allocations().at(0x6).phase_id, 7u);
  EXPECT_EQ(state.allocations().at(0x3).phase_id, 7u);
  EXPECT_EQ(state.allocations().at(0x4).phase_id, 0u);
  EXPECT_EQ(state.open_phases(), std::vector<uint32_t>({9}));
  absl::StatusOr<RankState> back = RankState::Deserialize(state.Serialize());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->allocation_phases_known());
  for (uint64_t address : {0x1, 0x2, 0x6, 0x3, 0x4}) {
    EXPECT_EQ(back->allocations().at(address).phase_id,
              state.allocations().at(address).phase_id)
        << address;
  }
  EXPECT_EQ(back->mappings().at(0x5).phase_id, 8u);
  EXPECT_EQ(back->open_phases(), std::vector<uint32_t>({9}));
}

// A checkpoint written before allocations carried their phase restores a state that says so
// (the store then names phases by replaying the markers), and keeps saying so in its own
// checkpoints. A phase column of the wrong length is refused.
TEST(RankStateTest, ACheckpointWithoutAllocationPhasesSaysTheyAreUnknown) {
  Script s;
  s.PhaseBegin(7).Alloc(0x1, 1).Map(0x2, 1);
  RankState state(kSecond);
  state.Apply(s.events(), nullptr);
  RankStateRecord old;
  ASSERT_TRUE(old.ParseFromString(state.Serialize()));
  old.clear_allocation_phases();
  old.mutable_allocations()->clear_phase_id();
  old.mutable_mappings()->clear_phase_id();
  absl::StatusOr<RankState> back = RankState::Deserialize(old.SerializeAsString());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->allocation_phases_known());
  EXPECT_EQ(back->allocations().at(0x1).phase_id, 0u);
  EXPECT_EQ(back->open_phases(), std::vector<uint32_t>({7}));
  absl::StatusOr<RankState> again = RankState::Deserialize(back->Serialize());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->allocation_phases_known());

  RankStateRecord uneven;
  ASSERT_TRUE(uneven.ParseFromString(state.Serialize()));
  uneven.mutable_allocations()->add_phase_id(3);
  EXPECT_EQ(RankState::Deserialize(uneven.SerializeAsString()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RankStateTest, DeserializeRejectsGarbage) {
  EXPECT_EQ(RankState::Deserialize("\xff\xff\xff").status().code(),
            absl::StatusCode::kInvalidArgument);
  // Parses as a message but has no version.
  EXPECT_EQ(RankState::Deserialize("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RankAnomaliesTest, EveryCountSurvivesTheRoundTripThroughItsMessage) {
  // Checkpoints carry the counts as AnomalyCounts: each field must come back as itself.
  RankAnomalies a;
  a.free_unknown = 1;
  a.alloc_over_live = 2;
  a.unmap_unknown = 3;
  a.time_backwards = 4;
  a.step_backwards = 5;
  a.phase_unmatched = 6;
  a.phase_too_deep = 7;
  v1::AnomalyCounts message;
  a.ToProto(&message);
  const RankAnomalies b = RankAnomalies::FromProto(message);
  EXPECT_EQ(b.free_unknown, 1u);
  EXPECT_EQ(b.alloc_over_live, 2u);
  EXPECT_EQ(b.unmap_unknown, 3u);
  EXPECT_EQ(b.time_backwards, 4u);
  EXPECT_EQ(b.step_backwards, 5u);
  EXPECT_EQ(b.phase_unmatched, 6u);
  EXPECT_EQ(b.phase_too_deep, 7u);
}

}  // namespace
}  // namespace memtrace::collector
