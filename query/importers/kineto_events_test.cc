#include "query/importers/kineto_events.h"

#include <map>

#include "gtest/gtest.h"
#include "query/importers/recording_sink.h"

namespace memtrace::importers {
namespace {

const uint64_t kThreadA = ThreadKey(1, 10);
const uint64_t kThreadB = ThreadKey(1, 11);

KinetoMemoryRecord Mem(int64_t ts, int64_t bytes, uint64_t addr, int64_t total,
                       uint64_t thread = kThreadA, int32_t type = kKinetoDeviceCuda,
                       int32_t device = 0, int64_t reserved = 1 << 20) {
  KinetoMemoryRecord r;
  r.ts_ns = ts;
  r.bytes = bytes;
  r.address = addr;
  r.total_allocated = total;
  r.total_reserved = reserved;
  r.thread = thread;
  r.device_type = type;
  r.device_id = device;
  return r;
}

std::vector<Event> OfKind(const std::vector<Event>& events, EventKind kind) {
  std::vector<Event> out;
  for (const Event& e : events) {
    if (e.kind == kind) out.push_back(e);
  }
  return out;
}

// Device live bytes after each event, the way the collector counts them (host kinds apart).
std::vector<uint64_t> DeviceLiveAfterMemoryEvents(const std::vector<Event>& events,
                                                  size_t skip_first) {
  std::map<uint64_t, uint64_t> live;
  uint64_t total = 0;
  std::vector<uint64_t> out;
  size_t seen = 0;
  for (const Event& e : events) {
    if (e.kind != EventKind::kAlloc && e.kind != EventKind::kFree) continue;
    if (e.memory_kind == kMemoryPageable) continue;
    if (e.kind == EventKind::kAlloc) {
      live[e.address] = e.bytes;
      total += e.bytes;
    } else {
      auto it = live.find(e.address);
      if (it != live.end()) {
        total -= it->second;
        live.erase(it);
      }
    }
    if (++seen > skip_first) out.push_back(total);
  }
  return out;
}

TEST(KinetoEventsTest, RecordsAllocAndFreeInTimeThenEventIndexOrder) {
  KinetoTrace trace;
  trace.base_time_ns = 1000000;
  trace.memory = {Mem(300, -64, 0x100, 0, kThreadB), Mem(100, 64, 0x100, 64),
                  Mem(200, 32, 0x200, 96), Mem(200, -32, 0x200, 64)};
  trace.memory[1].ev_idx = 1;
  trace.memory[2].ev_idx = 2;
  trace.memory[3].ev_idx = 3;
  trace.memory[0].ev_idx = 4;
  // Same timestamp: Ev Idx decides, so the free of 0x200 follows its allocation.
  std::swap(trace.memory[2], trace.memory[3]);
  RecordingSink sink;
  auto stats = RecordKinetoTrace(&trace, {}, sink);
  ASSERT_TRUE(stats.ok()) << stats.status();
  std::vector<Event> memory;
  for (const Event& e : sink.events()) {
    if (e.kind == EventKind::kAlloc || e.kind == EventKind::kFree) memory.push_back(e);
  }
  ASSERT_EQ(memory.size(), 4u);
  EXPECT_EQ(memory[0].kind, EventKind::kAlloc);
  EXPECT_EQ(memory[0].ts_ns, 1000100);
  EXPECT_EQ(memory[0].bytes, 64u);
  EXPECT_EQ(memory[0].address, 0x100u);
  EXPECT_EQ(memory[0].memory_kind, kMemoryDevice);
  EXPECT_EQ(memory[1].kind, EventKind::kAlloc);
  EXPECT_EQ(memory[2].kind, EventKind::kFree);
  EXPECT_EQ(memory[2].address, 0x200u);
  EXPECT_EQ(memory[2].bytes, 32u);
  EXPECT_EQ(memory[3].kind, EventKind::kFree);
  EXPECT_EQ(memory[3].ts_ns, 1000300);
  EXPECT_EQ(stats->memory_events, 4u);
  EXPECT_EQ(stats->allocs, 2u);
  EXPECT_EQ(stats->frees, 2u);
  EXPECT_EQ(stats->seeded_allocations, 0u);
  EXPECT_EQ(stats->total_allocated_mismatches, 0u);
  // Sequence numbers and timestamps never go back.
  std::vector<Event> all = sink.events();
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LE(all[i - 1].ts_ns, all[i].ts_ns);
}

TEST(KinetoEventsTest, SeedsPreTraceMemorySoLiveBytesEqualTotalAllocated) {
  KinetoTrace trace;
  // 1000 bytes were allocated before the trace; 200 of them at 0x5000 are freed in it.
  trace.memory = {Mem(10, 64, 0x100, 1064), Mem(20, -200, 0x5000, 864), Mem(30, 128, 0x200, 992),
                  Mem(40, -64, 0x100, 928)};
  RecordingSink sink;
  auto stats = RecordKinetoTrace(&trace, {}, sink);
  ASSERT_TRUE(stats.ok()) << stats.status();
  std::vector<Event> allocs = OfKind(sink.events(), EventKind::kAlloc);
  ASSERT_GE(allocs.size(), 2u);
  EXPECT_EQ(allocs[0].address, 0x5000u);
  EXPECT_EQ(allocs[0].bytes, 200u);
  EXPECT_EQ(allocs[1].address, BaselineAddress(kKinetoDeviceCuda, 0));
  EXPECT_EQ(allocs[1].bytes, 800u);
  EXPECT_EQ(sink.Name(allocs[0].tag_id), kBaselineTag);
  EXPECT_EQ(allocs[0].ts_ns, 10);
  EXPECT_EQ(stats->seeded_allocations, 2u);
  EXPECT_EQ(stats->seeded_bytes, 1000u);
  EXPECT_EQ(stats->final_total_allocated, 928);
  EXPECT_EQ(stats->total_allocated_mismatches, 0u);
  std::vector<uint64_t> live = DeviceLiveAfterMemoryEvents(sink.events(), 2);
  EXPECT_EQ(live, (std::vector<uint64_t>{1064, 864, 992, 928}));
}

TEST(KinetoEventsTest, TraceFromAnEmptyAllocatorSeedsNothing) {
  KinetoTrace trace;
  trace.memory = {Mem(10, 64, 0x100, 64), Mem(20, -64, 0x100, 0)};
  RecordingSink sink;
  auto stats = RecordKinetoTrace(&trace, {}, sink);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->seeded_allocations, 0u);
  EXPECT_EQ(OfKind(sink.events(), EventKind::kAlloc).size(), 1u);
}

TEST(KinetoEventsTest, CountsEventsThatDisagreeWithTotalAllocated) {
  KinetoTrace trace;
  // Between the second and third event 500 bytes were allocated without an event.
  trace.memory = {Mem(10, 64, 0x100, 64), Mem(20, 64, 0x200, 128), Mem(30, 64, 0x300, 692)};
  RecordingSink sink;
  auto stats = RecordKinetoTrace(&trace, {}, sink);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->total_allocated_mismatches, 1u);
}

// Found by kineto_fuzzer: a second free of an address with no allocation between was taken for
// another pre-trace block and seeded at the same address, so two ALLOCs went out for one
// address and one of its FREEs matched nothing in the collector's live set.
TEST(KinetoEventsTest, AFreeOfAnAddressAlreadyFreedIsDroppedAndCounted) {
  KinetoTrace trace;
  // 0x5000 is a pre-trace block, freed twice; 0x100 is allocated, freed, and freed again.
  trace.memory = {Mem(10, -200, 0x5000, 0), Mem(20, -200, 0x5000, 0), Mem(30, 64, 0x100, 64),
                  Mem(40, -64, 0x100, 0),   Mem(50, -64, 0x100, 0),   Mem(60, 64, 0x100, 64),
                  Mem(70, -64, 0x100, 0)};
  RecordingSink sink;
  auto stats = RecordKinetoTrace(&trace, {}, sink);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->unmatched_frees, 2u);
  EXPECT_EQ(stats->seeded_allocations, 1u);
  EXPECT_EQ(stats->allocs, 2u);
  EXPECT_EQ(stats->frees, 3u);
  std::map<uint64_t, int> live;
  for (const Event& e : sink.events()) {
    if (e.kind == EventKind::kAlloc) EXPECT_EQ(live[e.address]++, 0) << e.address;
    if (e.kind == EventKind::kFree) EXPECT_EQ(live[e.address]--, 1) << e.address;
  }
}

// Found by kineto_fuzzer: blocks were matched per (device type, device id), and Device Id -1
// and 0 are one device in the events, so a block freed under each was seeded twice at one
// address. The collector matches by address alone; so does the importer now.
TEST(KinetoEventsTest, FreesAreMatchedByAddressAloneAsTheCollectorMatchesThem) {
  KinetoTrace trace;
  trace.memory = {Mem(10, -64, 0x100, 0, kThreadA, kKinetoDeviceCuda, -1),
                  Mem(20, -64, 0x100, 0, kThreadA, kKinetoDeviceCuda, 0)};
  RecordingSink sink;
  auto stats = RecordKinetoTrace(&trace, {}, sink);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->unmatched_frees, 1u);
  std::vector<Event> seeds;
  for (const Event& e : OfKind(sink.events(), EventKind::kAlloc)) {
    if (e.address == 0x100) seeds.push_back(e);
  }
  EXPECT_EQ(seeds.size(), 1u);
  EXPECT_EQ(OfKind(sink.events(), EventKind::kFree).size(), 1u);
}

TEST(KinetoEventsTest, TagsAllocationsWithTheInnermostAnnotationOnTheirThread) {
  KinetoTrace trace;
  trace.names = {"forward", "attention"};
  trace.annotations = {{0, 100, kThreadA, 0}, {10, 20, kThreadA, 1}};
  trace.memory = {Mem(15, 8, 0x1, 8), Mem(16, 8, 0x2, 16, kThreadB), Mem(50, 8, 0x3, 24),
                  Mem(150, 8, 0x4, 32), Mem(160, -8, 0x1, 24)};
  RecordingSink sink;
  auto stats = RecordKinetoTrace(&trace, {}, sink);
  ASSERT_TRUE(stats.ok());
  std::map<uint64_t, std::string> tag_by_address;
  for (const Event& e : OfKind(sink.events(), EventKind::kAlloc)) {
    tag_by_address[e.address] = sink.Name(e.tag_id);
  }
  EXPECT_EQ(tag_by_address[0x1], "attention");
  EXPECT_EQ(tag_by_address[0x2], "");  // another thread: the annotation says nothing about it
  EXPECT_EQ(tag_by_address[0x3], "forward");
  EXPECT_EQ(tag_by_address[0x4], "");  // after every range closed
  EXPECT_EQ(OfKind(sink.events(), EventKind::kFree)[0].tag_id, 0u);
  EXPECT_EQ(stats->tags, 2u);
  EXPECT_EQ(stats->tagged_allocs, 2u);
}

TEST(KinetoEventsTest, EmitsOneStepPerProfilerStepAheadOfItsAllocations) {
  KinetoTrace trace;
  trace.steps = {{{100, 200, kThreadA, 0}, 3, false},
                 {{105, 190, ThreadKey(0, 7), 0}, 3, true},
                 {{200, 300, kThreadA, 0}, 4, false}};
  trace.memory = {Mem(50, 8, 0x1, 8), Mem(100, 8, 0x2, 16), Mem(250, 8, 0x3, 24)};
  RecordingSink sink;
  auto stats = RecordKinetoTrace(&trace, {}, sink);
  ASSERT_TRUE(stats.ok());
  std::vector<Event> kinds;
  for (const Event& e : sink.events()) {
    if (e.kind != EventKind::kDeviceSample) kinds.push_back(e);
  }
  ASSERT_EQ(kinds.size(), 5u);
  EXPECT_EQ(kinds[0].kind, EventKind::kAlloc);
  EXPECT_EQ(kinds[1].kind, EventKind::kStep);
  EXPECT_EQ(kinds[1].aux, 3u);
  EXPECT_EQ(kinds[1].ts_ns, 100);
  EXPECT_EQ(kinds[2].address, 0x2u);  // same moment as the step: inside it
  EXPECT_EQ(kinds[3].kind, EventKind::kStep);
  EXPECT_EQ(kinds[3].aux, 4u);
  EXPECT_EQ(kinds[4].address, 0x3u);
  EXPECT_EQ(stats->steps, 2u);
}

// The trace starts with a step: the memory from before the trace is seeded at that step's
// instant, ahead of its marker.
TEST(KinetoEventsTest, PreTraceMemoryBelongsToTheStepTheTraceStartsWith) {
  KinetoTrace trace;
  trace.steps = {{{10, 100, kThreadA, 0}, 2, false}, {{100, 200, kThreadA, 0}, 3, false}};
  trace.memory = {Mem(10, 64, 0x100, 1064), Mem(150, -64, 0x100, 1000)};
  RecordingSink sink;
  auto stats = RecordKinetoTrace(&trace, {}, sink);
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->seeded_allocations, 1u);
  // The seed, then the step's marker at the same instant: the collector makes the seed the
  // start of step 2 (RankStateTest.EventsAtTheFirstMarkersInstantStartItsStep).
  ASSERT_GE(sink.events().size(), 2u);
  EXPECT_EQ(sink.Name(sink.events()[0].tag_id), kBaselineTag);
  EXPECT_EQ(sink.events()[1].kind, EventKind::kStep);
  EXPECT_EQ(sink.events()[1].aux, 2u);
  EXPECT_EQ(sink.events()[0].ts_ns, sink.events()[1].ts_ns);
  EXPECT_EQ(OfKind(sink.events(), EventKind::kAlloc).size(), 2u);
  EXPECT_EQ(OfKind(sink.events(), EventKind::kStep).size(), 2u);
}

TEST(KinetoEventsTest, UsesGpuTimelineStepsWhenTheTraceHasNoOthers) {
  KinetoTrace trace;
  trace.steps = {{{100, 200, kThreadA, 0}, 7, true}};
  RecordingSink sink;
  auto stats = RecordKinetoTrace(&trace, {}, sink);
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(sink.events().size(), 1u);
  EXPECT_EQ(sink.events()[0].kind, EventKind::kStep);
  EXPECT_EQ(sink.events()[0].aux, 7u);
}

TEST(KinetoEventsTest, CpuMemoryIsPageableOrDropped) {
  KinetoTrace trace;
  trace.memory = {Mem(10, 8, 0x10, 8, kThreadA, kKinetoDeviceCpu, -1), Mem(20, 64, 0x100, 64),
                  Mem(30, -8, 0x10, 0, kThreadA, kKinetoDeviceCpu, -1)};
  KinetoTrace copy = trace;
  RecordingSink with_cpu;
  auto a = RecordKinetoTrace(&trace, {}, with_cpu);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->memory_events, 3u);
  EXPECT_EQ(a->cpu_memory_events, 2u);
  EXPECT_EQ(a->cuda_memory_events, 1u);
  EXPECT_EQ(OfKind(with_cpu.events(), EventKind::kAlloc)[0].memory_kind, kMemoryPageable);
  EXPECT_EQ(OfKind(with_cpu.events(), EventKind::kAlloc)[0].device, 0u);

  RecordingSink without_cpu;
  KinetoEventOptions options;
  options.include_cpu_memory = false;
  auto b = RecordKinetoTrace(&copy, options, without_cpu);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->memory_events, 1u);
  EXPECT_EQ(b->cpu_memory_skipped, 2u);
}

TEST(KinetoEventsTest, SamplesReservedMemoryWhenItChanges) {
  KinetoTrace trace;
  trace.device_total_bytes = {0, 80ull << 30};
  trace.memory = {Mem(10, 8, 0x1, 8, kThreadA, kKinetoDeviceCuda, 1, 2 << 20),
                  Mem(20, 8, 0x2, 16, kThreadA, kKinetoDeviceCuda, 1, 2 << 20),
                  Mem(30, 8, 0x3, 24, kThreadA, kKinetoDeviceCuda, 1, 4 << 20)};
  RecordingSink sink;
  auto stats = RecordKinetoTrace(&trace, {}, sink);
  ASSERT_TRUE(stats.ok());
  std::vector<Event> samples = OfKind(sink.events(), EventKind::kDeviceSample);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].bytes, 2u << 20);
  EXPECT_EQ(samples[0].aux, 80ull << 30);
  EXPECT_EQ(samples[0].device, 1u);
  EXPECT_EQ(samples[1].bytes, 4u << 20);
  EXPECT_EQ(samples[1].ts_ns, 30);
  EXPECT_EQ(stats->cuda_devices, std::vector<int32_t>{1});
}

// An unreadable Total Reserved (-1, kinetoparser) is no sample: "x" was one of 0 B.
TEST(KinetoEventsTest, AnUnreadableTotalReservedIsNoSample) {
  KinetoTrace trace;
  trace.memory = {Mem(10, 8, 0x1, 8, kThreadA, kKinetoDeviceCuda, 0, 2 << 20),
                  Mem(20, 8, 0x2, 16, kThreadA, kKinetoDeviceCuda, 0, -1),
                  Mem(30, 8, 0x3, 24, kThreadA, kKinetoDeviceCuda, 0, 2 << 20)};
  RecordingSink sink;
  auto stats = RecordKinetoTrace(&trace, {}, sink);
  ASSERT_TRUE(stats.ok());
  std::vector<Event> samples = OfKind(sink.events(), EventKind::kDeviceSample);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].bytes, 2u << 20);
  EXPECT_EQ(stats->cuda_memory_events, 3u);
  EXPECT_EQ(OfKind(sink.events(), EventKind::kAlloc).size(), 3u);
}

TEST(KinetoEventsTest, EveryStepStartsWithTheReservedMemoryAsItStands) {
  KinetoTrace trace;
  trace.memory = {Mem(10, 8, 0x1, 8, kThreadA, kKinetoDeviceCuda, 0, 6 << 20)};
  trace.steps = {{{100, 200, kThreadA, 0}, 1, false}, {{200, 300, kThreadA, 0}, 2, false}};
  RecordingSink sink;
  ASSERT_TRUE(RecordKinetoTrace(&trace, {}, sink).ok());
  std::vector<Event> events = sink.events();
  ASSERT_EQ(events.size(), 6u);  // alloc, sample, step 1, sample, step 2, sample
  EXPECT_EQ(events[2].kind, EventKind::kStep);
  EXPECT_EQ(events[3].kind, EventKind::kDeviceSample);
  EXPECT_EQ(events[3].bytes, 6u << 20);
  EXPECT_EQ(events[3].ts_ns, 100);
  EXPECT_EQ(events[5].kind, EventKind::kDeviceSample);
  EXPECT_EQ(events[5].ts_ns, 200);
}

TEST(KinetoEventsTest, CallsTheCheckpointEveryNEventsAndStopsOnItsError) {
  KinetoTrace trace;
  for (int i = 0; i < 10; ++i) trace.memory.push_back(Mem(i, 8, 0x10 + i, 8 * (i + 1)));
  int calls = 0;
  KinetoEventOptions options;
  options.checkpoint_events = 4;
  options.checkpoint = [&] {
    ++calls;
    return calls == 2 ? absl::UnavailableError("collector gone") : absl::OkStatus();
  };
  RecordingSink sink;
  auto stats = RecordKinetoTrace(&trace, options, sink);
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(calls, 2);
  EXPECT_LE(sink.events().size(), 8u + 2u);  // memory events plus their reserved samples
}

}  // namespace
}  // namespace memtrace::importers
