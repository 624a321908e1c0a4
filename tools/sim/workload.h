// SIMULATOR: a synthetic FSDP-style training job, played rank by rank into an EventSink.
//
// Nothing here touches a GPU. Each rank emits the driver-level events memtrace would record for
// a PyTorch job using the caching allocator: every tensor-sized request becomes one device
// allocation of the size the allocator would ask the driver for (<= 1 MiB -> a 2 MiB segment,
// < 10 MiB -> a 20 MiB segment, larger -> rounded up to 2 MiB), as if the allocator's cache were
// released at every step end (torch.cuda.empty_cache()), so per-step activations show as
// allocations and frees. Per rank:
//   - sharded fp32 params (tag "fsdp:params"), grads ("fsdp:grads", allocated in the first
//     backward) and Adam state ("optim:adam", two per layer, first optimizer step);
//   - NCCL buffers at start-up (source "libnccl.so.2", tag "nccl:buffers");
//   - per step: a STEP marker, per layer an unsharded-parameter gather, activations and a small
//     temporary (tags "fsdp:layers.<i>"), freed during backward, an optimizer temporary;
//   - DEVICE_SAMPLE every sample_interval_ns (used = live + context, total = device_total).
// Planted scenarios: a leak on one rank, gradient accumulation on all ranks, periodic activation
// spikes, an OOM on one rank at a given step, and RL-style phases with an optional rollout leak;
// and two ways a real job is awkward: no step markers, and hosts whose clocks disagree.
// Deterministic: the same options give the same events (the seed drives size and time jitter).
#ifndef MEMTRACE_TOOLS_SIM_WORKLOAD_H_
#define MEMTRACE_TOOLS_SIM_WORKLOAD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/stream/event_sink.h"

namespace memtrace::sim {

inline constexpr uint64_t kMiB = 1ull << 20;
inline constexpr uint64_t kGiB = 1ull << 30;

struct WorkloadOptions {
  int ranks = 8;
  int ranks_per_node = 8;  // host "sim-node-<rank / ranks_per_node>"
  int64_t steps = 100;
  uint64_t seed = 1;

  // Simulated time: step s of every rank starts near start_ns + s * step_ns.
  int64_t start_ns = 1'700'000'000'000'000'000;
  int64_t step_ns = 1'000'000'000;
  int64_t sample_interval_ns = 100'000'000;
  uint64_t device_total_bytes = 80 * kGiB;
  // Device memory used outside traced allocations (CUDA context, cuBLAS workspace).
  uint64_t context_bytes = 600 * kMiB;

  // The model, whole and unsharded: bf16 parameter bytes, activation bytes of one step.
  uint64_t model_param_bytes = 14 * kGiB;
  uint64_t activation_bytes = 16 * kGiB;
  int activations_per_layer = 4;
  // Layers of the model; 0 derives them from events_per_rank (an approximate target for the
  // number of events each rank emits over the whole run).
  int layers = 0;
  uint64_t events_per_rank = 20000;

  // A leak on one rank: leak_bytes_per_step more live bytes in every step from leak_from_step on
  // (one allocation per step, rounded like any other).
  std::optional<int> leak_rank;
  int64_t leak_from_step = 30;
  uint64_t leak_bytes_per_step = 256 * kMiB;
  std::string leak_tag = "leak:cache";
  // More ranks that leak as leak_rank does (same bytes per step and tag), each from its own
  // step: the ranks that follow the first to diverge. Needs leak_rank; not with oom_rank.
  struct Leak {
    int rank = 0;
    int64_t from_step = 0;
  };
  std::vector<Leak> also_leak;

  // Gradients kept across steps (no zero_grad): every rank grows by grad_accum_bytes_per_step.
  bool grad_accum = false;
  uint64_t grad_accum_bytes_per_step = 64 * kMiB;

  // Healthy spikes: every spike_period-th step one extra activation of spike_bytes.
  bool spikes = false;
  int64_t spike_period = 10;
  uint64_t spike_bytes = 8 * kGiB;

  // OOM: rank oom_rank leaks (leak_tag, from leak_from_step, or oom_step / 2 when that is not
  // earlier) at a rate chosen so that an allocation in step oom_step fails; the rank records an
  // OOM event with the requested size and stops. The other ranks run step oom_step alongside it
  // until that moment and stop there (the job dies; WorkloadPlan::oom_at_ns). Not with leak_rank
  // (refused).
  std::optional<int> oom_rank;
  int64_t oom_step = 80;

  // RL-style steps: phases "rollout" (KV cache, tag "rollout:kv_cache"), "weight_sync"
  // (per-layer gather buffers, "weight_sync:buffer") and "actor_update" (the FSDP step).
  bool phases = false;
  uint64_t rollout_kv_bytes = 20 * kGiB;
  // With phases: each rollout keeps rollout_leak_bytes of its KV cache live (never freed), so
  // rollout memory is still live during actor_update and accumulates on every rank.
  bool rollout_leak = false;
  uint64_t rollout_leak_bytes = 128 * kMiB;

  // false: a job without NVTX step markers (no STEP events); the collector then compares ranks
  // by time bucket.
  bool step_markers = true;
  // Unsynchronized hosts: node k's clock runs k x clock_skew_per_node_ns ahead of true time
  // (node 0 is exact). Its events carry that clock, and so does the clock the runner gives its
  // ranks' transports, as on a host whose clock was never set right. At most one hour.
  int64_t clock_skew_per_node_ns = 0;
};

// INVALID_ARGUMENT naming the option and value when options are inconsistent (rank out of
// range, non-positive steps, an OOM step beyond the run, ...).
absl::Status ValidateWorkload(const WorkloadOptions& options);

// Where a rank runs: host, local rank, node index (8 ranks per node by default).
struct RankPlacement {
  std::string host;
  int local_rank = 0;
  int group_rank = 0;
  int local_world_size = 0;
};
RankPlacement PlaceRank(const WorkloadOptions& options, int rank);

// How far rank `rank`'s host clock is ahead of true time (clock_skew_per_node_ns x its node).
int64_t ClockSkewNs(const WorkloadOptions& options, int rank);

// The sizes derived from the options, and the planted answers.
struct WorkloadPlan {
  int layers = 0;
  // Per rank, per layer (driver allocation sizes, already rounded).
  uint64_t param_shard_bytes = 0;       // one per layer, "fsdp:params"
  uint64_t unsharded_layer_bytes = 0;   // bf16 gather buffer, "fsdp:layers.<i>"
  uint64_t activation_block_bytes = 0;  // before jitter
  // The leak actually planted (rank, first step, bytes per step after rounding), if any.
  std::optional<int> leak_rank;
  int64_t leak_from_step = 0;
  uint64_t leak_bytes_per_step = 0;
  std::vector<WorkloadOptions::Leak> also_leak;  // the options', at leak_bytes_per_step
  // Steps each rank plays (fewer than options.steps when an OOM ends the job).
  int64_t steps_played = 0;
  // The OOM rank's OOM, in true time (before a host's clock skew): the other ranks run step
  // oom_step alongside it until then, and stop there (torchrun's agent tears the group down when
  // a rank fails). Stopped at the step before, they held no activations at the OOM, and `live
  // --at-oom --order excess` put the OOM rank's whole working set first. 0 without an OOM.
  int64_t oom_at_ns = 0;
  // Device memory a rank holds after step 0 apart from leaks and growth: params, grads, Adam,
  // NCCL.
  uint64_t resident_bytes = 0;
};

// Validates, then derives the plan (including the OOM leak rate, found by a dry run of the OOM
// rank). Pure and deterministic.
absl::StatusOr<WorkloadPlan> PlanWorkload(const WorkloadOptions& options);

// Plays rank `rank` of the job into `sink`: every event of the run in time order, strings
// interned through the sink. Returns INVALID_ARGUMENT for invalid options or rank, without
// recording anything. The sink assigns sequence numbers.
absl::Status PlayRank(const WorkloadOptions& options, int rank, EventSink& sink);

// The driver allocation size PyTorch's caching allocator would request for `bytes`.
uint64_t SegmentBytes(uint64_t bytes);

}  // namespace memtrace::sim

#endif  // MEMTRACE_TOOLS_SIM_WORKLOAD_H_
