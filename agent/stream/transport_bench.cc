// Cost of the agent's hot path (Transport::Record) and of delivery, against the in-process
// fake collector on loopback.
//   bazel run -c opt //agent/stream:transport_bench
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/stream/event_queue.h"
#include "agent/stream/fake_collector.h"
#include "agent/stream/transport.h"
#include "benchmark/benchmark.h"

namespace memtrace {
namespace {

Event Sample(uint64_t i) {
  Event e;
  e.kind = i % 2 == 0 ? EventKind::kAlloc : EventKind::kFree;
  e.ts_ns = static_cast<int64_t>(i) * 100;
  e.address = 0x7f0000000000ull + (i / 2) * (2 << 20);
  e.bytes = 2 << 20;
  e.tag_id = static_cast<uint32_t>(i % 7 + 1);
  e.memory_kind = kMemoryDevice;
  return e;
}

TransportOptions Options(const std::string& address) {
  TransportOptions o;
  o.collector_address = address;
  o.identity.set_job_id("bench");
  o.identity.set_rank(0);
  o.log_failures = false;
  return o;
}

// One collector and transport shared by every run of a benchmark (and by its threads).
struct Fixture {
  FakeCollector collector;
  std::unique_ptr<Transport> transport;
};

Fixture* SharedFixture(bool reachable, size_t queue) {
  // Function-local statics: built on first use, torn down (transport shut down, collector
  // stopped) at exit.
  static Fixture reachable_fixture;
  static Fixture unreachable_fixture;
  Fixture& f = reachable ? reachable_fixture : unreachable_fixture;
  if (f.transport != nullptr) return &f;
  std::string address = "127.0.0.1:1";
  if (reachable) {
    if (!f.collector.Start().ok()) std::abort();
    address = f.collector.address();
  }
  TransportOptions o = Options(address);
  o.queue_capacity = queue;
  f.transport = *Transport::Start(o);
  return &f;
}

// Record() while the sender streams to a live collector, in bursts that fit the queue: the
// sender drains between bursts (outside the timing), so every event is kept and the figure is
// the cost of keeping one.
void BM_Record(benchmark::State& state) {
  Transport* t = SharedFixture(true, 1 << 20)->transport.get();
  constexpr uint64_t kBurst = 1 << 16;
  const TransportStats before = t->stats();
  uint64_t i = 0;
  for (auto _ : state) {
    t->Record(Sample(i++));
    if (i % kBurst == 0 && state.thread_index() == 0) {
      state.PauseTiming();
      if (!t->Flush(absl::Seconds(30)).ok()) state.SkipWithError("flush failed");
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    const TransportStats after = t->stats();
    state.counters["lost"] = static_cast<double>(after.events_lost - before.events_lost);
  }
}
BENCHMARK(BM_Record)->Threads(1)->Threads(2);

// RecordMany() of 128 events at a time (as the CUPTI translator hands over a buffer), under the
// same conditions as BM_Record; items = events.
void BM_RecordMany(benchmark::State& state) {
  // Its own collector: the fake one keeps every event in memory, and BM_Record's are many.
  static Fixture fixture;
  if (fixture.transport == nullptr) {
    if (!fixture.collector.Start().ok()) std::abort();
    TransportOptions o = Options(fixture.collector.address());
    o.queue_capacity = 1 << 20;
    fixture.transport = *Transport::Start(o);
  }
  Transport* t = fixture.transport.get();
  constexpr uint64_t kBurst = 1 << 16;
  constexpr size_t kSpan = 128;
  std::vector<Event> span;
  for (uint64_t k = 0; k < kSpan; ++k) span.push_back(Sample(k));
  const TransportStats before = t->stats();
  uint64_t i = 0;
  for (auto _ : state) {
    t->RecordMany(span);
    i += kSpan;
    if (i % kBurst == 0 && state.thread_index() == 0) {
      state.PauseTiming();
      if (absl::Status s = t->Flush(absl::Seconds(30)); !s.ok()) {
        state.SkipWithError(std::string(s.message()).c_str());
        break;
      }
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations() * kSpan);
  if (state.thread_index() == 0) {
    const TransportStats after = t->stats();
    state.counters["lost"] = static_cast<double>(after.events_lost - before.events_lost);
  }
}
// One thread (the translator of one CUPTI buffer at a time), and a fixed count: the fake
// collector keeps every event in memory (30 M events: 2.2 GB).
BENCHMARK(BM_RecordMany)->Iterations(30'000'000 / 128);

// Record() on a full queue (collector unreachable): the drop path.
void BM_RecordDropping(benchmark::State& state) {
  Transport* t = SharedFixture(false, 1024)->transport.get();
  uint64_t i = 0;
  for (auto _ : state) t->Record(Sample(i++));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecordDropping)->Threads(1)->Threads(2)->UseRealTime();

// The queue alone, for comparison (Record() minus the threshold check).
void BM_EventQueuePushPop(benchmark::State& state) {
  EventQueue q(1 << 16);
  std::vector<Event> out;
  out.reserve(4096);
  uint64_t i = 0;
  for (auto _ : state) {
    q.Push(Sample(i++));
    if ((i & 4095) == 0) {
      out.clear();
      q.Pop(4096, &out);
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EventQueuePushPop);

void BM_InternKnown(benchmark::State& state) {
  Transport* t = SharedFixture(true, 1 << 20)->transport.get();
  t->Intern(StringKind::kTag, "fsdp:layers.12.attention");
  for (auto _ : state) {
    benchmark::DoNotOptimize(t->Intern(StringKind::kTag, "fsdp:layers.12.attention"));
  }
}
BENCHMARK(BM_InternKnown);

// End to end: record a burst, flush until the collector acknowledged all of it.
void BM_RecordAndDeliver(benchmark::State& state) {
  const int64_t n = state.range(0);
  for (auto _ : state) {
    state.PauseTiming();
    FakeCollector collector;
    if (!collector.Start().ok()) std::abort();
    TransportOptions o = Options(collector.address());
    o.queue_capacity = static_cast<size_t>(n) + 16;
    auto t = *Transport::Start(o);
    state.ResumeTiming();
    for (int64_t i = 0; i < n; ++i) t->Record(Sample(static_cast<uint64_t>(i)));
    if (!t->Flush(absl::Seconds(60)).ok()) state.SkipWithError("flush failed");
    state.PauseTiming();
    t->Shutdown(absl::Seconds(5)).IgnoreError();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_RecordAndDeliver)->Arg(1 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace memtrace

BENCHMARK_MAIN();
