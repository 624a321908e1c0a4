// Latency of the rollup-based analyses on simulated jobs of the sizes: 8 ranks x 2000
// steps and 1024 ranks x 200 steps, each with ~8 tags per step and a leak on one rank.
// Run: bazel run -c opt //query/analysis:analysis_bench
#include <cstdint>
#include <map>
#include <memory>
#include <utility>

#include "benchmark/benchmark.h"
#include "proto/memtrace/v1/query.pb.h"
#include "query/analysis/diverged.h"
#include "query/analysis/growth.h"
#include "query/analysis/headroom.h"
#include "query/analysis/leaks.h"
#include "query/analysis/robust_stats.h"
#include "query/analysis/rollup_convert.h"
#include "query/analysis/sim/job_simulator.h"
#include "query/analysis/sim/scenarios.h"

namespace memtrace::analysis {
namespace {

// Simulated once per shape and kept for the process (the benchmark library reruns bodies).
const JobTimeline& Job(uint32_t ranks, int64_t steps) {
  static auto* cache = new std::map<std::pair<uint32_t, int64_t>, JobTimeline>();
  auto it = cache->find({ranks, steps});
  if (it == cache->end()) {
    sim::JobSpec spec = sim::LeakJob(5, steps * 3 / 10, 128 * kMiB, ranks, steps);
    spec.stop_at_oom = false;
    it = cache->emplace(std::make_pair(ranks, steps), sim::Simulate(spec).timeline).first;
  }
  return it->second;
}

// The job as the collector would send it (per-rank string tables), to time the conversion.
const v1::GetRollupsResponse& Wire(uint32_t ranks, int64_t steps) {
  static auto* cache = new std::map<std::pair<uint32_t, int64_t>, v1::GetRollupsResponse>();
  auto it = cache->find({ranks, steps});
  if (it != cache->end()) return it->second;
  const JobTimeline& job = Job(ranks, steps);
  v1::GetRollupsResponse resp;
  for (const RankTimeline& r : job.ranks) {
    v1::RankRollups* w = resp.add_ranks();
    w->set_rank(r.rank);
    w->mutable_identity()->set_host(r.host);
    for (NameId id = 1; id < job.names.size(); ++id) {
      v1::StringEntry* e = w->add_strings();
      e->set_id(id);
      e->set_value(job.names.Name(id));
    }
    for (const StepPoint& p : r.steps) {
      v1::StepRollup* s = w->add_steps();
      s->set_step(p.step);
      s->set_start_ns(p.start_ns);
      s->set_end_ns(p.end_ns);
      s->set_floor_bytes(p.floor_bytes);
      s->set_peak_bytes(p.peak_bytes);
      s->set_end_bytes(p.end_bytes);
      s->set_device_total(p.device_total);
      for (const GroupBytes& g : p.by_tag()) {
        v1::GroupBytes* x = s->add_by_tag();
        x->set_id(g.name);
        x->set_live_bytes(g.live_bytes);
        x->set_peak_bytes(g.peak_bytes);
      }
      for (const GroupBytes& g : p.by_source()) {
        v1::GroupBytes* x = s->add_by_source();
        x->set_id(g.name);
        x->set_live_bytes(g.live_bytes);
      }
    }
  }
  return cache->emplace(std::make_pair(ranks, steps), std::move(resp)).first->second;
}

void BM_Diverged(benchmark::State& state) {
  const JobTimeline& job = Job(state.range(0), state.range(1));
  for (auto _ : state) {
    DivergenceReport r = FindDivergence(job);
    benchmark::DoNotOptimize(r);
    if (r.diverged.empty() || r.diverged[0].rank != 5) state.SkipWithError("rank 5 not found");
  }
}

void BM_GrowthByTag(benchmark::State& state) {
  const JobTimeline& job = Job(state.range(0), state.range(1));
  for (auto _ : state) {
    GrowthReport r = FindGrowth(job);
    benchmark::DoNotOptimize(r);
    if (r.groups.empty() || r.groups[0].name != sim::kLeakTag) state.SkipWithError("leak missed");
  }
  state.counters["series"] = FindGrowth(job).groups_examined;
}

void BM_GrowthByTagRank(benchmark::State& state) {
  const JobTimeline& job = Job(state.range(0), state.range(1));
  GrowthParams p;
  p.by = GrowthBy::kTagRank;
  for (auto _ : state) benchmark::DoNotOptimize(FindGrowth(job, p));
}

void BM_GrowthByRank(benchmark::State& state) {
  const JobTimeline& job = Job(state.range(0), state.range(1));
  GrowthParams p;
  p.by = GrowthBy::kRank;
  for (auto _ : state) benchmark::DoNotOptimize(FindGrowth(job, p));
}

void BM_Leaks(benchmark::State& state) {
  const JobTimeline& job = Job(state.range(0), state.range(1));
  for (auto _ : state) benchmark::DoNotOptimize(FindLeaks(job));
}

void BM_Headroom(benchmark::State& state) {
  const JobTimeline& job = Job(state.range(0), state.range(1));
  for (auto _ : state) benchmark::DoNotOptimize(ForecastHeadroom(job));
}

void BM_ConvertRollups(benchmark::State& state) {
  const v1::GetRollupsResponse& wire = Wire(state.range(0), state.range(1));
  for (auto _ : state) {
    absl::StatusOr<JobTimeline> job = TimelineFromRollups("bench", wire);
    benchmark::DoNotOptimize(job);
  }
}

// One Theil-Sen fit of a noisy line of N points (pairs sub-sampled to 2048 above N = 64).
void BM_TheilSenFit(benchmark::State& state) {
  size_t n = static_cast<size_t>(state.range(0));
  std::vector<double> x(n), y(n);
  uint64_t s = 7;
  for (size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = double(i);
    y[i] = 1e9 + 1e6 * double(i) + double(s >> 36);
  }
  TheilSen fitter;
  for (auto _ : state) benchmark::DoNotOptimize(fitter.Fit(x, y));
}
BENCHMARK(BM_TheilSenFit)->Arg(50)->Arg(200)->Arg(2000)->Unit(benchmark::kMicrosecond);

#define SHAPES ->Args({8, 2000})->Args({1024, 200})->Unit(benchmark::kMillisecond)
BENCHMARK(BM_Diverged) SHAPES;
BENCHMARK(BM_GrowthByTag) SHAPES;
BENCHMARK(BM_GrowthByTagRank) SHAPES;
BENCHMARK(BM_GrowthByRank) SHAPES;
BENCHMARK(BM_Leaks) SHAPES;
BENCHMARK(BM_Headroom) SHAPES;
BENCHMARK(BM_ConvertRollups) SHAPES;

}  // namespace
}  // namespace memtrace::analysis

BENCHMARK_MAIN();
