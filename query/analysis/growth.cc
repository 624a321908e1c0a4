#include "query/analysis/growth.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "query/analysis/current_trend.h"
#include "query/analysis/robust_stats.h"

namespace memtrace::analysis {
namespace {

bool PerRank(GrowthBy by) {
  return by == GrowthBy::kRank || by == GrowthBy::kTagRank || by == GrowthBy::kSourceRank;
}

absl::Span<const GroupBytes> GroupsOf(const StepPoint& p, GrowthBy by) {
  return by == GrowthBy::kSource || by == GrowthBy::kSourceRank ? p.by_source() : p.by_tag();
}

// The growing ranks of one tag/source (or, for --by rank, of the job).
struct Aggregate {
  uint32_t ranks_with_group = 0;
  std::vector<RankGrowth> growing;
};

// Fits the growth of one rank's series `y` over steps `x`. A series that ever held bytes counts
// in `agg`'s ranks_with_group, growing or not; it joins its growing ranks when it rose by at
// least min_growth_bytes on a trend that still rises in its later half.
class GrowthFitter {
 public:
  explicit GrowthFitter(const GrowthParams& params)
      : params_(params),
        min_growth_(static_cast<double>(params.min_growth_bytes)),
        fitter_(params.max_pairs) {}

  void Fit(uint32_t rank, const std::vector<double>& x, const std::vector<double>& y,
           Aggregate& agg) {
    auto [lo, hi] = std::minmax_element(y.begin(), y.end());
    if (*hi > 0) ++agg.ranks_with_group;
    // Too short to fit is not examined: "nothing grows" would claim what was never tested.
    if (y.size() < params_.min_points) return;
    ++examined_;
    if (*hi - *lo < min_growth_) return;
    // The growth since it started: a leak that began late in the window has its own rate.
    // One jump, then flat, fits a rising line too; a growth keeps rising.
    RiseFit rise = FitRise(x, y, params_.min_points, min_growth_, params_.min_trend_z, fitter_);
    if (!rise.rising) return;
    // A flat start too short for FitCurrentTrend to split off (a tag that appeared a few steps
    // into the window) grew nothing: counting the line's rate over it read +34 GiB for 30.
    const CurrentTrend trend = PastShortFlatStart(x, y, rise.trend, params_.min_points, fitter_);
    const TrendFit& f = trend.fit;
    RankGrowth g;
    g.rank = rank;
    g.bytes_per_step = f.slope;
    g.growth_bytes = TrendGrowth(x, trend);
    // From where the growth is measured, so that last - first is what grew.
    const size_t from = GrowthStart(trend);
    g.first_bytes = static_cast<uint64_t>(y[from]);
    g.last_bytes = static_cast<uint64_t>(y.back());
    g.trend_z = f.trend_z;
    g.first_step = static_cast<int64_t>(x[from]);
    g.last_step = static_cast<int64_t>(x.back());
    agg.growing.push_back(g);
  }

  // Series fitted so far.
  uint32_t examined() const { return examined_; }

 private:
  const GrowthParams& params_;
  const double min_growth_;
  TheilSen fitter_;
  uint32_t examined_ = 0;
};

// Fits one rank's rows from `first_step` on: its metric for --by rank, else each tag's or
// source's live bytes (0 in steps where the group is absent). `x` and `series` are scratch.
// False when the rank has fewer than min_points rows from `first_step` on: none of its series
// could grow.
bool FitRank(const RankTimeline& r, int64_t first_step, const GrowthParams& params,
             GrowthFitter& fitter, std::vector<double>& x,
             absl::flat_hash_map<NameId, std::vector<double>>& series,
             std::map<NameId, Aggregate>& aggregates) {
  auto begin = std::lower_bound(r.steps.begin(), r.steps.end(), first_step,
                                [](const StepPoint& p, int64_t step) { return p.step < step; });
  size_t n = static_cast<size_t>(r.steps.end() - begin);
  if (n == 0) return false;
  const bool could_grow = n >= params.min_points;
  x.clear();
  for (auto it = begin; it != r.steps.end(); ++it) x.push_back(static_cast<double>(it->step));
  if (params.by == GrowthBy::kRank) {
    std::vector<double> y;
    y.reserve(n);
    for (auto it = begin; it != r.steps.end(); ++it) {
      y.push_back(static_cast<double>(MetricValue(*it, params.rank_metric)));
    }
    fitter.Fit(r.rank, x, y, aggregates[0]);
    return could_grow;
  }
  // Dense per-group series: a step where the group is absent held 0 bytes of it.
  for (auto& [name, y] : series) y.assign(n, 0.0);
  size_t i = 0;
  for (auto it = begin; it != r.steps.end(); ++it, ++i) {
    for (const GroupBytes& g : GroupsOf(*it, params.by)) {
      std::vector<double>& y = series[g.name];
      if (y.size() != n) y.assign(n, 0.0);
      y[i] = static_cast<double>(g.live_bytes);
    }
  }
  for (auto& [name, y] : series) {
    bool any = std::any_of(y.begin(), y.end(), [](double v) { return v != 0; });
    if (any) fitter.Fit(r.rank, x, y, aggregates[name]);
  }
  return could_grow;
}

// The report's rows for one group's growing ranks (sorted fastest first): one per rank for the
// per-rank groupings, else one with their total and median.
void AppendGroups(const std::string& name, Aggregate& agg, uint32_t cohort, GrowthBy by,
                  std::vector<GroupGrowth>* groups) {
  std::sort(agg.growing.begin(), agg.growing.end(), [](const RankGrowth& a, const RankGrowth& b) {
    return a.bytes_per_step > b.bytes_per_step;
  });
  GroupGrowth base;
  base.name = name;
  base.ranks_growing = static_cast<uint32_t>(agg.growing.size());
  base.ranks_with_group = agg.ranks_with_group;
  base.scope = base.ranks_growing == cohort ? GrowthScope::kAllRanks : GrowthScope::kSomeRanks;
  if (PerRank(by)) {
    for (const RankGrowth& g : agg.growing) {
      GroupGrowth one = base;
      one.rank = g.rank;
      one.total_bytes_per_step = one.median_bytes_per_step = g.bytes_per_step;
      one.ranks = {g};
      groups->push_back(std::move(one));
    }
    return;
  }
  std::vector<double> slopes;
  for (const RankGrowth& g : agg.growing) {
    base.total_bytes_per_step += g.bytes_per_step;
    slopes.push_back(g.bytes_per_step);
  }
  base.median_bytes_per_step = Median(slopes);
  base.ranks = agg.growing;
  groups->push_back(std::move(base));
}

}  // namespace

absl::string_view GrowthByName(GrowthBy by) {
  switch (by) {
    case GrowthBy::kTag:
      return "tag";
    case GrowthBy::kRank:
      return "rank";
    case GrowthBy::kTagRank:
      return "tag,rank";
    case GrowthBy::kSource:
      return "source";
    case GrowthBy::kSourceRank:
      return "source,rank";
  }
  return "tag";
}

GrowthReport FindGrowth(const JobTimeline& job, const GrowthParams& params) {
  GrowthReport report;
  report.job_id = job.job_id;
  report.by = params.by;
  report.params = params;
  report.bucket_ns = job.time_axis ? job.bucket_ns : 0;
  std::vector<const RankTimeline*> ranks = SelectRanks(job, params.attempt);
  report.ranks = static_cast<uint32_t>(ranks.size());
  if (ranks.empty()) return report;

  // The window, on the job's step grid: after warm-up, optionally only the last N steps.
  StepGrid grid = BuildStepGrid(ranks);
  if (grid.steps.size() <= params.warmup_steps) return report;
  size_t from = params.warmup_steps;
  if (params.window_steps > 0 && grid.steps.size() - from > params.window_steps) {
    from = grid.steps.size() - params.window_steps;
  }
  const int64_t first_step = grid.steps[from];
  report.first_step = first_step;
  report.last_step = grid.steps.back();

  GrowthFitter fitter(params);
  // Group name -> aggregate over ranks; for --by rank one aggregate under name 0.
  std::map<NameId, Aggregate> aggregates;
  std::vector<double> x;
  absl::flat_hash_map<NameId, std::vector<double>> series;
  // "All ranks" means all that could grow: a rank that died early, has not started its attempt
  // yet, or is still in its own warm-up has too few points, and would make growth every running
  // rank shares read as a leak on some.
  uint32_t in_window = 0;
  for (const RankTimeline* r : ranks) {
    // Warm-up is the rank's own first points, as in diverged and leaks: a rank that restarted or
    // joined late creates its optimizer state and caches again there.
    if (r->steps.size() <= params.warmup_steps) continue;
    const int64_t rank_from = std::max(first_step, r->steps[params.warmup_steps].step);
    if (FitRank(*r, rank_from, params, fitter, x, series, aggregates)) ++in_window;
  }
  report.groups_examined = fitter.examined();
  report.ranks_fitted = in_window;

  for (auto& [name, agg] : aggregates) {
    if (!agg.growing.empty()) {
      AppendGroups(job.names.Name(name), agg, in_window, params.by, &report.groups);
    }
  }
  std::stable_sort(report.groups.begin(), report.groups.end(),
                   [](const GroupGrowth& a, const GroupGrowth& b) {
                     return a.total_bytes_per_step > b.total_bytes_per_step;
                   });
  return report;
}

}  // namespace memtrace::analysis
