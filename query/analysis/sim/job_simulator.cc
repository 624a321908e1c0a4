#include "query/analysis/sim/job_simulator.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>

namespace memtrace::analysis::sim {
namespace {

constexpr char kTorch[] = "libtorch_cuda.so";

// One kind of memory live at a moment: `bytes` in allocations made from first_step to last_step
// (one allocation per step), or, when they are equal, `pieces` allocations in that step.
struct Block {
  std::string tag;
  std::string source;
  std::string phase;
  uint64_t bytes = 0;
  int64_t first_step = 0;
  int64_t last_step = 0;
  uint32_t pieces = 1;
  bool transient = false;  // freed within the step (activations, a phase's working memory)
};

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1), a pure function of its arguments so every moment of a step agrees.
double Uniform(uint64_t seed, uint32_t rank, int64_t step, uint64_t salt) {
  uint64_t h = Mix(seed ^ Mix(rank + 0x1000 * salt) ^ Mix(static_cast<uint64_t>(step) << 1));
  return static_cast<double>(h >> 11) / 9007199254740992.0;
}

bool OnRank(int32_t wanted, uint32_t rank) { return wanted < 0 || wanted == int32_t(rank); }

uint64_t Round2MiB(double bytes) { return static_cast<uint64_t>(bytes / (2 * kMiB)) * 2 * kMiB; }

uint32_t PiecesOf(uint64_t bytes, uint64_t piece) {
  return static_cast<uint32_t>(std::max<uint64_t>(1, bytes / piece));
}

// The phase whose working memory is the activations: the first with peak_bytes == 0.
std::string ActivationPhase(const JobSpec& spec) {
  for (const Phase& p : spec.phases) {
    if (p.peak_bytes == 0) return p.name;
  }
  return "";
}

uint64_t Capacity(const JobSpec& spec) {
  return spec.device_total > spec.context_bytes ? spec.device_total - spec.context_bytes : 0;
}

// Everything live on `rank` at `moment` of `step`. With noise off, the jitter terms are zero
// (used for the planted capacity step). At kPeak, the transient block is cut to what fits the
// device when stop_at_oom is set (the allocation that would not fit failed).
std::vector<Block> Contents(const JobSpec& spec, uint32_t rank, int64_t step, Moment moment,
                            bool noise, bool* overflow, const std::string* in_phase = nullptr) {
  std::vector<Block> out;
  bool after_backward = step >= 1 || moment != Moment::kFloor;
  bool after_optimizer = step >= 1 || moment == Moment::kEnd;
  out.push_back({"fsdp:params", kTorch, "", spec.params_bytes, 0, 0, 20});
  if (after_backward) out.push_back({"fsdp:grads", kTorch, "", spec.grads_bytes, 0, 0, 20});
  if (after_optimizer) {
    out.push_back({"optimizer:adam", kTorch, "", spec.optimizer_bytes, 0, 0, 40});
  }
  if (after_backward) out.push_back({"nccl:buffers", "libnccl.so.2", "", spec.nccl_bytes, 0, 0, 4});
  if (spec.cache_noise_bytes > 0) {
    uint64_t jitter =
        noise ? Round2MiB(Uniform(spec.seed, rank, step, 1) * spec.cache_noise_bytes) : 0;
    if (jitter > 0) out.push_back({"allocator:cache", kTorch, "", jitter, step, step, 1});
  }
  for (const Offset& o : spec.offsets) {
    if (o.rank == rank) out.push_back({o.tag, kTorch, "", o.bytes, 0, 0, 1});
  }
  int64_t through = moment == Moment::kFloor ? step - 1 : step;  // last step whose memory is in
  if (spec.warmup_bytes > 0 && spec.warmup_steps > 0 && through >= 0) {
    const int64_t filled = std::min(through + 1, spec.warmup_steps);
    out.push_back({"allocator:warmup", kTorch, "",
                   spec.warmup_bytes * static_cast<uint64_t>(filled) /
                       static_cast<uint64_t>(spec.warmup_steps),
                   0, filled - 1, 1});
  }
  for (const Growth& g : spec.growths) {
    if (!OnRank(g.rank, rank) || through < g.start_step) continue;
    uint64_t n = static_cast<uint64_t>(through - g.start_step + 1);
    out.push_back({g.tag, g.source, "", n * g.bytes_per_step, g.start_step, through, 1});
  }
  for (const Phase& p : spec.phases) {
    if (p.retained_bytes == 0 || !OnRank(p.retained_rank, rank)) continue;
    if (through < p.retained_from_step) continue;
    if (p.retained_accumulates) {
      uint64_t n = static_cast<uint64_t>(through - p.retained_from_step + 1);
      out.push_back(
          {p.name, kTorch, p.name, n * p.retained_bytes, p.retained_from_step, through, 1});
    } else {
      out.push_back({p.name, kTorch, p.name, p.retained_bytes, p.retained_from_step,
                     p.retained_from_step, 1});
    }
  }
  for (const Spike& s : spec.spikes) {
    if (!OnRank(s.rank, rank) || s.period <= 0 || step % s.period != s.offset) continue;
    if (moment == Moment::kPeak || s.whole_step) {
      out.push_back({s.tag, kTorch, "", s.bytes, step, step, PiecesOf(s.bytes, 512 * kMiB)});
    }
  }
  if (moment == Moment::kPeak) {
    // The step's peak is reached in its largest working-memory segment: the forward/backward
    // activations or one phase's own transient memory.
    Block transient;
    transient.transient = true;
    transient.source = kTorch;
    transient.first_step = transient.last_step = step;
    if (spec.activation_bytes > 0) {
      uint64_t jitter =
          noise ? Round2MiB(Uniform(spec.seed, rank, step, 2) * spec.activation_noise_bytes) : 0;
      transient.tag = "activations";
      transient.bytes = spec.activation_bytes + jitter;
      transient.phase = ActivationPhase(spec);
    }
    for (const Phase& p : spec.phases) {
      if (in_phase != nullptr) {
        // The moment is this phase's own peak, not the step's.
        if (p.name != *in_phase) continue;
        if (p.peak_bytes == 0) {
          transient.phase = p.name;
          continue;
        }
        transient.tag = p.name;
        transient.phase = p.name;
        transient.bytes = p.peak_bytes;
        continue;
      }
      if (p.peak_bytes > transient.bytes) {
        transient.tag = p.name;
        transient.phase = p.name;
        transient.bytes = p.peak_bytes;
      }
    }
    if (transient.bytes > 0) {
      uint64_t held = 0;
      for (const Block& b : out) held += b.bytes;
      uint64_t cap = Capacity(spec);
      if (held + transient.bytes > cap) {
        if (overflow != nullptr) *overflow = true;
        if (spec.stop_at_oom) transient.bytes = cap > held ? cap - held : 0;
      }
      transient.pieces = PiecesOf(transient.bytes, 512 * kMiB);
      if (transient.bytes > 0) out.push_back(transient);
    }
  }
  return out;
}

uint64_t Total(const std::vector<Block>& blocks) {
  uint64_t sum = 0;
  for (const Block& b : blocks) sum += b.bytes;
  return sum;
}

// Adds `blocks` grouped by key into `sums` (name -> bytes at this moment).
template <typename KeyFn>
std::map<std::string, uint64_t> SumBy(const std::vector<Block>& blocks, KeyFn key) {
  std::map<std::string, uint64_t> sums;
  for (const Block& b : blocks) sums[key(b)] += b.bytes;
  return sums;
}

template <typename KeyFn>
std::vector<GroupBytes> Groups(NameTable& names, const std::vector<Block>& floor,
                               const std::vector<Block>& peak, const std::vector<Block>& end,
                               KeyFn key) {
  std::map<std::string, GroupBytes> groups;
  for (const auto* moment : {&floor, &peak, &end}) {
    for (const auto& [name, bytes] : SumBy(*moment, key)) {
      GroupBytes& g = groups[name];
      g.name = names.Intern(name);
      g.peak_bytes = std::max(g.peak_bytes, bytes);
    }
  }
  for (const auto& [name, bytes] : SumBy(end, key)) groups[name].live_bytes = bytes;
  std::vector<GroupBytes> out;
  for (const auto& [name, g] : groups) out.push_back(g);
  return out;
}

int64_t FirstOverflowStep(const JobSpec& spec, uint32_t rank, int64_t max_steps, bool noise) {
  for (int64_t s = 0; s < max_steps; ++s) {
    bool overflow = false;
    Contents(spec, rank, s, Moment::kPeak, noise, &overflow);
    if (overflow) return s;
  }
  return -1;
}

RankLiveSet LiveAtMoment(const JobSpec& spec, uint32_t rank, int64_t step, Moment moment,
                         const std::string* in_phase);

// The step at which `rank`'s process restarted, or one past any step when it did not.
int64_t RestartStep(const JobSpec& spec, uint32_t rank) {
  for (const Restart& r : spec.restarts) {
    if (r.rank == rank) return r.at_step;
  }
  return std::numeric_limits<int64_t>::max();
}

}  // namespace

SimulatedJob Simulate(const JobSpec& spec) {
  SimulatedJob job;
  job.timeline.job_id = spec.job_id;
  int64_t last_step = spec.steps - 1;
  if (spec.stop_at_oom) {
    for (uint32_t r = 0; r < spec.ranks; ++r) {
      int64_t s = FirstOverflowStep(spec, r, spec.steps, /*noise=*/true);
      if (s >= 0 && (!job.oom.has_value() || s < job.oom->step)) job.oom = PlantedOom{r, s};
    }
    if (job.oom.has_value()) last_step = job.oom->step;
  }
  NameTable& names = job.timeline.names;
  for (uint32_t r = 0; r < spec.ranks; ++r) {
    RankTimeline rank;
    rank.rank = r;
    rank.host = "node-" + std::to_string(r / 8);
    rank.device_index = static_cast<int32_t>(r % 8);
    rank.allocator = "segments";
    // Hosts' clocks differ by up to a millisecond.
    int64_t skew = static_cast<int64_t>(Uniform(spec.seed, r, -1, 3) * 2e6) - 1'000'000;
    const int64_t restart_at = RestartStep(spec, r);
    for (int64_t s = 0; s <= last_step; ++s) {
      if (s == restart_at) {
        if (!rank.steps.empty()) job.timeline.ranks.push_back(rank);
        rank.steps.clear();
        rank.attempt = 1;
      }
      // The step as the rank's process counts its memory: a restarted one begins again.
      const int64_t own = s >= restart_at ? s - restart_at : s;
      bool overflow = false;
      std::vector<Block> floor = Contents(spec, r, own, Moment::kFloor, true, nullptr);
      std::vector<Block> peak = Contents(spec, r, own, Moment::kPeak, true, &overflow);
      std::vector<Block> end = Contents(spec, r, own, Moment::kEnd, true, nullptr);
      StepPoint p;
      p.step = s;
      p.start_ns = spec.start_ns + s * spec.step_ns + skew;
      p.end_ns = p.start_ns + spec.step_ns - 1'000'000;
      p.start_bytes = Total(floor);
      p.floor_bytes = std::min({Total(floor), Total(peak), Total(end)});
      p.peak_bytes = std::max({Total(floor), Total(peak), Total(end)});
      p.end_bytes = Total(end);
      for (const Block& b : peak) {
        if (b.first_step == own) {
          uint64_t n = b.first_step == b.last_step ? b.pieces : 1;
          p.allocs += n;
          p.alloc_bytes +=
              b.first_step == b.last_step ? b.bytes : b.bytes / (b.last_step - b.first_step + 1);
          if (b.transient) {
            p.frees += n;
            p.free_bytes += b.bytes;
          }
        }
      }
      std::vector<GroupBytes> by_tag =
          Groups(names, floor, peak, end, [](const Block& b) { return b.tag; });
      std::vector<GroupBytes> by_source =
          Groups(names, floor, peak, end, [](const Block& b) { return b.source; });
      std::vector<GroupBytes> by_phase;
      uint64_t base = Total(floor);
      uint64_t retained_now = 0;
      for (const Block& b : end) {
        if (!b.phase.empty() && b.last_step == own) {
          retained_now +=
              b.first_step == b.last_step ? b.bytes : b.bytes / (own - b.first_step + 1);
        }
      }
      for (const Phase& ph : spec.phases) {
        GroupBytes g;
        g.name = names.Intern(ph.name);
        uint64_t working = ph.peak_bytes > 0 ? ph.peak_bytes : spec.activation_bytes;
        g.peak_bytes = std::min(base + working + retained_now, p.peak_bytes);
        g.live_bytes = base + retained_now;
        g.closed = true;  // every phase runs within its step
        by_phase.push_back(g);
      }
      p.groups = StepGroups(by_tag, by_source, by_phase);
      p.device_total = spec.device_total;
      // The agent samples device memory now and then, not at the step's peak: the highest sample
      // of a step is taken here at its end.
      p.device_used_max = std::min(spec.device_total, p.end_bytes + spec.context_bytes);
      p.live_at_device_used_max = p.end_bytes;
      if (overflow && spec.stop_at_oom) {
        p.ooms = 1;
        p.oom_requested_bytes = spec.oom_request_bytes;
      }
      rank.steps.push_back(std::move(p));
    }
    job.timeline.ranks.push_back(std::move(rank));
  }
  return job;
}

RankLiveSet LiveAt(const JobSpec& spec, uint32_t rank, int64_t step, Moment moment) {
  return LiveAtMoment(spec, rank, step, moment, nullptr);
}

RankLiveSet LiveInPhase(const JobSpec& spec, uint32_t rank, int64_t step,
                        const std::string& phase) {
  return LiveAtMoment(spec, rank, step, Moment::kPeak, &phase);
}

namespace {

RankLiveSet LiveAtMoment(const JobSpec& spec, uint32_t rank, int64_t step, Moment moment,
                         const std::string* in_phase) {
  RankLiveSet live;
  live.rank = rank;
  live.at_step = step;
  live.at_ns = spec.start_ns + step * spec.step_ns + spec.step_ns / 2;
  if (moment == Moment::kPeak) {
    for (const Block& b : Contents(spec, rank, step, moment, true, nullptr, in_phase)) {
      if (b.transient && !b.phase.empty()) live.open_phases = {b.phase};
    }
  }
  uint64_t address = 0x7f0000000000ull + (uint64_t{rank} << 40);
  for (const Block& b : Contents(spec, rank, step, moment, true, nullptr, in_phase)) {
    auto add = [&](int64_t alloc_step, uint64_t bytes) {
      LiveAllocation a;
      a.tag = b.tag;
      a.source = b.source;
      a.phase = b.phase;
      a.step_allocated = alloc_step;
      a.ts_ns = spec.start_ns + alloc_step * spec.step_ns;
      a.address = address;
      a.bytes = bytes;
      address += (bytes + (2 * kMiB - 1)) & ~(2 * kMiB - 1);
      live.allocations.push_back(std::move(a));
    };
    if (b.first_step == b.last_step) {
      uint64_t each = b.bytes / b.pieces;
      for (uint32_t i = 0; i < b.pieces; ++i) {
        add(b.first_step, i + 1 == b.pieces ? b.bytes - each * (b.pieces - 1) : each);
      }
    } else {
      uint64_t n = static_cast<uint64_t>(b.last_step - b.first_step + 1);
      for (int64_t s = b.first_step; s <= b.last_step; ++s) add(s, b.bytes / n);
    }
  }
  return live;
}

}  // namespace

int64_t PlantedCapacityStep(const JobSpec& spec, uint32_t rank, int64_t max_steps) {
  return FirstOverflowStep(spec, rank, max_steps, /*noise=*/false);
}

}  // namespace memtrace::analysis::sim
