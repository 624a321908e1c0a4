#include "tools/sim/workload.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace memtrace::sim {
namespace {

constexpr uint64_t kSegmentAlign = 2 * kMiB;
constexpr uint64_t kSmallTemporaryBytes = 512 * 1024;
constexpr int kNcclBuffers = 4;
constexpr uint64_t kNcclBufferBytes = 128 * kMiB;
constexpr int kKvBlocks = 4;
constexpr int kMaxLayers = 4096;
// Device virtual addresses start here, as CUDA's do on x86-64 Linux.
constexpr uint64_t kAddressBase = 0x7f0000000000ull;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A deterministic uniform value in [0, 1) for one (seed, rank, step, what) point: jitter that
// does not depend on the order in which things are drawn, so a dry run sees the same sizes.
double Unit(uint64_t seed, uint64_t rank, uint64_t step, uint64_t what) {
  uint64_t h = SplitMix64(seed);
  h = SplitMix64(h ^ rank);
  h = SplitMix64(h ^ step);
  h = SplitMix64(h ^ what);
  return static_cast<double>(h >> 11) / static_cast<double>(1ull << 53);
}

uint64_t AlignUp(uint64_t bytes, uint64_t align) { return (bytes + align - 1) / align * align; }

// Events per step that do not depend on the number of layers, and those per layer; used to
// derive layers from events_per_rank and to pace the simulated clock.
uint64_t FixedEventsPerStep(const WorkloadOptions& o) {
  uint64_t fixed = 1 + 2;  // STEP, optimizer temporary
  fixed += static_cast<uint64_t>(o.step_ns / o.sample_interval_ns);
  if (o.leak_rank || o.oom_rank) fixed += 1;
  if (o.grad_accum) fixed += 1;
  if (o.phases) fixed += 6 + 2 * kKvBlocks + (o.rollout_leak ? 1 : 0);
  return fixed;
}

uint64_t EventsPerLayerPerStep(const WorkloadOptions& o) {
  uint64_t per_layer = 2 * static_cast<uint64_t>(o.activations_per_layer) + 8;
  if (o.phases) per_layer += 4;
  return per_layer;
}

int DeriveLayers(const WorkloadOptions& o) {
  if (o.layers > 0) return o.layers;
  const uint64_t per_step = o.events_per_rank / static_cast<uint64_t>(o.steps);
  const uint64_t fixed = FixedEventsPerStep(o);
  const uint64_t layers = per_step > fixed ? (per_step - fixed) / EventsPerLayerPerStep(o) : 1;
  return static_cast<int>(std::clamp<uint64_t>(layers, 1, kMaxLayers));
}

// Device virtual addresses: freed blocks are reused for allocations of the same size (as
// cudaMalloc tends to), otherwise the range grows. Sizes are multiples of 2 MiB.
class AddressSpace {
 public:
  uint64_t Take(uint64_t bytes) {
    auto it = free_.find(bytes);
    if (it != free_.end() && !it->second.empty()) {
      uint64_t address = it->second.back();
      it->second.pop_back();
      return address;
    }
    uint64_t address = next_;
    next_ += AlignUp(bytes, kSegmentAlign);
    return address;
  }
  void Give(uint64_t address, uint64_t bytes) { free_[bytes].push_back(address); }

 private:
  uint64_t next_ = kAddressBase;
  std::map<uint64_t, std::vector<uint64_t>> free_;
};

// Swallows events; interns locally. For the dry run that calibrates the OOM leak.
class NullSink : public EventSink {
 public:
  void Record(const Event&) override {}
  uint32_t Intern(StringKind kind, std::string_view value) override {
    auto [it, inserted] = ids_.try_emplace(
        std::make_pair(static_cast<int>(kind), std::string(value)), ids_.size() + 1);
    return it->second;
  }

 private:
  std::map<std::pair<int, std::string>, uint32_t> ids_;
};

// The leak one rank carries (the planted one, or the OOM calibration's).
struct RankLeak {
  bool active = false;
  int64_t from_step = 0;
  uint64_t bytes_per_step = 0;
};

// Plays one rank. Owns its live set; stops for good after an OOM.
class RankPlayer {
 public:
  RankPlayer(const WorkloadOptions& options, const WorkloadPlan& plan, int rank, RankLeak leak,
             int64_t steps, EventSink& sink)
      : o_(options), plan_(plan), rank_(rank), leak_(leak), steps_(steps), sink_(sink) {
    const uint64_t non_sample_events =
        FixedEventsPerStep(o_) - static_cast<uint64_t>(o_.step_ns / o_.sample_interval_ns) +
        EventsPerLayerPerStep(o_) * static_cast<uint64_t>(plan_.layers);
    // Leave a fifth of each step idle so that jitter never pushes a step into the next.
    quantum_ns_ =
        std::max<int64_t>(1, o_.step_ns * 4 / 5 / static_cast<int64_t>(non_sample_events));
    device_ = static_cast<uint32_t>(PlaceRank(o_, rank).local_rank);
    skew_ns_ = ClockSkewNs(o_, rank);
    torch_source_ = sink_.Intern(StringKind::kSource, "libc10_cuda.so");
    nccl_source_ = sink_.Intern(StringKind::kSource, "libnccl.so.2");
  }

  void Play() {
    clock_ns_ = o_.start_ns - o_.step_ns / 2;
    next_sample_ns_ = clock_ns_;
    StartUp();
    for (int64_t s = 0; s < steps_ && !stopped_; ++s) Step(s);
  }

  // Highest live bytes seen in each step (index = step).
  const std::vector<uint64_t>& step_peaks() const { return step_peaks_; }
  // When this rank ran out of memory (true time); 0 if it did not.
  int64_t oom_at_ns() const { return oom_at_ns_; }
  // Stops the rank for good at the first allocation, free or phase marker past `at_ns` (true
  // time): killed with the job, as it was.
  void StopAt(int64_t at_ns) { stop_at_ns_ = at_ns; }

 private:
  uint32_t Tag(const std::string& value) { return sink_.Intern(StringKind::kTag, value); }
  uint32_t LayerTag(int layer) { return Tag(absl::StrCat("fsdp:layers.", layer)); }

  void Emit(Event event) {
    clock_ns_ += quantum_ns_;
    while (next_sample_ns_ <= clock_ns_) {
      Event sample;
      sample.kind = EventKind::kDeviceSample;
      sample.ts_ns = next_sample_ns_ + skew_ns_;
      sample.bytes = live_bytes_ + o_.context_bytes;
      sample.aux = o_.device_total_bytes;
      sample.device = device_;
      sink_.Record(sample);
      next_sample_ns_ += o_.sample_interval_ns;
    }
    event.ts_ns = clock_ns_ + skew_ns_;
    event.device = device_;
    sink_.Record(event);
  }

  // Allocates the segment the caching allocator would request for `bytes`; 0 after an OOM.
  uint64_t Alloc(uint64_t bytes, uint32_t tag, uint32_t source = 0) {
    return AllocSegment(SegmentBytes(bytes), tag, source);
  }

  // Allocates `segment` bytes as they are: for the plan's sizes, already rounded by
  // SegmentBytes. Rounding them again is not a no-op: a 2 MiB segment (a request <= 1 MiB)
  // would become a 20 MiB one.
  uint64_t AllocSegment(uint64_t segment, uint32_t tag, uint32_t source = 0) {
    if (Stopped()) return 0;
    if (live_bytes_ + segment + o_.context_bytes > o_.device_total_bytes) {
      Event oom;
      oom.kind = EventKind::kOom;
      oom.bytes = segment;
      oom.tag_id = tag;
      oom.source_id = source ? source : torch_source_;
      oom.memory_kind = kMemoryDevice;
      Emit(oom);
      oom_at_ns_ = clock_ns_;
      stopped_ = true;
      return 0;
    }
    Event alloc;
    alloc.kind = EventKind::kAlloc;
    alloc.address = addresses_.Take(segment);
    alloc.bytes = segment;
    alloc.tag_id = tag;
    alloc.source_id = source ? source : torch_source_;
    alloc.memory_kind = kMemoryDevice;
    Emit(alloc);
    live_[alloc.address] = segment;
    live_bytes_ += segment;
    if (current_step_ >= 0) {
      step_peaks_[current_step_] = std::max(step_peaks_[current_step_], live_bytes_);
    }
    return alloc.address;
  }

  void Free(uint64_t address) {
    if (Stopped() || address == 0) return;
    auto it = live_.find(address);
    if (it == live_.end()) return;
    Event free;
    free.kind = EventKind::kFree;
    free.address = address;
    free.bytes = it->second;
    free.source_id = torch_source_;
    free.memory_kind = kMemoryDevice;
    Emit(free);
    live_bytes_ -= it->second;
    addresses_.Give(address, it->second);
    live_.erase(it);
  }

  void Phase(EventKind kind, const char* name) {
    if (Stopped()) return;
    Event phase;
    phase.kind = kind;
    phase.tag_id = sink_.Intern(StringKind::kPhase, name);
    Emit(phase);
  }

  void StartUp() {
    const uint32_t nccl_tag = Tag("nccl:buffers");
    for (int b = 0; b < kNcclBuffers; ++b) Alloc(kNcclBufferBytes, nccl_tag, nccl_source_);
    const uint32_t params = Tag("fsdp:params");
    for (int i = 0; i < plan_.layers; ++i) AllocSegment(plan_.param_shard_bytes, params);
  }

  void Step(int64_t s) {
    current_step_ = s;
    step_peaks_.push_back(live_bytes_);
    // Ranks start a step within 2 ms of each other.
    const int64_t start =
        o_.start_ns + s * o_.step_ns + static_cast<int64_t>(Unit(o_.seed, rank_, s, 1) * 2'000'000);
    clock_ns_ = std::max(clock_ns_, start - quantum_ns_);
    // A rank that had not begun the step when the job was killed records no marker for it.
    if (o_.step_markers && !Stopped()) {
      Event step;
      step.kind = EventKind::kStep;
      step.aux = static_cast<uint64_t>(s);
      Emit(step);
    }
    if (leak_.active && s >= leak_.from_step) AllocSegment(leak_.bytes_per_step, Tag(o_.leak_tag));
    if (o_.phases) {
      Rollout(s);
      WeightSync();
      Phase(EventKind::kPhaseBegin, "actor_update");
    }
    std::vector<std::vector<uint64_t>> activations = Forward(s);
    Backward(s, activations);
    Optimizer(s);
    if (o_.phases) Phase(EventKind::kPhaseEnd, "actor_update");
  }

  // Whether the rank has stopped (an OOM, or the job killed at StopAt's moment, which the next
  // event would pass).
  bool Stopped() {
    if (!stopped_ && clock_ns_ + quantum_ns_ > stop_at_ns_) stopped_ = true;
    return stopped_;
  }

  bool SpikeStep(int64_t s) const {
    return o_.spikes && s % o_.spike_period == o_.spike_period - 1;
  }

  // Returns the activations of each layer, freed by Backward. The spike, if any, is the last
  // entry of the last layer (a large logits tensor).
  std::vector<std::vector<uint64_t>> Forward(int64_t s) {
    std::vector<std::vector<uint64_t>> activations(plan_.layers);
    for (int i = 0; i < plan_.layers; ++i) {
      const uint32_t tag = LayerTag(i);
      const uint64_t gather = AllocSegment(plan_.unsharded_layer_bytes, tag);
      for (int j = 0; j < o_.activations_per_layer; ++j) {
        // +-3% so that peaks differ a little between ranks and steps.
        const double jitter = 0.97 + 0.06 * Unit(o_.seed, rank_, s, 1000 + i * 64ull + j);
        activations[i].push_back(
            Alloc(static_cast<uint64_t>(plan_.activation_block_bytes * jitter), tag));
      }
      Free(Alloc(kSmallTemporaryBytes, tag));
      if (i == plan_.layers - 1 && SpikeStep(s))
        activations[i].push_back(Alloc(o_.spike_bytes, tag));
      Free(gather);
    }
    return activations;
  }

  void Backward(int64_t s, const std::vector<std::vector<uint64_t>>& activations) {
    const uint32_t grads = Tag("fsdp:grads");
    for (int i = plan_.layers - 1; i >= 0; --i) {
      const uint32_t tag = LayerTag(i);
      const uint64_t gather = AllocSegment(plan_.unsharded_layer_bytes, tag);
      const uint64_t full_grad = AllocSegment(plan_.unsharded_layer_bytes, tag);
      // The sharded gradient is created by the first reduce-scatter and kept.
      if (s == 0) AllocSegment(plan_.param_shard_bytes, grads);
      for (uint64_t a : activations[i]) Free(a);
      Free(gather);
      Free(full_grad);
    }
    if (o_.grad_accum && s > 0) Alloc(o_.grad_accum_bytes_per_step, grads);
  }

  void Optimizer(int64_t s) {
    const uint32_t adam = Tag("optim:adam");
    if (s == 0) {
      for (int i = 0; i < plan_.layers; ++i) {
        AllocSegment(plan_.param_shard_bytes, adam);  // exp_avg
        AllocSegment(plan_.param_shard_bytes, adam);  // exp_avg_sq
      }
    }
    Free(AllocSegment(plan_.param_shard_bytes, adam));
  }

  void Rollout(int64_t s) {
    Phase(EventKind::kPhaseBegin, "rollout");
    const uint32_t kv = Tag("rollout:kv_cache");
    const uint32_t acts = Tag("rollout:activations");
    std::vector<uint64_t> blocks;
    for (int b = 0; b < kKvBlocks; ++b)
      blocks.push_back(Alloc(o_.rollout_kv_bytes / kKvBlocks, kv));
    for (int i = 0; i < plan_.layers; ++i) {
      const double jitter = 0.97 + 0.06 * Unit(o_.seed, rank_, s, 500000 + i);
      Free(Alloc(static_cast<uint64_t>(plan_.activation_block_bytes / 2 * jitter), acts));
    }
    // free_cache_engine(); with the planted bug part of the cache stays referenced.
    if (o_.rollout_leak) Alloc(o_.rollout_leak_bytes, kv);
    for (uint64_t block : blocks) Free(block);
    Phase(EventKind::kPhaseEnd, "rollout");
  }

  void WeightSync() {
    Phase(EventKind::kPhaseBegin, "weight_sync");
    const uint32_t buffer = Tag("weight_sync:buffer");
    for (int i = 0; i < plan_.layers; ++i) Free(AllocSegment(plan_.unsharded_layer_bytes, buffer));
    Phase(EventKind::kPhaseEnd, "weight_sync");
  }

  const WorkloadOptions& o_;
  const WorkloadPlan& plan_;
  const int rank_;
  const RankLeak leak_;
  const int64_t steps_;
  EventSink& sink_;

  int64_t quantum_ns_ = 1;
  int64_t clock_ns_ = 0;  // true time; events carry clock_ns_ + skew_ns_ (the host's clock)
  int64_t skew_ns_ = 0;
  int64_t next_sample_ns_ = 0;
  int64_t current_step_ = -1;
  uint32_t device_ = 0;
  uint32_t torch_source_ = 0;
  uint32_t nccl_source_ = 0;
  bool stopped_ = false;
  int64_t stop_at_ns_ = INT64_MAX;
  int64_t oom_at_ns_ = 0;
  uint64_t live_bytes_ = 0;
  absl::flat_hash_map<uint64_t, uint64_t> live_;
  AddressSpace addresses_;
  std::vector<uint64_t> step_peaks_;
};

absl::Status Invalid(absl::string_view option, const std::string& value, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("--", option, " ", value, ": ", why));
}

// Finds the leak rate that makes the OOM rank fail in oom_step and not before, from a dry run
// of that rank without the leak.
absl::Status CalibrateOomLeak(const WorkloadOptions& options, WorkloadPlan& plan) {
  const int rank = *options.oom_rank;
  const int64_t from =
      options.leak_from_step < options.oom_step ? options.leak_from_step : options.oom_step / 2;
  NullSink null;
  RankPlayer dry(options, plan, rank, RankLeak{}, options.oom_step + 1, null);
  dry.Play();
  const std::vector<uint64_t>& peaks = dry.step_peaks();
  const uint64_t capacity = options.device_total_bytes - options.context_bytes;
  if (static_cast<int64_t>(peaks.size()) <= options.oom_step) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot plant an OOM at step ", options.oom_step, " on rank ", rank,
        ": the rank already runs out of memory at step ", peaks.size() - 1, " without a leak"));
  }
  // The leak allocated at the start of step k (k >= from) totals (k - from + 1) * rate and is
  // part of step k's peak.
  uint64_t rate_max = ~0ull;
  for (int64_t k = from; k < options.oom_step; ++k) {
    rate_max = std::min(rate_max, (capacity - peaks[k]) / static_cast<uint64_t>(k - from + 1));
  }
  rate_max = rate_max / kSegmentAlign * kSegmentAlign;
  const uint64_t n = static_cast<uint64_t>(options.oom_step - from + 1);
  const uint64_t rate_min_exclusive = (capacity - peaks[options.oom_step]) / n;
  if (rate_max < 10 * kMiB || rate_max <= rate_min_exclusive) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot plant an OOM at step ", options.oom_step, " on rank ", rank,
        " with a leak from step ", from,
        ": peaks vary too much between steps (try a later --oom_step or --leak_from_step)"));
  }
  plan.leak_rank = rank;
  plan.leak_from_step = from;
  plan.leak_bytes_per_step = rate_max;
  // When it fails, for the other ranks to stop there.
  RankPlayer failing(options, plan, rank, RankLeak{true, from, rate_max}, options.oom_step + 1,
                     null);
  failing.Play();
  plan.oom_at_ns = failing.oom_at_ns();
  return absl::OkStatus();
}

}  // namespace

uint64_t SegmentBytes(uint64_t bytes) {
  // PyTorch's CUDACachingAllocator: kSmallSize (1 MiB) requests come from 2 MiB segments,
  // requests below kMinLargeAlloc (10 MiB) from 20 MiB segments, larger ones are rounded up to
  // kRoundLarge (2 MiB).
  if (bytes <= 1 * kMiB) return 2 * kMiB;
  if (bytes < 10 * kMiB) return 20 * kMiB;
  return AlignUp(bytes, kSegmentAlign);
}

absl::Status ValidateWorkload(const WorkloadOptions& o) {
  if (o.ranks < 1 || o.ranks > 65536)
    return Invalid("ranks", absl::StrCat(o.ranks), "must be 1..65536");
  if (o.ranks_per_node < 1) {
    return Invalid("ranks_per_node", absl::StrCat(o.ranks_per_node), "must be at least 1");
  }
  if (o.steps < 1 || o.steps > 10'000'000) {
    return Invalid("steps", absl::StrCat(o.steps), "must be 1..10000000");
  }
  // Named as memtrace-sim's flags are (--step, --device_bytes, --clock_skew_per_node).
  if (o.step_ns < 1'000'000) {
    return Invalid("step", absl::FormatDuration(absl::Nanoseconds(o.step_ns)), "must be >= 1ms");
  }
  if (o.sample_interval_ns < 1'000'000) {
    return Invalid("sample_interval_ns", absl::StrCat(o.sample_interval_ns), "must be >= 1 ms");
  }
  if (o.device_total_bytes <= o.context_bytes) {
    return Invalid("device_bytes", absl::StrCat(o.device_total_bytes),
                   absl::StrCat("must exceed the simulated CUDA context and workspaces (",
                                o.context_bytes, " bytes)"));
  }
  if (o.activations_per_layer < 1 || o.activations_per_layer > 64) {
    return Invalid("activations_per_layer", absl::StrCat(o.activations_per_layer), "must be 1..64");
  }
  if (o.layers < 0 || o.layers > kMaxLayers) {
    return Invalid("layers", absl::StrCat(o.layers), absl::StrCat("must be 0..", kMaxLayers));
  }
  if (o.layers == 0 && o.events_per_rank == 0) {
    return Invalid("events_per_rank", "0", "must be positive when --layers is 0");
  }
  if (o.model_param_bytes == 0) return Invalid("model_param_bytes", "0", "must be positive");
  if (o.leak_rank && (*o.leak_rank < 0 || *o.leak_rank >= o.ranks)) {
    return Invalid("leak_rank", absl::StrCat(*o.leak_rank),
                   absl::StrCat("out of range: ranks is ", o.ranks));
  }
  if (o.leak_rank && o.oom_rank) {
    // The OOM rank's leak is its own, sized to fill the device in --oom_step; a second leak
    // was dropped without a word.
    return Invalid("leak_rank", absl::StrCat(*o.leak_rank),
                   "not with --oom_rank, whose rank leaks until it runs out of memory");
  }
  if (o.leak_from_step < 0 || (o.leak_rank && o.leak_from_step >= o.steps)) {
    return Invalid("leak_from_step", absl::StrCat(o.leak_from_step),
                   absl::StrCat("must be within the run (0..", o.steps - 1, ")"));
  }
  if (o.leak_rank && o.leak_bytes_per_step == 0) {
    return Invalid("leak_bytes_per_step", "0", "must be positive");
  }
  if (o.leak_tag.empty()) return Invalid("leak_tag", "''", "must not be empty");
  for (size_t i = 0; i < o.also_leak.size(); ++i) {
    const WorkloadOptions::Leak& more = o.also_leak[i];
    const std::string value = absl::StrCat(more.rank, ":", more.from_step);
    if (o.oom_rank) return Invalid("also_leak", value, "not with --oom_rank");
    if (!o.leak_rank) return Invalid("also_leak", value, "needs --leak_rank");
    if (more.rank < 0 || more.rank >= o.ranks) {
      return Invalid("also_leak", value, absl::StrCat("rank out of range: ranks is ", o.ranks));
    }
    if (more.from_step < 0 || more.from_step >= o.steps) {
      return Invalid("also_leak", value,
                     absl::StrCat("step must be within the run (0..", o.steps - 1, ")"));
    }
    const auto same_rank = [&more](const WorkloadOptions::Leak& earlier) {
      return earlier.rank == more.rank;
    };
    if (more.rank == *o.leak_rank ||
        std::any_of(o.also_leak.begin(), o.also_leak.begin() + i, same_rank)) {
      return Invalid("also_leak", value, "that rank already leaks");
    }
  }
  if (o.spike_period < 1)
    return Invalid("spike_period", absl::StrCat(o.spike_period), "must be >= 1");
  if (o.oom_rank && (*o.oom_rank < 0 || *o.oom_rank >= o.ranks)) {
    return Invalid("oom_rank", absl::StrCat(*o.oom_rank),
                   absl::StrCat("out of range: ranks is ", o.ranks));
  }
  if (o.oom_rank && (o.oom_step < 2 || o.oom_step >= o.steps)) {
    return Invalid("oom_step", absl::StrCat(o.oom_step),
                   absl::StrCat("must be within the run (2..", o.steps - 1, ")"));
  }
  if (o.rollout_leak && !o.phases) {
    return Invalid("rollout_leak", "true", "needs --phases");
  }
  constexpr int64_t kHourNs = int64_t{3600} * 1'000'000'000;
  if (o.clock_skew_per_node_ns > kHourNs || o.clock_skew_per_node_ns < -kHourNs) {
    return Invalid("clock_skew_per_node",
                   absl::FormatDuration(absl::Nanoseconds(o.clock_skew_per_node_ns)),
                   "must be within one hour either way");
  }
  return absl::OkStatus();
}

RankPlacement PlaceRank(const WorkloadOptions& options, int rank) {
  RankPlacement p;
  p.group_rank = rank / options.ranks_per_node;
  p.local_rank = rank % options.ranks_per_node;
  p.local_world_size =
      std::min(options.ranks_per_node, options.ranks - p.group_rank * options.ranks_per_node);
  p.host = absl::StrCat("sim-node-", p.group_rank);
  return p;
}

int64_t ClockSkewNs(const WorkloadOptions& options, int rank) {
  return static_cast<int64_t>(PlaceRank(options, rank).group_rank) * options.clock_skew_per_node_ns;
}

absl::StatusOr<WorkloadPlan> PlanWorkload(const WorkloadOptions& o) {
  if (absl::Status s = ValidateWorkload(o); !s.ok()) return s;
  WorkloadPlan plan;
  plan.layers = DeriveLayers(o);
  const uint64_t layers = static_cast<uint64_t>(plan.layers);
  // FSDP keeps fp32 shards (twice the bf16 bytes) and gathers bf16 layers.
  plan.param_shard_bytes =
      SegmentBytes(o.model_param_bytes * 2 / static_cast<uint64_t>(o.ranks) / layers);
  plan.unsharded_layer_bytes = SegmentBytes(o.model_param_bytes / layers);
  plan.activation_block_bytes =
      o.activation_bytes / layers / static_cast<uint64_t>(o.activations_per_layer);
  plan.resident_bytes =
      4 * layers * plan.param_shard_bytes + kNcclBuffers * SegmentBytes(kNcclBufferBytes);
  plan.steps_played = o.oom_rank ? o.oom_step : o.steps;
  if (o.oom_rank) {
    if (absl::Status s = CalibrateOomLeak(o, plan); !s.ok()) return s;
  } else if (o.leak_rank) {
    plan.leak_rank = o.leak_rank;
    plan.leak_from_step = o.leak_from_step;
    plan.leak_bytes_per_step = SegmentBytes(o.leak_bytes_per_step);
    plan.also_leak = o.also_leak;
  }
  return plan;
}

absl::Status PlayRank(const WorkloadOptions& options, int rank, EventSink& sink) {
  absl::StatusOr<WorkloadPlan> plan = PlanWorkload(options);
  if (!plan.ok()) return plan.status();
  if (rank < 0 || rank >= options.ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " out of range: ranks is ", options.ranks));
  }
  RankLeak leak;
  if (plan->leak_rank == rank) {
    leak = RankLeak{true, plan->leak_from_step, plan->leak_bytes_per_step};
  }
  for (const WorkloadOptions::Leak& more : plan->also_leak) {
    if (more.rank == rank) leak = RankLeak{true, more.from_step, plan->leak_bytes_per_step};
  }
  // The OOM rank runs into step oom_step, where it fails; the others run that step alongside it
  // until then.
  const int64_t steps = options.oom_rank ? options.oom_step + 1 : plan->steps_played;
  RankPlayer player(options, *plan, rank, leak, steps, sink);
  if (options.oom_rank && options.oom_rank != rank && plan->oom_at_ns > 0) {
    player.StopAt(plan->oom_at_ns);
  }
  player.Play();
  return absl::OkStatus();
}

}  // namespace memtrace::sim
