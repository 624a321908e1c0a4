#include "query/analysis/diverged.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "query/analysis/robust_stats.h"
#include "query/analysis/units.h"

namespace memtrace::analysis {
namespace {

constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();

double Threshold(const DivergenceParams& p, double cohort_median) {
  return std::max(static_cast<double>(p.min_excess_bytes),
                  p.min_excess_fraction * std::fabs(cohort_median));
}

double RobustZ(double deviation, double scale) {
  if (scale > 0) return deviation / scale;
  if (deviation == 0) return 0;
  return deviation > 0 ? std::numeric_limits<double>::infinity()
                       : -std::numeric_limits<double>::infinity();
}

uint64_t ToBytes(double v) { return v <= 0 ? 0 : static_cast<uint64_t>(std::llround(v)); }

// Per rank and grid step, rank-major, as few bytes as the test needs: at 1024 ranks x 200 steps
// these arrays are most of the memory a cold query touches first.
struct Grid {
  // A rank's own first `warmup_steps` points are left out, as if it had none there (as leaks,
  // headroom and peak count warm-up): a rank that restarted (a Ray actor restarted alone) or
  // joined late warms up again where the others are long past theirs, and its warm-up, taken
  // for its baseline, read as a divergence. No step before the job's warmup_steps-th has a value.
  Grid(const std::vector<const RankStepMetrics*>& selected, Metric metric, uint32_t warmup_steps)
      : ranks(selected),
        steps(BuildStepGrid(selected)),
        R(selected.size()),
        S(steps.steps.size()),
        value(R * S, kMissing) {
    for (size_t r = 0; r < R; ++r) {
      for (size_t i = warmup_steps; i < ranks[r]->size(); ++i) {
        value[r * S + steps.index[r][i]] = static_cast<double>(ranks[r]->Value(i, metric));
      }
    }
  }

  const std::vector<const RankStepMetrics*>& ranks;
  const StepGrid steps;
  const size_t R;  // ranks
  const size_t S;  // grid steps
  // Absolute metric; NaN where the rank has no point or is in its own warm-up.
  std::vector<double> value;
};

// Each rank's own baseline: its level at the start of its first baseline_steps points after
// warm-up, read off their Theil-Sen line when they lie on one. A rank that was already rising then
// (a leak from step 5) is measured from where it started; their median put its baseline mid-rise,
// which hid the first steps of the leak and reported the rest as an offset it never had. `change`:
// how much that line moved over those points. NaN for a rank with no point after warm-up (it
// started late, died early, or has no rows yet): it has no baseline, and is compared nowhere.
// `span`: the grid steps those points cover, NaN with the change.
std::vector<double> RankBaselines(const Grid& g, const DivergenceParams& params,
                                  std::vector<double>* change, std::vector<double>* span) {
  std::vector<double> baseline(g.R, 0);
  change->assign(g.R, 0);
  span->assign(g.R, kMissing);
  std::vector<double> xs, window;
  TheilSen fitter;
  for (size_t r = 0; r < g.R; ++r) {
    xs.clear();
    window.clear();
    for (size_t s = params.warmup_steps; s < g.S && window.size() < params.baseline_steps; ++s) {
      if (std::isnan(g.value[r * g.S + s])) continue;
      xs.push_back(static_cast<double>(s));
      window.push_back(g.value[r * g.S + s]);
    }
    if (window.size() < 3) {
      baseline[r] = window.empty() ? kMissing : MedianInPlace(absl::MakeSpan(window));
      // Too few points to see a change: an offset could not be told from a leak (FindOffsets).
      (*change)[r] = kMissing;
      continue;
    }
    (*span)[r] = xs.back() - xs.front();
    const TrendFit line = fitter.Fit(xs, window);
    // A level that stepped inside the window (an allocation kept from step 7 on) is no line:
    // the line through it starts below the rank's real start and ends above it, which dated a
    // divergence at step 8 back to the window's first step with a fraction of its excess. The
    // level at the start is then the median of the first points, the change that of the last
    // points minus it.
    double worst_residual = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      worst_residual =
          std::max(worst_residual, std::fabs(window[i] - (line.intercept + line.slope * xs[i])));
    }
    if (worst_residual <= Threshold(params, Median(window)) / 4) {
      baseline[r] = line.intercept + line.slope * xs.front();
      (*change)[r] = line.slope * (xs.back() - xs.front());
      continue;
    }
    std::vector<double> first(window.begin(), window.begin() + 3);
    std::vector<double> last(window.end() - 3, window.end());
    baseline[r] = MedianInPlace(absl::MakeSpan(first));
    (*change)[r] = MedianInPlace(absl::MakeSpan(last)) - baseline[r];
  }
  return baseline;
}

// Ranks whose baseline sits away from the cohort's: they always held a different amount. A rank
// whose baseline steps already rose by a divergence's worth more than the cohort's did was
// leaking before the comparison began, which is no offset (growth all ranks share moves none of
// them apart).
// Returns, per offset found (in report.offsets' order), how far that rank's baseline steps moved
// beyond the cohort's, in units of the offset threshold, on the offset's side.
std::vector<double> FindOffsets(const Grid& g, const std::vector<double>& baseline,
                                const std::vector<double>& change, const DivergenceParams& params,
                                DivergenceReport& report) {
  std::vector<double> drift;
  std::vector<double> baselines, changes;
  for (size_t r = 0; r < g.R; ++r) {
    if (std::isnan(baseline[r])) continue;
    baselines.push_back(baseline[r]);
    if (!std::isnan(change[r])) changes.push_back(change[r]);
  }
  if (baselines.size() < 3) return drift;
  Spread b = RobustSpread(baselines);
  const double threshold = Threshold(params, b.median);
  const double cohort_change = changes.empty() ? 0 : Median(changes);
  for (size_t r = 0; r < g.R; ++r) {
    // A rank with too few baseline points to show whether it was rising is not called offset: a
    // leak from step 1 seen at 1 step read "always held +768 MiB".
    if (std::isnan(baseline[r]) || std::isnan(change[r])) continue;
    const double offset = baseline[r] - b.median;
    if (std::fabs(change[r] - cohort_change) >= threshold) continue;
    if (std::fabs(offset) >= threshold && std::fabs(RobustZ(offset, b.scale)) >= params.min_z) {
      report.offsets.push_back({g.ranks[r]->rank, ToBytes(baseline[r]), ToBytes(b.median),
                                static_cast<int64_t>(std::llround(offset))});
      drift.push_back((change[r] - cohort_change) * (offset > 0 ? 1 : -1) / threshold);
    }
  }
  return drift;
}

// An offset of a rank that then diverged on the same side, and whose baseline steps already
// moved that way by a quarter of the threshold more than the cohort's, is what the rank leaked
// before the comparison began (a leak too slow for FindOffsets' own test of its change), not
// an amount it always held: the report said both of one leak.
void DropOffsetsOfRanksAlreadyDiverging(const std::vector<double>& drift,
                                        DivergenceReport& report) {
  std::vector<RankOffset> kept;
  for (size_t i = 0; i < report.offsets.size(); ++i) {
    const RankOffset& o = report.offsets[i];
    const int32_t side = o.offset_bytes > 0 ? 1 : -1;
    const bool diverged_so = std::any_of(
        report.diverged.begin(), report.diverged.end(),
        [&](const RankDivergence& d) { return d.rank == o.rank && d.direction == side; });
    if (diverged_so && drift[i] > 0.25) continue;
    kept.push_back(o);
  }
  report.offsets = std::move(kept);
}

// What a step's ranks are compared with: a change since baseline, the noise around it, and the
// metric's median among the ranks it comes from (the report's "cohort" column).
struct Reference {
  double change = 0;
  double scale = 0;
  double value = 0;
  // The ranks split in two and the reference is the group that kept its baseline: how many.
  uint32_t split_ranks = 0;
};

// Vectors ReferenceOf reuses from step to step (a 2000-step job asks 2000 times).
struct ReferenceScratch {
  std::vector<double> nth, low_rel, high_rel, low_value, high_value;
  std::vector<size_t> order;
};

// Most ranks moved since their baselines (six of eight leak), away from a few that kept theirs:
// compared with the median, those few read as diverged below (the plot drew a healthy rank red),
// and leaks begun one rank after another spread the movers so wide that the latest did not stand
// out (its onset read 12 steps late). The few are the reference then: the ranks within half the
// threshold of the one that moved least, when that one began with the job (a rank restarted alone
// has a baseline of its own), the median moved half a threshold away from it (a whole one let the
// fourth of eight ranks that leaked one after another move the median of eight a quarter GiB
// itself, and it was named a step late), a gap of half a threshold, and of min_z times their own
// spread, parts them from the rest, and, alone, it kept its baseline (within a quarter of the
// threshold). Without that gap (every rank growing alike
// with noise, whose least-moved rank is only the low end of it) the median stays the reference.
std::optional<Reference> KeptBaseline(const std::vector<double>& rel,
                                      const std::vector<double>& value, double median,
                                      double threshold, double min_z,
                                      const std::vector<uint8_t>* can_anchor,
                                      ReferenceScratch& scratch) {
  if (can_anchor == nullptr) return std::nullopt;
  const size_t n = rel.size();
  size_t least = n;
  for (size_t i = 0; i < n; ++i) {
    if ((*can_anchor)[i] && (least == n || std::fabs(rel[i]) < std::fabs(rel[least]))) least = i;
  }
  if (least == n) return std::nullopt;
  const double anchor = rel[least];
  if (std::fabs(median - anchor) < threshold / 2) return std::nullopt;
  std::vector<double>& stayed_rel = scratch.low_rel;
  std::vector<double>& stayed_value = scratch.low_value;
  stayed_rel.clear();
  stayed_value.clear();
  double farthest_stayed = 0, nearest_mover = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < n; ++i) {
    const double distance = std::fabs(rel[i] - anchor);
    if (distance > threshold / 2) {
      nearest_mover = std::min(nearest_mover, distance);
      continue;
    }
    farthest_stayed = std::max(farthest_stayed, distance);
    stayed_rel.push_back(rel[i]);
    stayed_value.push_back(value[i]);
  }
  // One rank alone must itself have kept its baseline: one that freed memory while every rank
  // grew has "moved least" too. Several may have moved together (a floor every rank took at a
  // checkpoint step).
  if (stayed_rel.size() < 2 && std::fabs(anchor) > threshold / 4) return std::nullopt;
  const Spread stayed = RobustSpread(stayed_rel);
  const double gap = nearest_mover - farthest_stayed;
  if (gap < threshold / 2 || gap < min_z * stayed.scale) return std::nullopt;
  return Reference{stayed.median, stayed.scale, Median(stayed_value),
                   static_cast<uint32_t>(stayed_rel.size())};
}

// Usually every rank's median. But when a third or more of the ranks sit on each side of a gap
// wider than the threshold and than the noise within either side (the widest such gap), the median
// lands in the gap (half the ranks leak: none is outside it, "no rank diverged") or on the side
// that moved (two of three leak: the healthy one read as diverged below). The reference is then the
// side whose change since baseline is nearer 0, the one that did not move. A minority under a third
// is left to the median, which names it, unless it is what stayed (KeptBaseline).
// `can_anchor` (null when ranks are compared by absolute values) marks the ranks whose baseline is
// the job's: present from its first compared steps.
Reference ReferenceOf(const std::vector<double>& rel, const std::vector<double>& value,
                      double value_median, double threshold, double min_z,
                      const std::vector<uint8_t>* can_anchor, ReferenceScratch& scratch) {
  const Spread everyone = RobustSpread(rel);
  const Reference all{everyone.median, everyone.scale, value_median, 0};
  const size_t n = rel.size();
  const size_t side = (n + 2) / 3;  // the fewest ranks a side may hold
  if (std::optional<Reference> kept =
          KeptBaseline(rel, value, everyone.median, threshold, min_z, can_anchor, scratch)) {
    return *kept;
  }
  // The gap lies between the side-th smallest change and the side-th largest: at most steps
  // those are closer than the threshold, and the sort below is skipped (O(n)).
  std::vector<double>& nth = scratch.nth;
  nth.assign(rel.begin(), rel.end());
  std::nth_element(nth.begin(), nth.begin() + (side - 1), nth.end());
  const double lowest_cut = nth[side - 1];
  std::nth_element(nth.begin(), nth.begin() + (n - side), nth.end());
  if (nth[n - side] - lowest_cut < threshold) return all;
  std::vector<size_t>& order = scratch.order;
  order.resize(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rel[a] < rel[b]; });
  // The widest gap with at least `side` ranks on each side of it.
  size_t cut = 0;
  double gap = 0;
  for (size_t i = side; i + side <= n; ++i) {
    const double g = rel[order[i]] - rel[order[i - 1]];
    if (g > gap) {
      gap = g;
      cut = i;
    }
  }
  if (gap < threshold) return all;
  std::vector<double>& low_rel = scratch.low_rel;
  std::vector<double>& high_rel = scratch.high_rel;
  std::vector<double>& low_value = scratch.low_value;
  std::vector<double>& high_value = scratch.high_value;
  low_rel.clear();
  high_rel.clear();
  low_value.clear();
  high_value.clear();
  for (size_t i = 0; i < n; ++i) {
    const bool low = i < cut;
    (low ? low_rel : high_rel).push_back(rel[order[i]]);
    (low ? low_value : high_value).push_back(value[order[i]]);
  }
  const Spread low = RobustSpread(low_rel), high = RobustSpread(high_rel);
  if (gap < min_z * std::max(low.scale, high.scale)) return all;
  const bool low_stayed = std::fabs(low.median) != std::fabs(high.median)
                              ? std::fabs(low.median) < std::fabs(high.median)
                              : low_rel.size() >= high_rel.size();
  const Spread& stayed = low_stayed ? low : high;
  return Reference{stayed.median, stayed.scale, Median(low_stayed ? low_value : high_value),
                   static_cast<uint32_t>(low_stayed ? low_rel.size() : high_rel.size())};
}

// Each cell's deviation from the cohort (NaN: the rank has no value or the step is not
// compared), and +1 / -1 when outside the cohort on that side, 0 inside. Per step: the byte
// threshold, the reference's spread (from which a cell's robust z follows) and median, and
// how many ranks it was when the ranks split (0: all of them).
struct CohortDeviation {
  std::vector<double> deviation;
  std::vector<int8_t> flag;
  std::vector<double> threshold, scale, cohort_median;
  std::vector<uint32_t> split_ranks;
};

// Compares every rank with the cohort in each step after warm-up that has 3 ranks; sets the
// report's first/last compared step and their count.
CohortDeviation CompareWithCohort(const Grid& g, const std::vector<double>& baseline,
                                  const DivergenceParams& params, DivergenceReport& report) {
  CohortDeviation c;
  c.deviation.assign(g.R * g.S, kMissing);
  c.flag.assign(g.R * g.S, 0);
  c.threshold.assign(g.S, 0);
  c.scale.assign(g.S, 0);
  c.cohort_median.assign(g.S, kMissing);
  c.split_ranks.assign(g.S, 0);
  std::vector<double> rel, work, work_copy;
  ReferenceScratch scratch;
  std::vector<size_t> members;
  // Ranks whose baseline is the job's: their first compared step is within the job's first
  // baseline steps (a rank restarted alone, or joined late, warmed up again and has its own).
  std::vector<size_t> first_valued(g.R, g.S);
  for (size_t r = 0; r < g.R; ++r) {
    for (size_t s = 0; s < g.S && first_valued[r] == g.S; ++s) {
      if (!std::isnan(g.value[r * g.S + s])) first_valued[r] = s;
    }
  }
  const size_t job_first = *std::min_element(first_valued.begin(), first_valued.end());
  std::vector<uint8_t> can_anchor;
  bool first = true;
  for (size_t s = params.warmup_steps; s < g.S; ++s) {
    rel.clear();
    work.clear();
    members.clear();
    can_anchor.clear();
    for (size_t r = 0; r < g.R; ++r) {
      double v = g.value[r * g.S + s];
      if (std::isnan(v)) continue;
      members.push_back(r);
      rel.push_back(v - baseline[r]);
      work.push_back(v);
      can_anchor.push_back(first_valued[r] <= job_first + params.baseline_steps);
    }
    if (members.size() < 3) continue;
    // The threshold scales with every rank's median, split or not: the bar stays where it was.
    work_copy.assign(work.begin(), work.end());  // `work` stays in rank order for ReferenceOf
    const double value_median = MedianInPlace(absl::MakeSpan(work_copy));
    c.threshold[s] = Threshold(params, value_median);
    const Reference ref = ReferenceOf(rel, work, value_median, c.threshold[s], params.min_z,
                                      params.relative_to_baseline ? &can_anchor : nullptr, scratch);
    c.cohort_median[s] = ref.value;
    c.scale[s] = ref.scale;
    c.split_ranks[s] = ref.split_ranks;
    for (size_t m = 0; m < members.size(); ++m) {
      const size_t at = members[m] * g.S + s;
      const double d = rel[m] - ref.change;
      c.deviation[at] = d;
      if (std::fabs(d) >= c.threshold[s] && std::fabs(RobustZ(d, c.scale[s])) >= params.min_z) {
        c.flag[at] = d > 0 ? 1 : -1;
      }
    }
    if (first) report.first_step = g.steps.steps[s];
    first = false;
    report.last_step = g.steps.steps[s];
    ++report.steps_compared;
  }
  return c;
}

// The longest run of flagged steps of a job in which none reached k: what "no rank diverged"
// must not hide (a rank out of the cohort for 78 steps under --persistence 200).
struct ShortRun {
  uint32_t rank = 0;
  int64_t from_step = 0;
  uint32_t flagged_steps = 0;
};

// Rank r's divergence: the first run of k flagged compared steps on one side, if any. Without
// one, `longest` becomes this rank's longest run when it is longer.
std::optional<RankDivergence> FindOnset(const Grid& g, const CohortDeviation& c, size_t r,
                                        uint32_t k, ShortRun* longest) {
  const size_t S = g.S;
  // Compared steps of this rank, in order; a step the rank (or the cohort) lacks is skipped:
  // it neither extends nor breaks a run.
  const double* dev = &c.deviation[r * S];
  const int8_t* flagged = &c.flag[r * S];
  const std::vector<double>& threshold = c.threshold;
  std::vector<size_t> seq;
  for (size_t s = 0; s < S; ++s) {
    if (!std::isnan(dev[s])) seq.push_back(s);
  }
  // A run counts flagged steps on one side. A step that is not flagged but where the rank is
  // still more than a quarter of the threshold out on that side (e.g. the cohort's spread
  // widened because other ranks spiked in that step) neither counts nor breaks it; being back
  // near the cohort, or flagged on the other side, breaks it.
  size_t run_start = 0, run_len = 0;
  int8_t run_flag = 0;
  std::optional<size_t> onset_pos;
  for (size_t i = 0; i < seq.size() && !onset_pos.has_value(); ++i) {
    const size_t s = seq[i];
    if (flagged[s] != 0 && flagged[s] == run_flag) {
      ++run_len;
    } else if (flagged[s] == 0 && run_flag != 0 && dev[s] * run_flag > threshold[s] / 4) {
      continue;
    } else {
      run_flag = flagged[s];
      run_start = i;
      run_len = flagged[s] != 0 ? 1 : 0;
    }
    if (run_len >= k) onset_pos = run_start;
    if (run_len > longest->flagged_steps) {
      *longest =
          ShortRun{g.ranks[r]->rank, g.steps.steps[seq[run_start]], static_cast<uint32_t>(run_len)};
    }
  }
  if (!onset_pos.has_value()) return std::nullopt;
  // The run from the onset: how long it lasted (with the same tolerance).
  size_t run_end = *onset_pos;
  const int8_t side = flagged[seq[*onset_pos]];
  for (size_t i = *onset_pos + 1; i < seq.size(); ++i) {
    const size_t s = seq[i];
    if (flagged[s] == side) {
      run_end = i;
    } else if (flagged[s] != 0 || dev[s] * side <= threshold[s] / 4) {
      break;
    }
  }

  const RankStepMetrics& rank = *g.ranks[r];
  const std::vector<int64_t>& steps = g.steps.steps;
  const size_t s_onset = seq[*onset_pos];
  RankDivergence d;
  d.rank = rank.rank;
  d.attempt = rank.attempt;
  d.host = rank.host;
  const size_t s = seq[*onset_pos];
  d.onset_step = steps[s];
  // The rank's point at the onset: its steps ascend, the grid's position of each is indexed.
  const std::vector<uint32_t>& positions = g.steps.index[r];
  const size_t i = std::lower_bound(positions.begin(), positions.end(), s) - positions.begin();
  d.onset_ns = rank.start_ns[i];
  d.value_bytes = ToBytes(g.value[r * S + s]);
  d.cohort_median_bytes = ToBytes(c.cohort_median[s]);
  d.excess_bytes = static_cast<int64_t>(std::llround(dev[s]));
  d.robust_z = RobustZ(dev[s], c.scale[s]);
  d.direction = side;
  d.run_steps = static_cast<uint32_t>(steps[seq[run_end]] - steps[s] + 1);
  // Where it departed: back from the onset while it stays a quarter of the threshold out, from
  // the ranks the onset was measured against. When the ranks had split there, those are the
  // group that kept its baseline (near the onset's reference); before the split showed, each
  // step's reference was every rank's median, which a leaking majority pulled along, and the
  // departure read as the onset itself (35 where one leaking rank of eight read 32).
  std::vector<size_t> stayed;
  if (c.split_ranks[s_onset] > 0) {
    for (size_t k = 0; k < g.R; ++k) {
      const double d = c.deviation[k * S + s_onset];
      if (!std::isnan(d) && std::fabs(d) < threshold[s_onset]) stayed.push_back(k);
    }
  }
  std::vector<double> scratch;
  const auto departed = [&](size_t step) {
    double from = 0;
    if (!stayed.empty()) {
      scratch.clear();
      for (size_t k : stayed) {
        const double d = c.deviation[k * S + step];
        if (!std::isnan(d)) scratch.push_back(d);
      }
      if (!scratch.empty()) from = MedianInPlace(absl::MakeSpan(scratch));
    }
    return (dev[step] - from) * side > threshold[step] / 4;
  };
  size_t dep = *onset_pos;
  while (dep > 0 && departed(seq[dep - 1])) --dep;
  d.departure_step = steps[seq[dep]];
  size_t last = seq.back();
  d.last_step = steps[last];
  d.last_value_bytes = ToBytes(g.value[r * S + last]);
  d.last_cohort_median_bytes = ToBytes(c.cohort_median[last]);
  d.last_excess_bytes = static_cast<int64_t>(std::llround(dev[last]));
  return d;
}

// kTooFewSteps and its sentence: "no step after the 5 warm-up steps had 3 ranks to compare (job
// has 4 steps)", or with `why` after "only 2 steps ...". Time buckets for a job without step
// markers.
void TooFewSteps(size_t steps_in_job, absl::string_view why, DivergenceReport& report) {
  report.status = DivergenceStatus::kTooFewSteps;
  const char* key = report.bucket_ns > 0 ? "time bucket" : "step";
  const uint32_t n = report.steps_compared;
  report.message =
      absl::StrCat(n == 0 ? "no " : absl::StrCat("only ", n, " "), key, n == 0 || n == 1 ? "" : "s",
                   " after the ", report.params.warmup_steps, " warm-up ", key,
                   "s had 3 ranks to compare", why, " (job has ", steps_in_job, " ", key, "s)");
}

// Orders the diverged ranks by onset and says what was found.
void Summarize(const ShortRun& longest, size_t steps_in_job, DivergenceReport& report) {
  std::sort(report.diverged.begin(), report.diverged.end(),
            [](const RankDivergence& a, const RankDivergence& b) {
              if (a.onset_step != b.onset_step) return a.onset_step < b.onset_step;
              if (a.departure_step != b.departure_step) return a.departure_step < b.departure_step;
              return a.rank < b.rank;
            });
  if (report.diverged.empty()) {
    report.status = DivergenceStatus::kNoneDiverged;
    report.message = absl::StrFormat(
        "no rank diverged: all %s stayed within the cohort over %s %s..%s",
        report.ranks_compared == report.ranks
            ? absl::StrCat(report.ranks, " ranks")
            : absl::StrCat(report.ranks_compared, " ranks compared (of ", report.ranks, ")"),
        report.bucket_ns > 0 ? "time buckets" : "steps",
        FormatKeyValue(report.first_step, report.bucket_ns),
        FormatKeyValue(report.last_step, report.bucket_ns));
    if (longest.flagged_steps >= 2) {
      // Out of it, but for fewer than --persistence compared steps in a row. (One step out is
      // a spike, which persistence is there to pass over.)
      const char* unit = report.bucket_ns > 0 ? "bucket" : "step";
      report.message = absl::StrFormat(
          "no rank diverged for %u compared %ss in a row (--persistence) over %ss %s..%s; the "
          "longest run out of the cohort was rank %u's: %u %s%s from %s",
          report.params.persistence_steps, unit, unit,
          FormatKeyValue(report.first_step, report.bucket_ns),
          FormatKeyValue(report.last_step, report.bucket_ns), longest.rank, longest.flagged_steps,
          unit, longest.flagged_steps == 1 ? "" : "s",
          FormatKey(longest.from_step, report.bucket_ns));
    } else if (report.steps_compared < std::max<uint32_t>(1, report.params.persistence_steps)) {
      // No rank can stay out for --persistence steps in a row in fewer: "all stayed within the
      // cohort over steps 6..6" claimed what was never tested.
      TooFewSteps(steps_in_job,
                  absl::StrCat(", fewer than --persistence ", report.params.persistence_steps,
                               ": no rank could be seen to diverge"),
                  report);
    }
  } else {
    const RankDivergence& d = report.diverged.front();
    report.status = DivergenceStatus::kDiverged;
    // Ranks that left at the same step, having departed at the same step, are first together:
    // "rank 0 diverged first ... 3 rank(s) followed" named one of four that left as one.
    std::vector<uint32_t> together;
    for (const RankDivergence& o : report.diverged) {
      if (o.onset_step == d.onset_step && o.departure_step == d.departure_step &&
          o.direction == d.direction) {
        together.push_back(o.rank);
      }
    }
    std::sort(together.begin(), together.end());
    std::string who = absl::StrCat("rank ", d.rank, " diverged first");
    if (together.size() > 1) {
      who = absl::StrCat("ranks ", absl::StrJoin(together.begin(), together.end() - 1, ", "),
                         " and ", together.back(), " diverged first, together");
    }
    const size_t followed = report.diverged.size() - together.size();
    report.message = absl::StrFormat(
        "%s, at %s (%s the cohort for %u %s); %s", who, FormatKey(d.onset_step, report.bucket_ns),
        d.direction > 0 ? "above" : "below", d.run_steps,
        report.bucket_ns > 0 ? "buckets" : "steps",
        followed == 0
            ? std::string("no other rank followed")
            : absl::StrCat(followed, " other rank", followed == 1 ? "" : "s", " followed"));
    if (d.departed_before_compared && report.params.warmup_steps > 0) {
      // A leak from step 1 reads "diverged at step 7": the steps before are warm-up, not
      // compared, and "first step examined" must not read as "began here".
      const char* unit = report.bucket_ns > 0 ? "bucket" : "step";
      absl::StrAppend(&report.message, "; rank ", d.rank, " was drifting from the first ", unit,
                      " compared, after the ", report.params.warmup_steps, " warm-up ", unit,
                      "s (--warmup): it may have begun earlier");
    }
  }
  if (!report.ranks_not_compared.empty()) {
    const size_t n = report.ranks_not_compared.size();
    absl::StrAppend(&report.message, "; ", n == 1 ? "rank " : "ranks ",
                    absl::StrJoin(report.ranks_not_compared, ","), " had no compared ",
                    report.bucket_ns > 0 ? "bucket" : "step",
                    " (too few after warm-up, or none shared with 2 other ranks)");
  }
}

// The ranks with a deviation from the cohort in some step, and the others.
void CountCompared(const Grid& g, const CohortDeviation& c, DivergenceReport& report) {
  for (size_t r = 0; r < g.R; ++r) {
    const double* dev = &c.deviation[r * g.S];
    if (std::any_of(dev, dev + g.S, [](double d) { return !std::isnan(d); })) {
      ++report.ranks_compared;
    } else {
      report.ranks_not_compared.push_back(g.ranks[r]->rank);
    }
  }
}

}  // namespace

DivergenceReport FindDivergence(const JobTimeline& job, const DivergenceParams& params) {
  return FindDivergence(StepMetricsOf(job), params);
}

DivergenceReport FindDivergence(const JobStepMetrics& job, const DivergenceParams& params) {
  DivergenceReport report;
  report.job_id = job.job_id;
  report.params = params;
  report.bucket_ns = job.time_axis ? job.bucket_ns : 0;
  std::vector<const RankStepMetrics*> ranks = SelectRanks(job, params.attempt);
  report.ranks = static_cast<uint32_t>(ranks.size());
  if (ranks.size() < 3) {
    report.status = DivergenceStatus::kTooFewRanks;
    report.message =
        absl::StrCat("a cohort needs at least 3 ranks; job '", job.job_id, "' has ", ranks.size());
    return report;
  }
  const Grid g(ranks, params.metric, params.warmup_steps);

  std::vector<double> baseline(g.R, 0);
  std::vector<double> offset_drift;
  std::vector<double> change;  // over each rank's baseline steps (relative_to_baseline)
  std::vector<double> span;    // the grid steps each change is over
  if (params.relative_to_baseline) {
    baseline = RankBaselines(g, params, &change, &span);
    offset_drift = FindOffsets(g, baseline, change, params, report);
  }
  const CohortDeviation cohort = CompareWithCohort(g, baseline, params, report);
  if (report.steps_compared == 0) {
    TooFewSteps(g.S, "", report);
    return report;
  }
  CountCompared(g, cohort, report);
  const uint32_t k = std::max<uint32_t>(1, params.persistence_steps);

  ShortRun longest;
  // A rank whose baseline steps already rose by a quarter of the byte threshold more than the
  // cohort's did was drifting when the comparison began: its onset is where the drift added up,
  // not where it began (a leak from step 1 read "diverged at step 8").
  std::vector<double> changes;
  for (double c : change) {
    if (!std::isnan(c)) changes.push_back(c);
  }
  const double cohort_change = changes.empty() ? 0 : MedianInPlace(absl::MakeSpan(changes));
  double first_threshold = 0;  // the first compared step's
  for (size_t s = params.warmup_steps; s < g.S && first_threshold == 0; ++s) {
    first_threshold = cohort.threshold[s];
  }
  // Each rank's rise into its first compared step from its last warm-up step, and the cohort's.
  std::vector<double> rise_into_first(g.R, kMissing), rises;
  for (size_t r = 0; r < g.R && params.warmup_steps > 0; ++r) {
    const RankStepMetrics& rank = *g.ranks[r];
    if (rank.size() <= params.warmup_steps) continue;
    rise_into_first[r] = static_cast<double>(rank.Value(params.warmup_steps, params.metric)) -
                         static_cast<double>(rank.Value(params.warmup_steps - 1, params.metric));
    rises.push_back(rise_into_first[r]);
  }
  const double cohort_rise = rises.empty() ? 0 : MedianInPlace(absl::MakeSpan(rises));
  for (size_t r = 0; r < g.R; ++r) {
    if (std::optional<RankDivergence> d = FindOnset(g, cohort, r, k, &longest)) {
      const double excess_change = r < change.size() && !std::isnan(change[r])
                                       ? (change[r] - cohort_change) * d->direction
                                       : kMissing;
      d->departed_before_compared = excess_change >= first_threshold / 4;
      // The baseline steps alone cannot tell a drift that began at the first compared step from
      // one that began before it: both lie on one line. The step before can: a rank that did
      // not rise into the first compared step, beyond the cohort, by half a step's drift began
      // drifting there (a leak from step 5 read "may have begun earlier" after 5 warm-up steps).
      if (d->departed_before_compared && !std::isnan(rise_into_first[r]) && r < span.size() &&
          span[r] > 0 &&
          (rise_into_first[r] - cohort_rise) * d->direction < 0.5 * excess_change / span[r]) {
        d->departed_before_compared = false;
      }
      report.diverged.push_back(*std::move(d));
    }
  }
  DropOffsetsOfRanksAlreadyDiverging(offset_drift, report);
  Summarize(longest, g.S, report);
  if (!report.diverged.empty()) {
    const std::vector<int64_t>& keys = g.steps.steps;
    const size_t s =
        std::lower_bound(keys.begin(), keys.end(), report.diverged[0].onset_step) - keys.begin();
    if (s < g.S && cohort.split_ranks[s] > 0) {
      const uint32_t stayed = cohort.split_ranks[s];
      absl::StrAppend(&report.message, " (the ranks split in two groups there: compared with ",
                      stayed == 1 ? "the one that kept its baseline"
                                  : absl::StrCat("the ", stayed, " that kept theirs"),
                      ")");
    }
  }
  return report;
}

}  // namespace memtrace::analysis
