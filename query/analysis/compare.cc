#include "query/analysis/compare.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "query/analysis/robust_stats.h"
#include "query/analysis/units.h"

namespace memtrace::analysis {
namespace {

bool Differs(double a, double b, double fraction) {
  double scale = std::max(std::fabs(a), std::fabs(b));
  return scale > 0 && std::fabs(a - b) > fraction * scale;
}

// A moment of a job as the comparison shows it: "step 32", or on the time axis how far into the
// job ("+1m20s into the job"; "~" for a forecast).
std::string MomentInJob(int64_t key, int64_t bucket_ns, int64_t first_key,
                        bool approximate = false) {
  if (bucket_ns <= 0) return FormatKey(key, bucket_ns, approximate);
  return absl::StrCat(approximate ? "~+" : "+",
                      FormatDuration(static_cast<double>(key - first_key) * bucket_ns),
                      " into the job");
}

std::string FirstDivergence(const DivergenceReport& r, int64_t first_key) {
  if (r.status == DivergenceStatus::kTooFewRanks) return "too few ranks";
  if (r.status == DivergenceStatus::kTooFewSteps) return "too few steps";
  if (r.diverged.empty()) return "none";
  const RankDivergence& d = r.diverged.front();
  return absl::StrCat("rank ", d.rank, " at ", MomentInJob(d.onset_step, r.bucket_ns, first_key),
                      r.diverged.size() > 1
                          ? absl::StrCat(", ", r.diverged.size() - 1, " rank",
                                         r.diverged.size() == 2 ? "" : "s", " followed")
                          : "");
}

// The rate on one rank (the median over the growing ranks, "per rank"): the sum over ranks beside
// "on all 8 ranks" read as each GPU's growth, 8 times too fast for anyone reckoning its time to
// OOM.
// "All" is all the ranks fitted, "all 3 of 4" when one was too short to fit (growth.h).
std::string Growth(const GroupGrowth& g, const GrowthReport& r) {
  const std::string rate = FormatRate(g.median_bytes_per_step, r.bucket_ns);
  if (g.ranks_growing == 1) return absl::StrCat(rate, " on 1 rank");
  if (g.scope == GrowthScope::kAllRanks) {
    return absl::StrCat(rate, " per rank on all ", g.ranks_growing,
                        r.ranks_fitted < r.ranks ? absl::StrCat(" of ", r.ranks) : "", " ranks");
  }
  return absl::StrCat(rate, " per rank on ", g.ranks_growing, " ranks");
}

std::string LeakingRanks(const LeakReport& r) {
  std::vector<uint32_t> ranks;
  for (const RankCurve& c : r.curves) {
    if (c.curve == CurveClass::kLeak) ranks.push_back(c.rank);
  }
  if (ranks.empty()) return "none";
  return absl::StrCat("rank", ranks.size() > 1 ? "s " : " ", FormatRankList(ranks));
}

const RankHeadroom* Soonest(const HeadroomReport& r) {
  for (const RankHeadroom& h : r.entries) {
    if (h.status == HeadroomStatus::kForecast || h.status == HeadroomStatus::kOutOfMemory ||
        h.status == HeadroomStatus::kAtCapacity) {
      return &h;
    }
  }
  return nullptr;
}

std::string HeadroomText(const RankHeadroom* h, int64_t bucket_ns, int64_t first_key) {
  if (h == nullptr) return "no forecast";
  if (h->status == HeadroomStatus::kOutOfMemory) {
    return absl::StrCat("rank ", h->rank, " OOM at ",
                        MomentInJob(h->forecast_step, bucket_ns, first_key));
  }
  if (h->status == HeadroomStatus::kAtCapacity) {
    return absl::StrCat("rank ", h->rank, " at capacity");
  }
  return absl::StrCat("rank ", h->rank, " full at ",
                      MomentInJob(h->forecast_step, bucket_ns, first_key, /*approximate=*/true));
}

}  // namespace

JobAnalyses AnalyzeJob(const JobTimeline& job, const CompareParams& params) {
  JobAnalyses out;
  out.diverged = FindDivergence(job, params.diverged);
  out.growth = FindGrowth(job, params.growth);
  out.leaks = FindLeaks(job, {}, params.leaks);
  out.peak = FindPeaks(job, params.peak);
  out.headroom = ForecastHeadroom(job, params.headroom);
  std::vector<double> floors;
  bool first = true;
  for (const RankTimeline* r : SelectRanks(job, params.diverged.attempt)) {
    ++out.ranks;
    if (r->steps.empty()) continue;
    out.first_key = first ? r->steps.front().step : std::min(out.first_key, r->steps.front().step);
    first = false;
    floors.push_back(static_cast<double>(r->steps.back().floor_bytes));
    out.steps = std::max<int64_t>(out.steps, static_cast<int64_t>(r->steps.size()));
    // The row in progress or cut short too (an OOM's step is often the highest), as FindPeaks.
    for (size_t i = 0; i < r->row_count(); ++i) {
      const StepPoint& p = r->row(i);
      if (p.peak_bytes > out.max_peak_bytes) {
        out.max_peak_bytes = p.peak_bytes;
        out.max_peak_rank = r->rank;
      }
    }
  }
  if (!floors.empty()) out.final_floor_bytes = static_cast<uint64_t>(Median(floors));
  return out;
}

namespace {

enum class Side { kA, kB };

// The first rank to diverge in each job, and how many did.
void AddDivergedItem(const CompareReport& report, std::vector<CompareItem>& items) {
  CompareItem it{"diverged", "first rank", FirstDivergence(report.a.diverged, report.a.first_key),
                 FirstDivergence(report.b.diverged, report.b.first_key)};
  it.a_value = report.a.diverged.diverged.size();
  it.b_value = report.b.diverged.diverged.size();
  it.changed = it.a != it.b;
  const DivergenceReport& a = report.a.diverged;
  const DivergenceReport& b = report.b.diverged;
  if (it.changed && a.bucket_ns > 0 && b.bucket_ns == a.bucket_ns && a.status == b.status &&
      a.diverged.size() == b.diverged.size() && !a.diverged.empty() &&
      a.diverged[0].rank == b.diverged[0].rank) {
    // Two runs of one job start at different phases of the wall-clock buckets: the same
    // moment can fall a bucket apart.
    const int64_t onset_a = a.diverged[0].onset_step - report.a.first_key;
    const int64_t onset_b = b.diverged[0].onset_step - report.b.first_key;
    it.changed = std::abs(onset_a - onset_b) > 1;
  }
  items.push_back(it);
}

// One item per name that either job has (`unnamed` for ""): each side's text and value from
// `describe(entry, side, &text, &value)`, "-" on a side without it; changed when a side lacks it
// or the values differ by more than min_change_fraction.
template <typename Entry, typename NameOf, typename Describe>
void AddItemPerName(const char* analysis, const char* unnamed, const std::vector<Entry>& a,
                    const std::vector<Entry>& b, NameOf name_of, Describe describe,
                    const CompareParams& params, std::vector<CompareItem>& items) {
  using Slots = std::pair<const Entry*, const Entry*>;
  std::map<std::string, Slots> by_name;
  for (auto [entries, slot] : {std::pair{&a, &Slots::first}, std::pair{&b, &Slots::second}}) {
    for (const Entry& e : *entries) {
      const Entry*& kept = by_name[name_of(e)].*slot;
      if (kept == nullptr) kept = &e;  // a repeated name keeps its first entry
    }
  }
  for (const auto& [n, entries] : by_name) {
    CompareItem it{analysis, n.empty() ? unnamed : n, "-", "-"};
    if (entries.first != nullptr) describe(*entries.first, Side::kA, &it.a, &it.a_value);
    if (entries.second != nullptr) describe(*entries.second, Side::kB, &it.b, &it.b_value);
    it.changed =
        it.a == "-" || it.b == "-" || Differs(it.a_value, it.b_value, params.min_change_fraction);
    items.push_back(it);
  }
}

// Each growing group of either job: its rate in each, or "-" where it did not grow.
void AddGrowthItems(const CompareReport& report, const CompareParams& params,
                    std::vector<CompareItem>& items) {
  const auto describe = [&](const GroupGrowth& g, Side side, std::string* text, double* value) {
    *text = Growth(g, (side == Side::kA ? report.a : report.b).growth);
    *value = g.total_bytes_per_step;
  };
  AddItemPerName(
      "growth", "(untagged)", report.a.growth.groups, report.b.growth.groups,
      [](const GroupGrowth& g) { return g.name; }, describe, params, items);
  if (report.a.growth.groups.empty() && report.b.growth.groups.empty()) {
    items.push_back({"growth", "any group", "none", "none", 0, 0, false});
  }
}

// Which ranks leak in each job.
void AddLeaksItem(const CompareReport& report, std::vector<CompareItem>& items) {
  CompareItem it{"leaks", "leaking ranks", LeakingRanks(report.a.leaks),
                 LeakingRanks(report.b.leaks)};
  it.a_value = report.a.leaks.leaking_ranks;
  it.b_value = report.b.leaks.leaking_ranks;
  it.changed = it.a != it.b;
  items.push_back(it);
}

// The highest step peak of each job, then each peak group of either job: the highest peak and
// its rank in each.
void AddPeakItems(const CompareReport& report, const CompareParams& params,
                  std::vector<CompareItem>& items) {
  const auto peak_text = [](const JobAnalyses& j) {
    return j.max_peak_bytes == 0
               ? std::string("-")
               : absl::StrCat(FormatBytes(j.max_peak_bytes), " (rank ", j.max_peak_rank, ")");
  };
  // Both jobs are read on one axis (the service sees to it): name its unit.
  const bool by_time = report.a.diverged.bucket_ns > 0 || report.b.diverged.bucket_ns > 0;
  CompareItem job_peak{"peak", by_time ? "highest time-bucket peak" : "highest step peak",
                       peak_text(report.a), peak_text(report.b)};
  job_peak.a_value = report.a.max_peak_bytes;
  job_peak.b_value = report.b.max_peak_bytes;
  job_peak.changed = Differs(job_peak.a_value, job_peak.b_value, params.min_change_fraction);
  items.push_back(job_peak);
  const auto describe = [](const PeakSummary& s, Side, std::string* text, double* value) {
    *value = s.max_peak_bytes;
    *text = absl::StrCat(FormatBytes(*value), " (rank ", s.max_rank, ")");
  };
  AddItemPerName(
      "peak", "(step)", report.a.peak.summaries, report.b.peak.summaries,
      [](const PeakSummary& s) { return s.group; }, describe, params, items);
}

// The rank forecast to fill its device first in each job.
void AddHeadroomItem(const CompareReport& report, std::vector<CompareItem>& items) {
  const RankHeadroom* ha = Soonest(report.a.headroom);
  const RankHeadroom* hb = Soonest(report.b.headroom);
  CompareItem it{"headroom", "soonest full rank",
                 HeadroomText(ha, report.a.headroom.bucket_ns, report.a.first_key),
                 HeadroomText(hb, report.b.headroom.bucket_ns, report.b.first_key)};
  const bool time_axis = report.a.headroom.bucket_ns > 0;
  it.a_value = ha != nullptr ? ha->forecast_step - (time_axis ? report.a.first_key : 0) : 0;
  it.b_value = hb != nullptr ? hb->forecast_step - (time_axis ? report.b.first_key : 0) : 0;
  it.changed = it.a != it.b;
  if (it.changed && time_axis && ha != nullptr && hb != nullptr && ha->rank == hb->rank &&
      ha->status == hb->status && report.b.headroom.bucket_ns == report.a.headroom.bucket_ns) {
    it.changed = std::abs(it.a_value - it.b_value) > 1;  // as for diverged
  }
  items.push_back(it);
}

// The median of the ranks' last floors.
void AddFloorItem(const CompareReport& report, const CompareParams& params,
                  std::vector<CompareItem>& items) {
  CompareItem it{"floor", "median final floor", FormatBytes(report.a.final_floor_bytes),
                 FormatBytes(report.b.final_floor_bytes)};
  it.a_value = report.a.final_floor_bytes;
  it.b_value = report.b.final_floor_bytes;
  it.changed = Differs(it.a_value, it.b_value, params.min_change_fraction);
  items.push_back(it);
}

// How each job's rows are keyed. Rates per step and per second are not the same number: a job
// without step markers compared with one that has them reads "256 MiB/s" beside "256 MiB/step",
// which is no sameness, so the keys are the first item, changed when they differ.
CompareItem AxisItem(const JobTimeline& a, const JobTimeline& b) {
  // The exact width ("1.4s"): rounded, 1 s and 1.4 s buckets read alike and their rates per
  // bucket (256 against 358 MiB for one leak of 256 MiB/s) as a change of the job.
  const auto keyed = [](const JobTimeline& j) {
    return j.time_axis
               ? absl::StrCat(absl::FormatDuration(absl::Nanoseconds(j.bucket_ns)), " time buckets")
               : std::string("steps");
  };
  CompareItem it{"axis", "compared by", keyed(a), keyed(b)};
  it.a_value = a.time_axis ? static_cast<double>(a.bucket_ns) : 0;
  it.b_value = b.time_axis ? static_cast<double>(b.bucket_ns) : 0;
  it.changed = it.a != it.b || it.a_value != it.b_value;
  return it;
}

}  // namespace

CompareReport CompareJobs(const JobTimeline& a, const JobTimeline& b, const CompareParams& params) {
  CompareReport report;
  report.job_a = a.job_id;
  report.job_b = b.job_id;
  report.a = AnalyzeJob(a, params);
  report.b = AnalyzeJob(b, params);
  std::vector<CompareItem>& items = report.items;
  items.push_back(AxisItem(a, b));
  AddDivergedItem(report, items);
  AddGrowthItems(report, params, items);
  AddLeaksItem(report, items);
  AddPeakItems(report, params, items);
  AddHeadroomItem(report, items);
  AddFloorItem(report, params, items);
  std::stable_partition(items.begin(), items.end(),
                        [](const CompareItem& it) { return it.changed; });
  return report;
}

}  // namespace memtrace::analysis
