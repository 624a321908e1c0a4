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
  int64_t first_step = grid.steps[from];
  report.first_step = first_step;
  report.last_step = grid.steps.back();

  const double min_growth = static_cast<double>(params.min_growth_bytes);
  TheilSen fitter(params.max_pairs);
  // Group name -> aggregate over ranks; for --by rank one aggregate under name 0.
  std::map<NameId, Aggregate> aggregates;
  std::vector<double> x;
  absl::flat_hash_map<NameId, std::vector<double>> series;

  auto fit = [&](uint32_t rank, const std::vector<double>& y, Aggregate& agg) {
    ++report.groups_examined;
    auto [lo, hi] = std::minmax_element(y.begin(), y.end());
    if (*hi > 0) ++agg.ranks_with_group;
    if (y.size() < params.min_points || *hi - *lo < min_growth) return;
    // The growth since it started: a leak that began late in the window has its own rate.
    const CurrentTrend trend = FitCurrentTrend(x, y, params.min_points, fitter);
    const TrendFit& f = trend.fit;
    if (!RisesEnough(x, y, trend, min_growth, params.min_trend_z)) return;
    // One jump, then flat, fits a rising line too; a growth keeps rising.
    if (!StillRising(f, FitLaterHalf(x, y, trend, fitter))) return;
    const double growth = TrendGrowth(x, trend);
    RankGrowth g;
    g.rank = rank;
    g.bytes_per_step = f.slope;
    g.growth_bytes = growth;
    g.first_bytes = static_cast<uint64_t>(y[trend.onset]);
    g.last_bytes = static_cast<uint64_t>(y.back());
    g.trend_z = f.trend_z;
    g.first_step = static_cast<int64_t>(x[trend.onset]);
    g.last_step = static_cast<int64_t>(x.back());
    agg.growing.push_back(g);
  };

  for (const RankTimeline* r : ranks) {
    auto begin = std::lower_bound(r->steps.begin(), r->steps.end(), first_step,
                                  [](const StepPoint& p, int64_t step) { return p.step < step; });
    size_t n = static_cast<size_t>(r->steps.end() - begin);
    if (n == 0) continue;
    x.clear();
    for (auto it = begin; it != r->steps.end(); ++it) x.push_back(static_cast<double>(it->step));
    if (params.by == GrowthBy::kRank) {
      std::vector<double> y;
      y.reserve(n);
      for (auto it = begin; it != r->steps.end(); ++it) {
        y.push_back(static_cast<double>(MetricValue(*it, params.rank_metric)));
      }
      fit(r->rank, y, aggregates[0]);
      continue;
    }
    // Dense per-group series: a step where the group is absent held 0 bytes of it.
    for (auto& [name, y] : series) y.assign(n, 0.0);
    size_t i = 0;
    for (auto it = begin; it != r->steps.end(); ++it, ++i) {
      for (const GroupBytes& g : GroupsOf(*it, params.by)) {
        std::vector<double>& y = series[g.name];
        if (y.size() != n) y.assign(n, 0.0);
        y[i] = static_cast<double>(g.live_bytes);
      }
    }
    for (auto& [name, y] : series) {
      bool any = std::any_of(y.begin(), y.end(), [](double v) { return v != 0; });
      if (any) fit(r->rank, y, aggregates[name]);
    }
  }

  const uint32_t cohort = report.ranks;
  for (auto& [name, agg] : aggregates) {
    if (agg.growing.empty()) continue;
    std::sort(agg.growing.begin(), agg.growing.end(), [](const RankGrowth& a, const RankGrowth& b) {
      return a.bytes_per_step > b.bytes_per_step;
    });
    GroupGrowth base;
    base.name = job.names.Name(name);
    base.ranks_growing = static_cast<uint32_t>(agg.growing.size());
    base.ranks_with_group = agg.ranks_with_group;
    base.scope = base.ranks_growing == cohort ? GrowthScope::kAllRanks : GrowthScope::kSomeRanks;
    if (PerRank(params.by)) {
      for (const RankGrowth& g : agg.growing) {
        GroupGrowth one = base;
        one.rank = g.rank;
        one.total_bytes_per_step = one.median_bytes_per_step = g.bytes_per_step;
        one.ranks = {g};
        report.groups.push_back(std::move(one));
      }
    } else {
      std::vector<double> slopes;
      for (const RankGrowth& g : agg.growing) {
        base.total_bytes_per_step += g.bytes_per_step;
        slopes.push_back(g.bytes_per_step);
      }
      base.median_bytes_per_step = Median(slopes);
      base.ranks = agg.growing;
      report.groups.push_back(std::move(base));
    }
  }
  std::stable_sort(report.groups.begin(), report.groups.end(),
                   [](const GroupGrowth& a, const GroupGrowth& b) {
                     return a.total_bytes_per_step > b.total_bytes_per_step;
                   });
  return report;
}

}  // namespace memtrace::analysis
