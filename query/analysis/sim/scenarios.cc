#include "query/analysis/sim/scenarios.h"

namespace memtrace::analysis::sim {

JobSpec HealthyJob(uint32_t ranks, int64_t steps) {
  JobSpec spec;
  spec.job_id = "healthy";
  spec.ranks = ranks;
  spec.steps = steps;
  spec.spikes.push_back({0, "eval", 25, 12, 3 * kGiB, false});
  spec.spikes.push_back({-1, "checkpoint", 50, 0, 1 * kGiB, true});
  if (ranks > 6) spec.spikes.push_back({6, "prefetch", 20, 7, 2 * kGiB, true});
  return spec;
}

JobSpec LeakJob(uint32_t rank, int64_t start_step, uint64_t bytes_per_step, uint32_t ranks,
                int64_t steps) {
  JobSpec spec = HealthyJob(ranks, steps);
  spec.job_id = "leak";
  spec.growths.push_back(
      {static_cast<int32_t>(rank), kLeakTag, kLeakSource, start_step, bytes_per_step});
  return spec;
}

JobSpec GradAccumulationJob(uint32_t ranks, int64_t steps) {
  JobSpec spec = HealthyJob(ranks, steps);
  spec.job_id = "grad-accumulation";
  spec.growths.push_back({-1, "fsdp:grads", "libtorch_cuda.so", 10, 64 * kMiB});
  return spec;
}

JobSpec OomJob() {
  JobSpec spec;
  spec.job_id = "oom";
  spec.steps = 300;
  spec.growths.push_back({3, kLeakTag, kLeakSource, 10, 512 * kMiB});
  return spec;
}

JobSpec RlJob(bool keep_rollout, int64_t steps) {
  JobSpec spec;
  spec.job_id = keep_rollout ? "rl-keeps-rollout" : "rl";
  spec.steps = steps;
  spec.activation_bytes = 12 * kGiB;
  Phase rollout;
  rollout.name = "rollout";
  rollout.peak_bytes = 24 * kGiB;
  if (keep_rollout) rollout.retained_bytes = 6 * kGiB;
  spec.phases.push_back(rollout);
  Phase update;
  update.name = "actor_update";
  update.peak_bytes = 0;  // its working memory is the activations
  spec.phases.push_back(update);
  return spec;
}

}  // namespace memtrace::analysis::sim
