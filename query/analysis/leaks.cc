#include "query/analysis/leaks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "query/analysis/current_trend.h"
#include "query/analysis/robust_stats.h"

namespace memtrace::analysis {
namespace {

uint64_t ToBytes(double v) { return v <= 0 ? 0 : static_cast<uint64_t>(std::llround(v)); }

double MedianOf(const std::vector<double>& v, size_t begin, size_t end) {
  return Median(absl::MakeConstSpan(v.data() + begin, end - begin));
}

// One rank's points after warm-up, as the fits want them.
struct CurvePoints {
  std::vector<double> x, floor, peak;
};

CurvePoints PointsAfterWarmup(const RankTimeline& rank, size_t skip) {
  CurvePoints p;
  for (size_t i = skip; i < rank.steps.size(); ++i) {
    p.x.push_back(static_cast<double>(rank.steps[i].step));
    p.floor.push_back(static_cast<double>(rank.steps[i].floor_bytes));
    p.peak.push_back(static_cast<double>(rank.steps[i].peak_bytes));
  }
  return p;
}

// Whether the floor leaks (`rise`, fitted to the floors), with the fit's figures in `e`.
// `since_onset`: rise.trend past a flat start too short for it to split off
// (PastShortFlatStart): where the rise began and its rate. `last_warmup`: the step before the
// first examined, if any.
bool FloorLeaks(const CurvePoints& p, const RiseFit& rise, const CurrentTrend& since_onset,
                const StepPoint* last_warmup, TheilSen& fitter, CurveEvidence& e) {
  const CurrentTrend& trend = rise.trend;
  const TrendFit& all = since_onset.fit;
  const size_t onset = since_onset.onset;
  e.floor_bytes_per_step = all.slope;
  // Since the rise began (past a short flat start too), as rising_since_step says below.
  e.floor_growth_bytes = TrendGrowth(p.x, since_onset);
  e.floor_trend_z = all.trend_z;
  TrendFit recent = FitLaterHalf(p.x, p.floor, trend, fitter);
  e.recent_bytes_per_step = recent.slope;
  e.recent_trend_z = recent.trend_z;
  if (rise.rising) {
    // Where the fit says the rise began: the last point of the flat stretch before it (the step
    // whose run first kept memory), or the first point examined when the floor rose from it.
    // Counting back from the end while the floor stays above its start plus half of
    // min_growth_bytes put it steps late for a slow leak, and mid-rise for one that had begun
    // before the window (its "start" was the median of the first tenth of the floors).
    // A flat stretch too short for FitCurrentTrend to split off moves it too.
    e.rising_since_step = static_cast<int64_t>(p.x[GrowthStart(since_onset)]);
    // The window alone cannot tell a floor flat at its first step and rising after it from one
    // that rose into it: both lie on one line. The last warm-up step can: a floor that did not
    // rise into the first step examined by half the growth of the steps between began rising
    // there (step numbers may jump: markers every 10 iterations).
    e.rising_from_first_examined =
        onset == 0 && (last_warmup == nullptr ||
                       p.floor[0] - static_cast<double>(last_warmup->floor_bytes) >=
                           0.5 * all.slope * (p.x[0] - static_cast<double>(last_warmup->step)));
  }
  return rise.rising;
}

// The steps whose peak stands out (see leaks.h), with their figures in `e`.
std::vector<int64_t> FindSpikes(const CurvePoints& p, const CurrentTrend& trend,
                                const LeakParams& params, CurveEvidence& e) {
  // Peaks measured against the floor's running median (11 steps), so memory held for a whole
  // step (a checkpoint) and memory only at the peak (an eval pass) both count, while a leak's
  // rising peaks, which the running median follows, do not. The window's floors are moved along
  // the floor's fit to step i first: near the series' ends the window is cut short on one side,
  // and its plain median lagged a rising floor by ~2.5 steps of growth, which read as spikes in
  // a fast leak's last steps. (Narrowing it instead missed a whole-step spike at either end.)
  const size_t n = p.x.size();
  const auto fitted = [&](size_t k) {
    // Flat before the fit's onset.
    return trend.fit.intercept + trend.fit.slope * p.x[std::max(k, trend.onset)];
  };
  // Nor above the floor the step began from, carried on at the rate it last rose (when it rose):
  // a floor that rose step by step and then fell back (a leak freed) is no line the fit follows,
  // the running median lagged its top, and the last steps of the rise, each peak its usual
  // height above its floor, read as spikes ("3 spikes, max +7.50 GiB"). A step that held memory
  // for its whole length still stands out: the floor before it had not risen.
  std::vector<double> over(n), window;
  for (size_t i = 0; i < n; ++i) {
    size_t lo_i = i >= 5 ? i - 5 : 0;
    size_t hi_i = std::min(n, i + 6);
    window.clear();
    for (size_t j = lo_i; j < hi_i; ++j) window.push_back(p.floor[j] - fitted(j) + fitted(i));
    double reference = MedianInPlace(absl::MakeSpan(window));
    if (i >= 1) {
      const double last_rise = i >= 2 ? std::max(0.0, p.floor[i - 1] - p.floor[i - 2]) : 0.0;
      reference = std::max(reference, p.floor[i - 1] + last_rise);
    }
    over[i] = p.peak[i] - reference;
  }
  Spread s = RobustSpread(over);
  double cut = s.median + std::max(static_cast<double>(params.min_spike_bytes),
                                   params.spike_mad_factor * s.scale);
  // The floor's distance from its fit, to tell a level that stepped up from a spike: memory
  // allocated in step i and kept raises step i's peak above its floor (the floor is the step's
  // lowest point, before the allocation), then the floors after it.
  std::vector<double> residual(n), scratch;
  for (size_t i = 0; i < n; ++i) residual[i] = p.floor[i] - fitted(i);
  const auto median_residual = [&](size_t begin, size_t end) {
    scratch.assign(residual.begin() + begin, residual.begin() + end);
    return MedianInPlace(absl::MakeSpan(scratch));
  };
  std::vector<int64_t> spikes;
  for (size_t i = 0; i < n; ++i) {
    if (over[i] <= cut) continue;
    // Memory allocated in step i and kept is in step i + 1's floor: a large leak raises every
    // peak by its allocation a step before the floor follows, and where the floor's fit misses
    // the leak (one that began a few steps before the end) the comparison below reads each of
    // those peaks as a spike ("9 spikes, every ~1 step" on a pure 4 GiB/step leak).
    const double kept = 0.5 * (over[i] - s.median);
    if (i + 1 < n && p.floor[i + 1] - p.floor[i] >= kept) continue;
    // The last step has no next floor yet: a floor that rose by as much into it and into the step
    // before it is that leak going on (a whole-step spike there raises one floor, not two).
    if (i + 1 == n && i >= 2 && p.floor[i] - p.floor[i - 1] >= kept &&
        p.floor[i - 1] - p.floor[i - 2] >= kept) {
      continue;
    }
    if (i + 1 < n && i > 0 &&
        median_residual(i + 1, std::min(n, i + 4)) - median_residual(i >= 3 ? i - 3 : 0, i) >=
            0.5 * (over[i] - s.median)) {
      continue;  // the floors after it kept half of it or more: a step up, not a spike
    }
    spikes.push_back(static_cast<int64_t>(p.x[i]));
    uint64_t excess = ToBytes(over[i] - s.median);
    if (excess > e.max_spike_excess_bytes) {
      e.max_spike_excess_bytes = excess;
      e.max_spike_step = static_cast<int64_t>(p.x[i]);
    }
  }
  e.spike_steps = static_cast<uint32_t>(spikes.size());
  if (spikes.size() >= 2) {
    std::vector<double> gaps;
    for (size_t i = 1; i < spikes.size(); ++i) gaps.push_back(double(spikes[i] - spikes[i - 1]));
    e.spike_period_steps = static_cast<int64_t>(std::llround(Median(gaps)));
  }
  e.first_spikes.assign(spikes.begin(), spikes.begin() + std::min<size_t>(8, spikes.size()));
  return spikes;
}

RankCurve Classify(const RankTimeline& rank, const LeakParams& params, TheilSen& fitter) {
  RankCurve out;
  out.rank = rank.rank;
  out.allocator = rank.allocator;
  CurveEvidence& e = out.evidence;
  size_t skip = std::min<size_t>(params.warmup_steps, rank.steps.size());
  size_t n = rank.steps.size() - skip;
  e.points = static_cast<uint32_t>(n);
  if (n == 0) {
    out.curve = CurveClass::kTooShort;
    return out;
  }
  const CurvePoints p = PointsAfterWarmup(rank, skip);
  e.first_step = rank.steps[skip].step;
  e.last_step = rank.steps.back().step;
  size_t few = std::max<size_t>(3, n / 10);
  few = std::min(few, n);
  e.floor_start_bytes = ToBytes(MedianOf(p.floor, 0, few));
  e.floor_end_bytes = ToBytes(MedianOf(p.floor, n - few, n));
  e.median_peak_bytes = ToBytes(Median(p.peak));
  if (n < params.min_points) {
    out.curve = CurveClass::kTooShort;
    return out;
  }
  // The floor's trend since it started: a leak that began after a flat stretch has its own rate.
  const RiseFit rise =
      FitRise(p.x, p.floor, params.min_points, static_cast<double>(params.min_growth_bytes),
              params.min_trend_z, fitter);
  const CurrentTrend& trend = rise.trend;
  // The fit with its onset past a flat start too short for FitCurrentTrend to split off: where
  // a leak began, and what spikes stand out from (measured along the line, such a start put the
  // floor that far under it, and the first steps' peaks read as spikes). Found once for both.
  const CurrentTrend along = PastShortFlatStart(p.x, p.floor, trend, params.min_points, fitter);
  const bool leak =
      FloorLeaks(p, rise, along, skip > 0 ? &rank.steps[skip - 1] : nullptr, fitter, e);
  const std::vector<int64_t> spikes = FindSpikes(p, along, params, e);
  bool spiky = !spikes.empty() && spikes.size() <= params.max_spike_fraction * n;
  out.curve = leak ? CurveClass::kLeak : spiky ? CurveClass::kSpikes : CurveClass::kPlateau;
  return out;
}

bool InPhase(const std::vector<std::string>& open, const std::string& phase) {
  return std::find(open.begin(), open.end(), phase) != open.end();
}

// Tags that hold a phase's own memory: the phase's name, or it followed by ':' or '/'.
bool TagOfPhase(absl::string_view tag, absl::string_view phase) {
  if (!absl::StartsWith(tag, phase)) return false;
  return tag.size() == phase.size() || tag[phase.size()] == ':' || tag[phase.size()] == '/';
}

struct Agg {
  uint64_t count = 0;
  uint64_t bytes = 0;
  int64_t oldest = 0;
  int64_t newest = 0;
  std::vector<int64_t> steps;  // when each was allocated: its step, or its time
  // `run_gap_ns` > 0: allocations are told apart by time, not step (a job without step markers,
  // where every step is 0): those more than run_gap_ns apart are separate runs.
  int64_t run_gap_ns = 0;
  void Add(const LiveAllocation& a) {
    if (count == 0 || a.step_allocated < oldest) oldest = a.step_allocated;
    if (count == 0 || a.step_allocated > newest) newest = a.step_allocated;
    ++count;
    bytes += a.bytes;
    steps.push_back(run_gap_ns > 0 ? a.ts_ns : a.step_allocated);
  }
  uint32_t Distinct() {
    std::sort(steps.begin(), steps.end());
    if (run_gap_ns <= 0) {
      return static_cast<uint32_t>(std::unique(steps.begin(), steps.end()) - steps.begin());
    }
    uint32_t runs = steps.empty() ? 0 : 1;
    for (size_t i = 1; i < steps.size(); ++i) runs += steps[i] - steps[i - 1] > run_gap_ns;
    return runs;
  }
};

// `run_bucket_ns` > 0 for a job without step markers: the runs of a phase that left memory are
// told apart by time, allocations more than half a bucket (a window of whole steps, where the
// job's buckets are read so) apart being separate runs. Every step is 0 there, so the KV cache
// each rollout kept read as one run's, listed after the optimizer's state; counted by bucket,
// one step() across a bucket's end read as two runs.
void FindCandidates(const RankLiveSet& set, int64_t warmup_end,
                    const std::vector<int64_t>* rank_steps, int64_t run_bucket_ns,
                    const LeakParams& params, LeakReport& report) {
  // Step boundaries an allocation lived across: the rank's steps begun after the one it was
  // made in, up to the moment read. Step numbers may jump (markers every 10 iterations), so
  // their difference would count one boundary as ten.
  const auto boundaries = [&](int64_t allocated) -> int64_t {
    if (rank_steps == nullptr) return set.at_step - allocated;
    return std::upper_bound(rank_steps->begin(), rank_steps->end(), set.at_step) -
           std::upper_bound(rank_steps->begin(), rank_steps->end(), allocated);
  };
  std::map<std::pair<std::string, std::string>, Agg> candidates;
  std::map<std::tuple<std::string, std::string, std::string>, Agg> survivors;
  // Without step markers every allocation is "step 0", the moment's too: an open phase's
  // allocations all read as its open run's own, and inside a rollout none of the earlier
  // rollouts' leftovers was found. Its open run is then its latest run by time (allocations
  // within half a bucket of the next): a run that has not allocated yet takes the run before
  // it for its own, which hides that one run's leftovers, not every run's.
  std::map<std::string, int64_t> open_run_from_ns;  // phase -> its open run's first allocation
  if (run_bucket_ns > 0) {
    std::map<std::string, std::vector<int64_t>> times;
    for (const LiveAllocation& a : set.allocations) {
      if (!a.phase.empty() && InPhase(set.open_phases, a.phase)) times[a.phase].push_back(a.ts_ns);
    }
    for (auto& [phase, ts] : times) {
      std::sort(ts.begin(), ts.end());
      size_t first = ts.size() - 1;
      while (first > 0 && ts[first] - ts[first - 1] <= run_bucket_ns / 2) --first;
      open_run_from_ns[phase] = ts[first];
    }
  }
  const auto in_open_run = [&](const LiveAllocation& a) {
    if (!InPhase(set.open_phases, a.phase)) return false;
    if (run_bucket_ns <= 0) return a.step_allocated >= set.at_step;
    auto it = open_run_from_ns.find(a.phase);
    return it == open_run_from_ns.end() || a.ts_ns >= it->second;
  };
  for (const LiveAllocation& a : set.allocations) {
    // Memory from before the trace was "allocated" at its first moment only on paper.
    if (a.tag != kBeforeTraceTag && a.step_allocated >= warmup_end &&
        boundaries(a.step_allocated) >= static_cast<int64_t>(params.min_boundaries)) {
      candidates[{a.tag, a.source}].Add(a);
    }
    if (!a.phase.empty() && !in_open_run(a)) {
      Agg& agg = survivors[{a.phase, a.tag, a.source}];
      agg.run_gap_ns = run_bucket_ns / 2;
      agg.Add(a);
    }
  }
  std::vector<LeakCandidate> mine;
  for (auto& [key, agg] : candidates) {
    LeakCandidate c;
    c.rank = set.rank;
    c.tag = key.first;
    c.source = key.second;
    c.count = agg.count;
    c.bytes = agg.bytes;
    c.oldest_step = agg.oldest;
    c.newest_step = agg.newest;
    c.distinct_steps = agg.Distinct();
    c.at_step = set.at_step;
    c.attempt = set.attempt;
    mine.push_back(std::move(c));
  }
  std::sort(mine.begin(), mine.end(),
            [](const LeakCandidate& a, const LeakCandidate& b) { return a.bytes > b.bytes; });
  if (mine.size() > params.top_n) mine.resize(params.top_n);
  report.candidates.insert(report.candidates.end(), mine.begin(), mine.end());
  for (auto& [key, agg] : survivors) {
    if (agg.bytes < params.min_phase_bytes) continue;
    PhaseSurvivor p;
    p.rank = set.rank;
    std::tie(p.phase, p.tag, p.source) = key;
    p.count = agg.count;
    p.bytes = agg.bytes;
    p.oldest_step = agg.oldest;
    p.at_step = set.at_step;
    p.attempt = set.attempt;
    p.open_phases = set.open_phases;
    p.distinct_steps = agg.Distinct();
    report.phase_survivors.push_back(std::move(p));
  }
}

void FindResidues(const JobTimeline& job, const RankTimeline& rank, const LeakParams& params,
                  LeakReport& report) {
  // Per phase id: the tag ids holding its memory, and the per-step residues.
  struct PerPhase {
    std::vector<NameId> tags;
    uint32_t phase_steps = 0;
    std::vector<double> residues;
  };
  std::map<NameId, PerPhase> phases;
  for (size_t i = std::min<size_t>(params.warmup_steps, rank.steps.size()); i < rank.steps.size();
       ++i) {
    const StepPoint& p = rank.steps[i];
    for (const GroupBytes& ph : p.by_phase()) {
      // Still running when the step (time bucket) ended: its memory is not yet left behind.
      if (ph.open) continue;
      auto [it, inserted] = phases.try_emplace(ph.name);
      PerPhase& per = it->second;
      if (inserted) {
        const std::string& phase = job.names.Name(ph.name);
        for (NameId id = 1; id < job.names.size(); ++id) {
          if (TagOfPhase(job.names.Name(id), phase)) per.tags.push_back(id);
        }
      }
      ++per.phase_steps;
      uint64_t residue = 0;
      for (const GroupBytes& t : p.by_tag()) {
        if (std::find(per.tags.begin(), per.tags.end(), t.name) != per.tags.end()) {
          residue += t.live_bytes;
        }
      }
      if (residue >= params.min_phase_bytes) per.residues.push_back(static_cast<double>(residue));
    }
  }
  for (auto& [name, per] : phases) {
    // As many as leaks.h promises, however few steps the phase closed in: one bucket's end in
    // a job without step markers (a phase open at all the others) is no pattern.
    if (per.residues.empty() || per.residues.size() < params.min_residue_steps) continue;
    PhaseResidue r;
    r.rank = rank.rank;
    r.phase = job.names.Name(name);
    r.phase_steps = per.phase_steps;
    r.residue_steps = static_cast<uint32_t>(per.residues.size());
    r.last_residue_bytes = ToBytes(per.residues.back());
    r.max_residue_bytes = ToBytes(*std::max_element(per.residues.begin(), per.residues.end()));
    r.median_residue_bytes = ToBytes(Median(per.residues));
    report.phase_residues.push_back(std::move(r));
  }
}

}  // namespace

absl::string_view CurveClassName(CurveClass c) {
  switch (c) {
    case CurveClass::kPlateau:
      return "plateau";
    case CurveClass::kSpikes:
      return "spikes";
    case CurveClass::kLeak:
      return "leak";
    case CurveClass::kTooShort:
      return "too-short";
  }
  return "plateau";
}

LeakReport FindLeaks(const JobTimeline& job, absl::Span<const RankLiveSet> live,
                     const LeakParams& params, const JobStepMetrics* steps) {
  LeakReport report;
  report.job_id = job.job_id;
  report.params = params;
  report.bucket_ns = job.time_axis ? job.bucket_ns : 0;
  std::vector<const RankTimeline*> ranks = SelectRanks(job, params.attempt);
  report.ranks = static_cast<uint32_t>(ranks.size());
  TheilSen fitter(params.max_pairs);
  // Per rank and attempt, the first step after warm-up: allocations from it on can be
  // candidates. Every attempt's: a live set read at a moment before a rank's restart is of the
  // attempt that held it (the collector's leaks --at), whose steps are its own.
  using RankAttempt = std::pair<uint32_t, uint32_t>;
  absl::flat_hash_map<RankAttempt, int64_t> warmup_end;
  std::map<RankAttempt, std::vector<int64_t>> rank_steps;  // step numbers, ascending
  const auto note_warmup = [&](RankAttempt rank, size_t count, auto step_at) {
    if (params.warmup_steps < count) {
      warmup_end[rank] = step_at(params.warmup_steps);
    } else if (count > 0) {
      warmup_end[rank] = step_at(count - 1) + 1;
    }
    std::vector<int64_t>& steps_of = rank_steps[rank];
    for (size_t i = 0; i < count; ++i) steps_of.push_back(step_at(i));
  };
  // A running rank's step in progress has begun: the boundary into it is one a live
  // allocation crossed (without it, a live job's candidates came out a step short).
  if (!job.time_axis) {
    for (const RankTimeline& r : job.ranks) {
      note_warmup({r.rank, r.attempt}, r.row_count(), [&](size_t i) { return r.row(i).step; });
    }
  } else if (steps != nullptr && !steps->time_axis) {
    for (const RankStepMetrics& r : steps->ranks) {
      note_warmup({r.rank, r.attempt}, r.row_count(), [&](size_t i) { return r.step_at(i); });
    }
  }
  for (const RankTimeline* r : ranks) {
    if (params.rank.has_value() && r->rank != *params.rank) continue;
    report.curves.push_back(Classify(*r, params, fitter));
    if (report.curves.back().curve == CurveClass::kLeak) ++report.leaking_ranks;
    FindResidues(job, *r, params, report);
  }
  for (const RankLiveSet& set : live) {
    if (params.rank.has_value() && set.rank != *params.rank) continue;
    auto it = warmup_end.find({set.rank, set.attempt});
    // A time-axis job without its steps: no warm-up to count from, so no candidates (survivors
    // do not need one).
    const int64_t candidates_from = it != warmup_end.end() ? it->second
                                    : job.time_axis        ? std::numeric_limits<int64_t>::max()
                                                           : int64_t{params.warmup_steps};
    auto steps_of = rank_steps.find({set.rank, set.attempt});
    FindCandidates(set, candidates_from, steps_of != rank_steps.end() ? &steps_of->second : nullptr,
                   job.time_axis && steps_of == rank_steps.end() ? job.bucket_ns : 0, params,
                   report);
  }
  std::stable_sort(report.candidates.begin(), report.candidates.end(),
                   [](const LeakCandidate& a, const LeakCandidate& b) { return a.rank < b.rank; });
  // Memory each run of a phase adds to is what an RL user hunts; what the first run made once
  // (optimizer state) is usually meant to stay, however big.
  std::sort(
      report.phase_survivors.begin(), report.phase_survivors.end(),
      [](const PhaseSurvivor& a, const PhaseSurvivor& b) {
        return std::make_tuple(b.distinct_steps > 1, b.bytes, a.rank, a.phase, a.tag, a.source) <
               std::make_tuple(a.distinct_steps > 1, a.bytes, b.rank, b.phase, b.tag, b.source);
      });
  return report;
}

}  // namespace memtrace::analysis
