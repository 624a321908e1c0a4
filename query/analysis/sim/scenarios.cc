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

JobTimeline StretchedIntoBuckets(const JobTimeline& steps, int64_t buckets, uint64_t activations,
                                 int64_t first_bucket) {
  JobTimeline out;
  out.job_id = steps.job_id;
  out.time_axis = true;
  out.bucket_ns = kStretchedBucketNs;
  out.names = steps.names;
  for (const RankTimeline& r : steps.ranks) {
    RankTimeline& w = out.ranks.emplace_back();
    w.rank = r.rank;
    w.attempt = r.attempt;
    w.host = r.host;
    for (const StepPoint& p : r.steps) {
      for (int64_t k = 0; k < buckets; ++k) {
        StepPoint b = p;
        b.step = first_bucket + p.step * buckets + k;
        b.start_ns = b.step * kStretchedBucketNs;
        b.end_ns = b.start_ns + kStretchedBucketNs;
        const bool last = k == buckets - 1;
        b.floor_bytes = last ? p.floor_bytes : p.floor_bytes + activations * k / buckets;
        b.peak_bytes = last ? p.peak_bytes : p.floor_bytes + activations * (k + 1) / buckets;
        b.end_bytes = last ? p.end_bytes : b.peak_bytes;
        b.allocs = p.allocs / buckets;
        w.steps.push_back(std::move(b));
      }
    }
  }
  return out;
}

}  // namespace memtrace::analysis::sim
