// Test-only: synthetic FSDP-like jobs whose answer is planted, as the rollups the collector would
// store and as the live allocations it would hold at a moment.
//
// Every rank carries ~21 GiB that stays for the whole run (sharded params, grads, Adam state,
// NCCL buffers), allocator-cache jitter of up to `cache_noise_bytes` per step, and a per-step
// activation peak with its own jitter. On top: growths (leaks on one rank, or growth on every
// rank), periodic spikes, RL phases (optionally keeping memory after they close), constant
// per-rank offsets, and an OOM when a rank's peak no longer fits its device. Rollups and live
// sets come from one description of each moment, so they agree.
#ifndef MEMTRACE_QUERY_ANALYSIS_SIM_JOB_SIMULATOR_H_
#define MEMTRACE_QUERY_ANALYSIS_SIM_JOB_SIMULATOR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "query/analysis/live_set.h"
#include "query/analysis/timeline.h"

namespace memtrace::analysis::sim {

// Memory that grows by bytes_per_step in every step from start_step on and is never freed: a
// leak on one rank, or (rank = -1) growth on every rank such as gradients kept across steps.
struct Growth {
  int32_t rank = -1;  // -1 = every rank
  std::string tag;
  std::string source = "libtorch_cuda.so";
  int64_t start_step = 0;
  uint64_t bytes_per_step = 0;
};

// Transient memory in every `period`-th step (step % period == offset): an eval pass, a
// checkpoint gather.
struct Spike {
  int32_t rank = -1;
  std::string tag = "eval";
  int64_t period = 25;
  int64_t offset = 0;
  uint64_t bytes = 2 * kGiB;
  // Held for the whole step: raises that step's floor and end as well as its peak.
  bool whole_step = false;
};

// An RL phase run once per step (rollout, actor_update, ...) with its own transient peak,
// allocated under a tag named like the phase; peak_bytes 0 marks the phase whose working memory
// is the activations (actor_update). retained_bytes > 0 plants memory allocated in the
// phase that stays live after it closes: one block kept from retained_from_step on, or with
// retained_accumulates a new block in every step.
struct Phase {
  std::string name;
  uint64_t peak_bytes = 0;
  uint64_t retained_bytes = 0;
  int32_t retained_rank = -1;
  int64_t retained_from_step = 0;
  bool retained_accumulates = false;
};

// Memory one rank holds from step 0 on and nobody else does (rank 0's logging buffers).
struct Offset {
  uint32_t rank = 0;
  std::string tag = "rank0:extra";
  uint64_t bytes = 0;
};

// `rank`'s process restarted at `at_step` (a Ray actor restarted alone, an elastic rejoin): its
// steps before are attempt 0, those from at_step on attempt 1, whose memory begins again as in
// the job's first step (Adam state is created after it; growths count from its own start).
// Rollups only: LiveAt and OOM planting ignore restarts.
struct Restart {
  uint32_t rank = 0;
  int64_t at_step = 0;
};

struct JobSpec {
  std::string job_id = "sim-job";
  uint32_t ranks = 8;
  int64_t steps = 100;
  uint64_t seed = 1;
  int64_t start_ns = 1'700'000'000'000'000'000;
  int64_t step_ns = 2'000'000'000;
  uint64_t device_total = 80 * kGiB;
  // Device memory used outside the traced allocations (CUDA context, cuBLAS workspace).
  uint64_t context_bytes = 600 * kMiB;
  uint64_t params_bytes = 5 * kGiB;
  uint64_t grads_bytes = 5 * kGiB;
  uint64_t optimizer_bytes = 10 * kGiB;
  uint64_t nccl_bytes = 1 * kGiB;
  uint64_t cache_noise_bytes = 128 * kMiB;
  uint64_t activation_bytes = 14 * kGiB;
  uint64_t activation_noise_bytes = 512 * kMiB;
  // Memory that fills over a process's first warmup_steps steps and then stays (the caching
  // allocator's reserve, cuBLAS workspaces, NCCL channels created lazily): an equal share of
  // warmup_bytes more at the end of each of those steps. 0 = none.
  uint64_t warmup_bytes = 0;
  int64_t warmup_steps = 0;
  // The allocation that fails at an OOM.
  uint64_t oom_request_bytes = 1 * kGiB;
  // When a rank's peak would exceed device_total - context_bytes it records an OOM in that step,
  // and the job ends there for every rank.
  bool stop_at_oom = true;
  std::vector<Growth> growths;
  std::vector<Spike> spikes;
  std::vector<Phase> phases;
  std::vector<Offset> offsets;
  std::vector<Restart> restarts;
};

struct PlantedOom {
  uint32_t rank = 0;
  int64_t step = 0;
};

struct SimulatedJob {
  JobTimeline timeline;
  std::optional<PlantedOom> oom;
};

// The rollups of the whole job. Deterministic in spec (seed included).
SimulatedJob Simulate(const JobSpec& spec);

enum class Moment { kFloor, kPeak, kEnd };

// The allocations live on `rank` at `moment` of `step`, as the collector's live set would hold
// them (at kPeak of an OOM step: what was live when the allocation failed).
RankLiveSet LiveAt(const JobSpec& spec, uint32_t rank, int64_t step, Moment moment);
// The allocations live at the peak of `phase` within `step` (that phase open).
RankLiveSet LiveInPhase(const JobSpec& spec, uint32_t rank, int64_t step, const std::string& phase);

// The first step at which `rank`'s noiseless peak plus context no longer fits device_total, or
// -1 if never within max_steps. The planted answer for headroom forecasts.
int64_t PlantedCapacityStep(const JobSpec& spec, uint32_t rank, int64_t max_steps = 1'000'000);

}  // namespace memtrace::analysis::sim

#endif  // MEMTRACE_QUERY_ANALYSIS_SIM_JOB_SIMULATOR_H_
