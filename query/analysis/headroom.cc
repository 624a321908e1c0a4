#include "query/analysis/headroom.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "query/analysis/current_trend.h"
#include "query/analysis/robust_stats.h"

namespace memtrace::analysis {
namespace {

// Rows whose highest peak is the "latest peak" (see ReadLatest).
constexpr size_t kRecentPeakRows = 3;

// The capacity: the given one, else the largest device total the rank's samples reported (in
// any row, the one in progress too).
void ReadCapacity(const RankTimeline& rank, const HeadroomParams& params, RankHeadroom* h) {
  if (params.capacity_bytes.has_value()) {
    h->capacity_bytes = *params.capacity_bytes;
    return;
  }
  for (size_t i = 0; i < rank.row_count(); ++i) {
    h->capacity_bytes = std::max(h->capacity_bytes, rank.row(i).device_total);
  }
  h->capacity_from_samples = h->capacity_bytes > 0;
}

// The usable capacity (capacity minus what the device holds outside traced allocations), with
// h's headroom_bytes set from it: what is left above the latest peak, 0 when already over.
double ReadUsable(RankHeadroom* h) {
  const double usable =
      static_cast<double>(h->capacity_bytes) - static_cast<double>(h->overhead_bytes);
  h->headroom_bytes =
      usable > double(h->last_peak_bytes) ? uint64_t(usable - double(h->last_peak_bytes)) : 0;
  return usable;
}

// The rank's latest state: its last row's step and floor, the latest peak, and the capacity.
void ReadLatest(const RankTimeline& rank, const HeadroomParams& params, RankHeadroom* h) {
  const StepPoint& last = rank.steps.back();
  h->last_step = last.step;
  h->last_start_ns = last.start_ns;
  h->last_floor_bytes = last.floor_bytes;
  // The last row may be a job's final time bucket holding its last milliseconds: the latest
  // peak is the highest of the last few. The step a running rank is in (not among its steps)
  // counts too: its peak so far was reached, and may already be past the capacity.
  const size_t recent_rows = std::min<size_t>(kRecentPeakRows, rank.steps.size());
  for (size_t i = rank.steps.size() - recent_rows; i < rank.steps.size(); ++i) {
    h->last_peak_bytes = std::max(h->last_peak_bytes, rank.steps[i].peak_bytes);
  }
  if (rank.in_progress) {
    h->last_peak_bytes = std::max(h->last_peak_bytes, rank.in_progress->peak_bytes);
  }
  ReadCapacity(rank, params, h);
}

// The first step with an OOM event (RankTimeline::FirstOomRow); nullopt when none.
std::optional<int64_t> FirstOomStep(const RankTimeline& rank) {
  const StepPoint* oom = rank.FirstOomRow();
  return oom != nullptr ? std::optional<int64_t>(oom->step) : std::nullopt;
}

// The rows the forecast reads (after warm-up, at most recent_steps): the floors to fit, and the
// medians of what rides on the floor.
struct ForecastWindow {
  std::vector<double> x, floor;  // step, floor bytes
  uint64_t transient_bytes = 0;  // the highest peak above the floor
  uint64_t overhead_bytes = 0;   // device memory used outside traced allocations
  double step_ns = 0;            // the time a step takes
};

// Device memory used outside traced allocations in row `p`: its highest device-used sample
// minus the live bytes at that sample's moment. Rows from before that moment's live bytes were
// kept can only tell it where the sample caught the row's peak. nullopt when the row cannot.
std::optional<double> OverheadOf(const StepPoint& p) {
  if (p.live_at_device_used_max > 0 && p.device_used_max >= p.live_at_device_used_max) {
    return static_cast<double>(p.device_used_max - p.live_at_device_used_max);
  }
  if (p.live_at_device_used_max == 0 && p.device_used_max >= p.peak_bytes && p.peak_bytes > 0) {
    return static_cast<double>(p.device_used_max - p.peak_bytes);
  }
  return std::nullopt;
}

ForecastWindow WindowOf(const RankTimeline& rank, const HeadroomParams& params) {
  size_t begin = std::min<size_t>(params.warmup_steps, rank.steps.size());
  if (params.recent_steps > 0 && rank.steps.size() - begin > params.recent_steps) {
    begin = rank.steps.size() - params.recent_steps;
  }
  // What the device holds outside traced allocations is no trend: a rank with no step past
  // the warm-up (too short to forecast) reads it from every step, where it read 0 B, and its
  // headroom as the whole capacity less its peak.
  const size_t overhead_begin = begin < rank.steps.size() ? begin : 0;
  ForecastWindow w;
  std::vector<double> transient, overhead, period;
  for (size_t i = overhead_begin; i < rank.steps.size(); ++i) {
    if (const std::optional<double> o = OverheadOf(rank.steps[i])) overhead.push_back(*o);
  }
  for (size_t i = begin; i < rank.steps.size(); ++i) {
    const StepPoint& p = rank.steps[i];
    w.x.push_back(static_cast<double>(p.step));
    w.floor.push_back(static_cast<double>(p.floor_bytes));
    transient.push_back(static_cast<double>(p.peak_bytes) - static_cast<double>(p.floor_bytes));
    if (i + 1 < rank.steps.size()) {
      const StepPoint& next = rank.steps[i + 1];
      if (next.step > p.step && next.start_ns > p.start_ns) {
        period.push_back(double(next.start_ns - p.start_ns) / double(next.step - p.step));
      }
    } else if (period.empty() && p.end_ns > p.start_ns) {
      period.push_back(double(p.end_ns - p.start_ns));
    }
  }
  // The highest, not the typical: an eval or checkpoint spike every 10 steps is what runs out of
  // memory first (a rank forecast full at step ~186 from its median step ran out at step 119, on
  // a spike).
  if (!transient.empty()) {
    w.transient_bytes =
        static_cast<uint64_t>(std::max(0.0, *std::max_element(transient.begin(), transient.end())));
  }
  if (!overhead.empty()) w.overhead_bytes = static_cast<uint64_t>(Median(overhead));
  if (!period.empty()) w.step_ns = Median(period);
  return w;
}

// For a rising floor fitted by `fit`: the first steps at which the peak and the floor alone reach
// `usable`, and the time to the first; kFlat when that is beyond the horizon. Reads h's
// last_step, transient_bytes and step_ns (set by ReadLatest and the window); sets its status,
// forecast steps and eta.
void ForecastReach(const TrendFit& fit, const HeadroomParams& params, double usable,
                   RankHeadroom* h) {
  const double last_step = static_cast<double>(h->last_step);
  // First step s with intercept + slope * s + transient >= usable (and the floor alone).
  auto reach = [&](double target) {
    double s = std::ceil((target - fit.intercept) / fit.slope);
    return std::max(s, last_step + 1);
  };
  const double peak_step = reach(usable - static_cast<double>(h->transient_bytes));
  const double floor_step = reach(usable);
  if (peak_step - last_step > static_cast<double>(params.max_horizon_steps)) {
    h->status = HeadroomStatus::kFlat;
    return;
  }
  // The horizon is counted in steps, so with long steps the time to it can pass what an int64
  // of ns holds (~292 years): that far out is flat too.
  const double eta_ns = (peak_step - last_step) * h->step_ns;
  if (!(eta_ns < 0x1p63)) {
    h->status = HeadroomStatus::kFlat;
    return;
  }
  h->status = HeadroomStatus::kForecast;
  h->forecast_step = static_cast<int64_t>(peak_step);
  h->floor_forecast_step =
      static_cast<int64_t>(std::min(floor_step, last_step + 10.0 * params.max_horizon_steps));
  h->eta_ns = static_cast<int64_t>(std::llround(eta_ns));
}

// A running rank still in its first step (its only row, in progress): too short for a trend, but
// its peak so far was reached and may already be past the usable capacity (read from that row
// alone), which "too short" hid.
void ReadFirstStepInProgress(const RankTimeline& rank, const HeadroomParams& params,
                             RankHeadroom* h) {
  const StepPoint& p = *rank.in_progress;
  h->last_step = p.step;
  h->last_start_ns = p.start_ns;
  h->last_floor_bytes = p.floor_bytes;
  h->last_peak_bytes = p.peak_bytes;
  ReadCapacity(rank, params, h);
  h->overhead_bytes = static_cast<uint64_t>(OverheadOf(p).value_or(0));
  const double usable = ReadUsable(h);
  if (h->capacity_bytes > 0 && static_cast<double>(h->last_peak_bytes) >= usable) {
    h->status = HeadroomStatus::kAtCapacity;
  }
}

RankHeadroom Forecast(const RankTimeline& rank, const HeadroomParams& params, TheilSen& fitter) {
  RankHeadroom h;
  h.rank = rank.rank;
  if (rank.steps.empty()) {
    const std::optional<int64_t> oom = FirstOomStep(rank);
    h.status = oom ? HeadroomStatus::kOutOfMemory : HeadroomStatus::kTooShort;
    if (oom) h.forecast_step = *oom;
    if (!oom && rank.in_progress) ReadFirstStepInProgress(rank, params, &h);
    return h;
  }
  ReadLatest(rank, params, &h);
  const ForecastWindow window = WindowOf(rank, params);
  h.transient_bytes = window.transient_bytes;
  h.overhead_bytes = window.overhead_bytes;
  h.step_ns = window.step_ns;
  const double usable = ReadUsable(&h);

  // The trend since the floor began to rise (a leak that started late in the window has its own
  // rate, and the forecast follows it), also shown for a rank already out of memory or at its
  // capacity: how fast it got there.
  RiseFit rise;
  const bool fitted = window.x.size() >= params.min_points;
  if (fitted) {
    rise = FitRise(window.x, window.floor, params.min_points,
                   static_cast<double>(params.min_growth_bytes), params.min_trend_z, fitter);
    h.floor_bytes_per_step = rise.trend.fit.slope;
    h.trend_z = rise.trend.fit.trend_z;
    h.trend_fitted = true;
  }
  if (const std::optional<int64_t> oom = FirstOomStep(rank); oom.has_value()) {
    h.status = HeadroomStatus::kOutOfMemory;
    h.forecast_step = *oom;
  } else if (h.capacity_bytes == 0) {
    h.status = HeadroomStatus::kNoCapacity;
  } else if (static_cast<double>(h.last_peak_bytes) >= usable) {
    // A forecast of when it gets there would be a step in the past.
    h.status = HeadroomStatus::kAtCapacity;
  } else if (!fitted) {
    h.status = HeadroomStatus::kTooShort;
  } else if (!rise.rising) {
    h.status = HeadroomStatus::kFlat;
  } else {
    ForecastReach(rise.trend.fit, params, usable, &h);
  }
  return h;
}

// Soonest first: out of memory, already at the capacity, then forecasts.
int Order(HeadroomStatus s) {
  switch (s) {
    case HeadroomStatus::kOutOfMemory:
      return 0;
    case HeadroomStatus::kAtCapacity:
      return 1;
    case HeadroomStatus::kForecast:
      return 2;
    default:
      return 3;
  }
}

}  // namespace

absl::string_view HeadroomStatusName(HeadroomStatus status) {
  switch (status) {
    case HeadroomStatus::kForecast:
      return "forecast";
    case HeadroomStatus::kFlat:
      return "flat";
    case HeadroomStatus::kOutOfMemory:
      return "out-of-memory";
    case HeadroomStatus::kNoCapacity:
      return "no-capacity";
    case HeadroomStatus::kTooShort:
      return "too-short";
    case HeadroomStatus::kAtCapacity:
      return "at-capacity";
  }
  return "flat";
}

absl::Status CheckHeadroomParams(const HeadroomParams& params) {
  if (params.recent_steps == 0 || params.recent_steps >= params.min_points) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("recent_steps ", params.recent_steps, " is below the ", params.min_points,
                   " steps a trend is fitted over (min_points): give at least ", params.min_points,
                   ", or 0 for all steps after warm-up"));
}

HeadroomReport ForecastHeadroom(const JobTimeline& job, const HeadroomParams& params) {
  HeadroomReport report;
  report.job_id = job.job_id;
  report.params = params;
  report.bucket_ns = job.time_axis ? job.bucket_ns : 0;
  std::vector<const RankTimeline*> ranks = SelectRanks(job, params.attempt);
  report.ranks = static_cast<uint32_t>(ranks.size());
  TheilSen fitter(params.max_pairs);
  for (const RankTimeline* r : ranks) {
    report.entries.push_back(Forecast(*r, params, fitter));
    if (report.entries.back().status == HeadroomStatus::kForecast) ++report.forecasts;
  }
  std::stable_sort(report.entries.begin(), report.entries.end(),
                   [](const RankHeadroom& a, const RankHeadroom& b) {
                     if (Order(a.status) != Order(b.status))
                       return Order(a.status) < Order(b.status);
                     if (a.status == b.status && a.status != HeadroomStatus::kAtCapacity &&
                         Order(a.status) < 3 && a.forecast_step != b.forecast_step) {
                       return a.forecast_step < b.forecast_step;
                     }
                     return a.rank < b.rank;
                   });
  return report;
}

}  // namespace memtrace::analysis
