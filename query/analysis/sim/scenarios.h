// Test-only: the planted jobs the analyses' tests and the benchmark share.
#ifndef MEMTRACE_QUERY_ANALYSIS_SIM_SCENARIOS_H_
#define MEMTRACE_QUERY_ANALYSIS_SIM_SCENARIOS_H_

#include <cstdint>

#include "query/analysis/sim/job_simulator.h"

namespace memtrace::analysis::sim {

inline constexpr char kLeakTag[] = "leak:cached_outputs";
inline constexpr char kLeakSource[] = "libtorch_cuda.so";

// Nothing to find: allocator noise, an eval pass on rank 0 every 25 steps (+3 GiB at the peak),
// a checkpoint on every rank every 50 steps (1 GiB held for the whole step), and rank 6
// prefetching 2 GiB for one whole step every 20 steps (a one-step floor spike on one rank).
JobSpec HealthyJob(uint32_t ranks = 8, int64_t steps = 100);

// HealthyJob plus a leak of `bytes_per_step` under kLeakTag on `rank` from `start_step`.
JobSpec LeakJob(uint32_t rank = 5, int64_t start_step = 30, uint64_t bytes_per_step = 128 * kMiB,
                uint32_t ranks = 8, int64_t steps = 100);

// HealthyJob plus "fsdp:grads" growing by 64 MiB per step on every rank from step 10 (the same
// on each: gradients kept across steps).
JobSpec GradAccumulationJob(uint32_t ranks = 8, int64_t steps = 100);

// A leak of 512 MiB per step under kLeakTag on rank 3 from step 10 that ends in an OOM.
JobSpec OomJob();

// An RL trainer (verl-like): each step a "rollout" phase (24 GiB of KV cache and generation
// memory) then an "actor_update" phase (activations). With keep_rollout, rollout keeps 6 GiB of
// its memory live after it closes, on every rank, from step 0 on.
JobSpec RlJob(bool keep_rollout, int64_t steps = 60);

// A step-axis job as a job without step markers whose steps last `buckets` time buckets of 1 s,
// from bucket `first_bucket`: within a step the activations rise through its buckets (each
// bucket's floor above the step's by what was built up when it began, by `activations` in all)
// and are freed in its last bucket.
inline constexpr int64_t kStretchedBucketNs = 1'000'000'000;
JobTimeline StretchedIntoBuckets(const JobTimeline& steps, int64_t buckets, uint64_t activations,
                                 int64_t first_bucket);

}  // namespace memtrace::analysis::sim

#endif  // MEMTRACE_QUERY_ANALYSIS_SIM_SCENARIOS_H_
