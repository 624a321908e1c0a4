#include "tools/sim/workload.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"
#include "tools/sim/recording_sink.h"

namespace memtrace::sim {
namespace {

// Live bytes of one step, replayed from the events (independently of the simulator's own
// bookkeeping).
struct StepLive {
  uint64_t start = 0;
  uint64_t floor = ~0ull;
  uint64_t peak = 0;
  uint64_t end = 0;
  std::map<std::string, uint64_t> end_by_tag;
};

struct Replay {
  std::map<int64_t, StepLive> steps;
  std::vector<Event> ooms;
  int64_t oom_step = -1;
  uint64_t anomalies = 0;  // frees of unknown addresses, allocs over live ones
};

Replay ReplayEvents(const RecordingSink& sink) {
  Replay replay;
  absl::flat_hash_map<uint64_t, std::pair<uint64_t, uint32_t>> live;  // address -> bytes, tag
  std::map<uint32_t, uint64_t> by_tag;
  uint64_t bytes = 0;
  int64_t step = -1;
  auto close_step = [&]() {
    if (step < 0) return;
    StepLive& s = replay.steps[step];
    s.end = bytes;
    for (const auto& [tag, b] : by_tag) {
      if (b > 0) s.end_by_tag[sink.Lookup(tag)] = b;
    }
  };
  for (const Event& e : sink.events()) {
    switch (e.kind) {
      case EventKind::kStep: {
        close_step();
        step = static_cast<int64_t>(e.aux);
        StepLive& s = replay.steps[step];
        s.start = s.floor = s.peak = bytes;
        break;
      }
      case EventKind::kAlloc:
        if (live.contains(e.address)) ++replay.anomalies;
        live[e.address] = {e.bytes, e.tag_id};
        bytes += e.bytes;
        by_tag[e.tag_id] += e.bytes;
        break;
      case EventKind::kFree: {
        auto it = live.find(e.address);
        if (it == live.end() || it->second.first != e.bytes) {
          ++replay.anomalies;
          break;
        }
        bytes -= it->second.first;
        by_tag[it->second.second] -= it->second.first;
        live.erase(it);
        break;
      }
      case EventKind::kOom:
        replay.ooms.push_back(e);
        replay.oom_step = step;
        break;
      default:
        break;
    }
    if (step >= 0) {
      StepLive& s = replay.steps[step];
      s.floor = std::min(s.floor, bytes);
      s.peak = std::max(s.peak, bytes);
    }
  }
  close_step();
  return replay;
}

WorkloadOptions SmallJob() {
  WorkloadOptions o;
  o.steps = 30;
  o.events_per_rank = 6000;
  return o;
}

Replay Play(const WorkloadOptions& o, int rank, RecordingSink* sink_out = nullptr) {
  RecordingSink local;
  RecordingSink& sink = sink_out ? *sink_out : local;
  EXPECT_TRUE(PlayRank(o, rank, sink).ok());
  return ReplayEvents(sink);
}

TEST(SegmentBytesTest, FollowsTheCachingAllocatorsSegmentSizes) {
  EXPECT_EQ(SegmentBytes(1), 2 * kMiB);
  EXPECT_EQ(SegmentBytes(512 * 1024), 2 * kMiB);
  EXPECT_EQ(SegmentBytes(1 * kMiB), 2 * kMiB);
  EXPECT_EQ(SegmentBytes(1 * kMiB + 1), 20 * kMiB);
  EXPECT_EQ(SegmentBytes(10 * kMiB - 1), 20 * kMiB);
  EXPECT_EQ(SegmentBytes(10 * kMiB), 10 * kMiB);
  EXPECT_EQ(SegmentBytes(10 * kMiB + 1), 12 * kMiB);
  EXPECT_EQ(SegmentBytes(1 * kGiB), 1 * kGiB);
}

TEST(WorkloadTest, HealthyRanksHoldTheSameFlatEndOfStepLiveBytes) {
  WorkloadOptions o = SmallJob();
  absl::StatusOr<WorkloadPlan> plan = PlanWorkload(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (int rank : {0, 3, 7}) {
    Replay r = Play(o, rank);
    ASSERT_EQ(r.steps.size(), 30u);
    EXPECT_EQ(r.anomalies, 0u);
    EXPECT_TRUE(r.ooms.empty());
    for (const auto& [step, live] : r.steps) {
      EXPECT_EQ(live.end, plan->resident_bytes) << "rank " << rank << " step " << step;
      // Activations and gathers come and go inside the step.
      EXPECT_GT(live.peak, live.end + o.activation_bytes / 2) << step;
    }
  }
}

TEST(WorkloadTest, LeakRankRisesByLeakBytesPerStepFromTheGivenStep) {
  WorkloadOptions o = SmallJob();
  o.leak_rank = 5;
  o.leak_from_step = 10;
  o.leak_bytes_per_step = 256 * kMiB;
  Replay leaky = Play(o, 5);
  Replay healthy = Play(o, 4);
  for (int64_t s = 1; s < o.steps; ++s) {
    const int64_t growth = static_cast<int64_t>(leaky.steps[s].end - leaky.steps[s - 1].end);
    EXPECT_EQ(growth, s >= 10 ? static_cast<int64_t>(256 * kMiB) : 0) << "step " << s;
    EXPECT_EQ(healthy.steps[s].end, healthy.steps[s - 1].end) << "step " << s;
    const uint64_t leaked = s >= 10 ? static_cast<uint64_t>(s - 9) * 256 * kMiB : 0;
    EXPECT_EQ(leaky.steps[s].end_by_tag["leak:cache"], leaked) << "step " << s;
    EXPECT_EQ(leaky.steps[s].end, healthy.steps[s].end + leaked) << "step " << s;
  }
}

TEST(WorkloadTest, AlsoLeakingRanksLeakAlikeFromTheirOwnSteps) {
  WorkloadOptions o = SmallJob();
  o.leak_rank = 5;
  o.leak_from_step = 10;
  o.leak_bytes_per_step = 256 * kMiB;
  o.also_leak = {{2, 20}, {7, 25}};
  Replay first = Play(o, 5);
  Replay second = Play(o, 2);
  Replay third = Play(o, 7);
  Replay healthy = Play(o, 4);
  for (int64_t s = 1; s < o.steps; ++s) {
    const auto leaked = [s](int64_t from) {
      return s >= from ? static_cast<uint64_t>(s - from + 1) * 256 * kMiB : 0;
    };
    EXPECT_EQ(first.steps[s].end_by_tag["leak:cache"], leaked(10)) << "step " << s;
    EXPECT_EQ(second.steps[s].end_by_tag["leak:cache"], leaked(20)) << "step " << s;
    EXPECT_EQ(third.steps[s].end_by_tag["leak:cache"], leaked(25)) << "step " << s;
    EXPECT_EQ(second.steps[s].end, healthy.steps[s].end + leaked(20)) << "step " << s;
    EXPECT_EQ(healthy.steps[s].end_by_tag["leak:cache"], 0u) << "step " << s;
  }
}

// A 1 MiB request comes from a 2 MiB segment; rounded once more it was a 20 MiB one, 10x the
// leak the simulator reported planting.
TEST(WorkloadTest, SmallLeakIsPlantedAtTheSizeThePlanReports) {
  WorkloadOptions o = SmallJob();
  o.leak_rank = 5;
  o.leak_from_step = 10;
  o.leak_bytes_per_step = 1 * kMiB;
  absl::StatusOr<WorkloadPlan> plan = PlanWorkload(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->leak_bytes_per_step, 2 * kMiB);
  Replay leaky = Play(o, 5);
  for (int64_t s = 11; s < o.steps; ++s) {
    EXPECT_EQ(leaky.steps[s].end - leaky.steps[s - 1].end, plan->leak_bytes_per_step) << s;
    EXPECT_EQ(leaky.steps[s].end_by_tag["leak:cache"],
              static_cast<uint64_t>(s - 9) * plan->leak_bytes_per_step)
        << s;
  }
}

TEST(WorkloadTest, SmallParameterShardsAreTheSegmentsThePlanReports) {
  WorkloadOptions o = SmallJob();
  o.model_param_bytes = 64 * kMiB;  // 8 ranks x 16 layers: 1 MiB fp32 shards, 2 MiB segments
  o.layers = 16;
  absl::StatusOr<WorkloadPlan> plan = PlanWorkload(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->param_shard_bytes, 2 * kMiB);
  Replay r = Play(o, 0);
  EXPECT_EQ(r.steps[1].end_by_tag["fsdp:params"], 16 * plan->param_shard_bytes);
  EXPECT_EQ(r.steps[1].end, plan->resident_bytes);
}

TEST(WorkloadTest, LeakTagIsConfigurable) {
  WorkloadOptions o = SmallJob();
  o.leak_rank = 0;
  o.leak_from_step = 10;
  o.leak_tag = "leak:kv";
  Replay r = Play(o, 0);
  EXPECT_GT(r.steps[29].end_by_tag["leak:kv"], 0u);
  EXPECT_EQ(r.steps[29].end_by_tag.count("leak:cache"), 0u);
}

TEST(WorkloadTest, SameSeedSameEventsOtherSeedOtherJitter) {
  WorkloadOptions o = SmallJob();
  RecordingSink a, b, c;
  ASSERT_TRUE(PlayRank(o, 2, a).ok());
  ASSERT_TRUE(PlayRank(o, 2, b).ok());
  o.seed = 99;
  ASSERT_TRUE(PlayRank(o, 2, c).ok());
  EXPECT_EQ(a.events(), b.events());
  EXPECT_EQ(a.strings(), b.strings());
  EXPECT_NE(a.events(), c.events());
}

TEST(WorkloadTest, EventsAreInTimeOrderWithStepsAndSamples) {
  WorkloadOptions o = SmallJob();
  RecordingSink sink;
  ASSERT_TRUE(PlayRank(o, 1, sink).ok());
  std::vector<Event> events = sink.events();
  ASSERT_FALSE(events.empty());
  std::vector<uint64_t> steps;
  int samples = 0;
  uint64_t live = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (i > 0) {
      EXPECT_GE(e.ts_ns, events[i - 1].ts_ns) << i;
    }
    EXPECT_EQ(e.device, 1u);  // the local rank's device
    if (e.kind == EventKind::kAlloc) live += e.bytes;
    if (e.kind == EventKind::kFree) live -= e.bytes;
    if (e.kind == EventKind::kStep) {
      steps.push_back(e.aux);
      // Step s starts within 2 ms after start + s * step.
      const int64_t nominal = o.start_ns + static_cast<int64_t>(e.aux) * o.step_ns;
      EXPECT_GE(e.ts_ns, nominal);
      EXPECT_LT(e.ts_ns, nominal + 3'000'000);
    }
    if (e.kind == EventKind::kDeviceSample) {
      ++samples;
      EXPECT_EQ(e.aux, 80 * kGiB);
      EXPECT_EQ(e.bytes, live + o.context_bytes);
    }
  }
  std::vector<uint64_t> expected_steps;
  for (uint64_t s = 0; s < 30; ++s) expected_steps.push_back(s);
  EXPECT_EQ(steps, expected_steps);
  // One sample per 100 ms of the 30 s run (+ start-up), give or take one.
  EXPECT_NEAR(samples, 305, 2);
}

TEST(WorkloadTest, AllocationsAreSegmentsWithTagsAndSources) {
  WorkloadOptions o = SmallJob();
  RecordingSink sink;
  ASSERT_TRUE(PlayRank(o, 0, sink).ok());
  absl::StatusOr<WorkloadPlan> plan = PlanWorkload(o);
  std::map<std::string, uint64_t> nccl_bytes_by_tag;
  std::set<std::string> tags;
  for (const Event& e : sink.events()) {
    if (e.kind != EventKind::kAlloc) continue;
    // A size the caching allocator asks the driver for: 2 MiB, 20 MiB, or >= 10 MiB in 2 MiB.
    EXPECT_TRUE(e.bytes == 2 * kMiB || (e.bytes >= 10 * kMiB && e.bytes % (2 * kMiB) == 0))
        << e.bytes;
    EXPECT_EQ(e.address % (2 * kMiB), 0u);
    EXPECT_EQ(e.memory_kind, kMemoryDevice);
    tags.insert(sink.Lookup(e.tag_id));
    if (sink.Lookup(e.source_id) == "libnccl.so.2")
      nccl_bytes_by_tag[sink.Lookup(e.tag_id)] += e.bytes;
  }
  EXPECT_EQ(nccl_bytes_by_tag, (std::map<std::string, uint64_t>{{"nccl:buffers", 512 * kMiB}}));
  for (const char* tag : {"fsdp:params", "fsdp:grads", "optim:adam", "nccl:buffers"}) {
    EXPECT_TRUE(tags.count(tag)) << tag;
  }
  for (int i = 0; i < plan->layers; ++i) {
    EXPECT_TRUE(tags.count("fsdp:layers." + std::to_string(i))) << i;
  }
  EXPECT_EQ(tags.size(), 4u + plan->layers);
}

TEST(WorkloadTest, EventsPerRankScalesTheNumberOfLayers) {
  for (uint64_t target : {20'000ull, 100'000ull}) {
    WorkloadOptions o;
    o.events_per_rank = target;
    RecordingSink sink;
    ASSERT_TRUE(PlayRank(o, 0, sink).ok());
    const double n = static_cast<double>(sink.events().size());
    EXPECT_GT(n, 0.8 * target) << target;
    EXPECT_LT(n, 1.2 * target) << target;
  }
  WorkloadOptions o;
  o.events_per_rank = 20'000;
  int small = PlanWorkload(o)->layers;
  o.events_per_rank = 100'000;
  EXPECT_GT(PlanWorkload(o)->layers, 4 * small);
}

TEST(WorkloadTest, GradAccumulationGrowsEveryRankAlike) {
  WorkloadOptions o = SmallJob();
  o.grad_accum = true;
  for (int rank : {0, 6}) {
    Replay r = Play(o, rank);
    for (int64_t s = 2; s < o.steps; ++s) {
      EXPECT_EQ(r.steps[s].end - r.steps[s - 1].end, 64 * kMiB) << rank << " " << s;
    }
  }
}

TEST(WorkloadTest, SpikesRaiseThePeakButNotTheEndOfTheirStep) {
  WorkloadOptions o = SmallJob();
  o.spikes = true;
  Replay r = Play(o, 0);
  // Step 0 creates grads and Adam state late in the step; compare from step 2 on.
  for (int64_t s = 2; s < o.steps; ++s) {
    EXPECT_EQ(r.steps[s].end, r.steps[0].end);
    if (s % 10 == 9) {
      EXPECT_GT(r.steps[s].peak, r.steps[s - 1].peak + 7 * kGiB) << s;
    } else {
      EXPECT_LT(r.steps[s].peak, r.steps[s - 1].peak + 1 * kGiB) << s;
    }
  }
}

TEST(WorkloadTest, OomRankRecordsOneOomInTheRequestedStepAndStops) {
  WorkloadOptions o = SmallJob();
  o.steps = 60;
  o.oom_rank = 3;
  o.oom_step = 45;
  o.leak_from_step = 20;
  absl::StatusOr<WorkloadPlan> plan = PlanWorkload(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->leak_rank, 3);
  EXPECT_EQ(plan->leak_from_step, 20);
  EXPECT_EQ(plan->steps_played, 45);

  RecordingSink sink;
  Replay r = Play(o, 3, &sink);
  ASSERT_EQ(r.ooms.size(), 1u);
  EXPECT_EQ(r.oom_step, 45);
  const Event& oom = r.ooms[0];
  EXPECT_EQ(sink.events().back(), oom);  // nothing after the OOM
  // The request did not fit: live + request + context > device total.
  EXPECT_GT(r.steps[45].peak + oom.bytes + o.context_bytes, o.device_total_bytes);
  EXPECT_GT(oom.bytes, 0u);
  // The floor rose by the leak from step 20 on.
  EXPECT_EQ(r.steps[30].end - r.steps[29].end, plan->leak_bytes_per_step);
  EXPECT_EQ(r.steps[19].end, r.steps[18].end);

  // The others run step 45 alongside it until its OOM, and stop there (the job was killed):
  // at the OOM they hold their own activations, as ranks of one FSDP step do.
  RecordingSink other_sink;
  Replay other = Play(o, 2, &other_sink);
  EXPECT_TRUE(other.ooms.empty());
  EXPECT_EQ(other.steps.rbegin()->first, 45);
  EXPECT_LE(other_sink.events().back().ts_ns, oom.ts_ns);
  EXPECT_EQ(plan->oom_at_ns, oom.ts_ns);  // the simulator's hosts agree on time (no skew)
  EXPECT_GT(other.steps[45].peak, other.steps[44].end + (uint64_t{1} << 30));
  const StepLive& at_oom = other.steps[45];
  EXPECT_GT(at_oom.end, at_oom.start);  // stopped mid-step: its working set still live
  // No rank records anything past the OOM, a step marker or device sample included.
  for (int rank = 0; rank < o.ranks; ++rank) {
    RecordingSink each;
    Play(o, rank, &each);
    ASSERT_FALSE(each.events().empty());
    EXPECT_LE(each.events().back().ts_ns, oom.ts_ns) << "rank " << rank;
  }
}

TEST(WorkloadTest, PhasesOpenAndCloseInEveryStep) {
  WorkloadOptions o = SmallJob();
  o.phases = true;
  RecordingSink sink;
  ASSERT_TRUE(PlayRank(o, 0, sink).ok());
  std::vector<std::string> first_step;
  int64_t step = -1;
  std::map<std::string, int> begins;
  for (const Event& e : sink.events()) {
    if (e.kind == EventKind::kStep) step = static_cast<int64_t>(e.aux);
    if (e.kind == EventKind::kPhaseBegin) ++begins[sink.Lookup(e.tag_id)];
    if (step == 0 && (e.kind == EventKind::kPhaseBegin || e.kind == EventKind::kPhaseEnd)) {
      first_step.push_back((e.kind == EventKind::kPhaseBegin ? "+" : "-") + sink.Lookup(e.tag_id));
    }
  }
  EXPECT_EQ(first_step,
            (std::vector<std::string>{"+rollout", "-rollout", "+weight_sync", "-weight_sync",
                                      "+actor_update", "-actor_update"}));
  EXPECT_EQ(begins, (std::map<std::string, int>{
                        {"rollout", 30}, {"weight_sync", 30}, {"actor_update", 30}}));
  Replay r = ReplayEvents(sink);
  // Without the rollout leak the KV cache is gone by the end of every step.
  EXPECT_EQ(r.steps[29].end_by_tag.count("rollout:kv_cache"), 0u);
  EXPECT_EQ(r.steps[29].end, r.steps[1].end);
}

TEST(WorkloadTest, RolloutLeakKeepsKvCacheLiveIntoTrainingOnEveryRank) {
  WorkloadOptions o = SmallJob();
  o.phases = true;
  o.rollout_leak = true;
  for (int rank : {0, 5}) {
    Replay r = Play(o, rank);
    for (int64_t s = 0; s < o.steps; ++s) {
      EXPECT_EQ(r.steps[s].end_by_tag["rollout:kv_cache"],
                static_cast<uint64_t>(s + 1) * 128 * kMiB);
    }
  }
}

TEST(WorkloadTest, RejectsInconsistentOptionsNamingTheOption) {
  struct Case {
    WorkloadOptions options;
    std::string message;
  };
  std::vector<Case> cases(11);
  cases[0].options.leak_rank = 8;
  cases[0].message = "--leak_rank 8: out of range: ranks is 8";
  cases[1].options.rollout_leak = true;
  cases[1].message = "--rollout_leak true: needs --phases";
  cases[2].options.oom_rank = 1;
  cases[2].options.oom_step = 100;
  cases[2].message = "--oom_step 100: must be within the run (2..99)";
  cases[3].options.steps = 0;
  cases[3].message = "--steps 0: must be 1..10000000";
  cases[4].options.leak_rank = 1;
  cases[4].options.leak_from_step = 100;
  cases[4].message = "--leak_from_step 100: must be within the run (0..99)";
  cases[5].options.also_leak = {{1, 10}};
  cases[5].message = "--also_leak 1:10: needs --leak_rank";
  cases[6].options.leak_rank = 3;
  cases[6].options.also_leak = {{3, 40}};
  cases[6].message = "--also_leak 3:40: that rank already leaks";
  cases[7].options.leak_rank = 3;
  cases[7].options.also_leak = {{2, 40}, {2, 50}};
  cases[7].message = "--also_leak 2:50: that rank already leaks";
  cases[8].options.leak_rank = 3;
  cases[8].options.also_leak = {{8, 40}};
  cases[8].message = "--also_leak 8:40: rank out of range: ranks is 8";
  cases[9].options.oom_rank = 1;
  cases[9].options.also_leak = {{2, 40}};
  cases[9].message = "--also_leak 2:40: not with --oom_rank";
  cases[10].options.leak_rank = 3;
  cases[10].options.also_leak = {{2, 100}};
  cases[10].message = "--also_leak 2:100: step must be within the run (0..99)";
  // Named as memtrace-sim's flags are: the errors named --step_ns, --device_total_bytes and
  // --clock_skew_per_node_ns, which it does not have.
  cases.resize(15);
  cases[11].options.step_ns = 100'000;
  cases[11].message = "--step 100us: must be >= 1ms";
  cases[12].options.device_total_bytes = 100 * kMiB;
  cases[12].message =
      "--device_bytes 104857600: must exceed the simulated CUDA context and workspaces "
      "(629145600 bytes)";
  cases[13].options.clock_skew_per_node_ns = int64_t{7200} * 1'000'000'000;
  cases[13].message = "--clock_skew_per_node 2h: must be within one hour either way";
  // A second leak beside the OOM rank's was dropped without a word.
  cases[14].options.oom_rank = 1;
  cases[14].options.leak_rank = 5;
  cases[14].message =
      "--leak_rank 5: not with --oom_rank, whose rank leaks until it runs out of memory";
  for (const Case& c : cases) {
    RecordingSink sink;
    absl::Status s = PlayRank(c.options, 0, sink);
    EXPECT_EQ(s, absl::InvalidArgumentError(c.message));
    EXPECT_TRUE(sink.events().empty());
  }
  RecordingSink sink;
  EXPECT_EQ(PlayRank(WorkloadOptions(), 8, sink),
            absl::InvalidArgumentError("rank 8 out of range: ranks is 8"));
}

TEST(PlaceRankTest, PutsEightRanksOnEachSimulatedNode) {
  WorkloadOptions o;
  o.ranks = 12;
  RankPlacement p = PlaceRank(o, 9);
  EXPECT_EQ(p.host, "sim-node-1");
  EXPECT_EQ(p.local_rank, 1);
  EXPECT_EQ(p.group_rank, 1);
  EXPECT_EQ(p.local_world_size, 4);
  EXPECT_EQ(PlaceRank(o, 7).host, "sim-node-0");
  EXPECT_EQ(PlaceRank(o, 7).local_world_size, 8);
}

}  // namespace
}  // namespace memtrace::sim
