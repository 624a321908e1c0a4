// `headroom`: per rank, when its memory reaches the device's capacity if the floor keeps its
// recent trend: "rank 3 reaches 80.0 GiB at step ~412 (37 min after 14:02:11.500, when its last
// step began, at 128 MiB/step)".
//
// The floor's Theil-Sen slope over the last recent_steps (after warm-up; from where the floor
// began to rise when it was flat before, current_trend.h; still rising lately) must pass the same
// significance floor as `growth` (fitted growth >= min_growth_bytes, trend z >= min_trend_z; or
// a RecentRise over the last few steps: FitRise in current_trend.h); otherwise the rank is flat and
// gets no forecast. The forecast is the step at which the trend floor plus the rank's highest
// transient in the window (peak - floor: a periodic eval or checkpoint spike runs out of memory
// before a typical step does) reaches the usable capacity: capacity minus the device memory used
// outside traced allocations (the median over the window's steps of the highest device-used sample
// minus the live bytes when it was taken). Capacity is the given one, else the largest device_total
// the rank's samples reported; without either there is no forecast. Time to it uses the median step
// period (start to next start) of the window.
// Limitation: a rank is a process, and one process with memory on several GPUs (a Kineto trace
// naming several devices, DataParallel) has its live bytes summed over them but is compared
// with one device's capacity, so its forecast comes early; --capacity can give their sum.
#ifndef MEMTRACE_QUERY_ANALYSIS_HEADROOM_H_
#define MEMTRACE_QUERY_ANALYSIS_HEADROOM_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "query/analysis/timeline.h"

namespace memtrace::analysis {

struct HeadroomParams {
  std::optional<uint64_t> capacity_bytes;  // overrides the device samples
  uint32_t recent_steps = 50;
  uint32_t warmup_steps = 5;
  uint64_t min_growth_bytes = 64 * kMiB;
  double min_trend_z = 3.0;
  uint32_t min_points = 8;
  int64_t max_horizon_steps = 10'000'000;  // a forecast further out is reported as flat
  uint32_t max_pairs = 2048;
  std::optional<uint32_t> attempt;
};

enum class HeadroomStatus {
  kForecast,     // rising: forecast_step is set
  kFlat,         // no significant rise, or the capacity is beyond max_horizon_steps (or ~292
                 // years, the most eta_ns holds)
  kOutOfMemory,  // the rank already recorded an OOM (forecast_step = that step)
  kNoCapacity,   // no capacity given and no device samples
  kTooShort,     // fewer than min_points steps in its window: after warm-up, at most the last
                 // recent_steps (CheckHeadroomParams keeps recent_steps from starving every rank)
  kAtCapacity,   // no OOM recorded, but the latest peak already reaches the usable capacity
};
absl::string_view HeadroomStatusName(HeadroomStatus status);

struct RankHeadroom {
  uint32_t rank = 0;
  HeadroomStatus status = HeadroomStatus::kFlat;
  uint64_t capacity_bytes = 0;
  bool capacity_from_samples = false;
  uint64_t overhead_bytes = 0;  // device memory used outside traced allocations
  int64_t last_step = 0;
  int64_t last_start_ns = 0;  // when last_step began, which eta_ns counts from
  uint64_t last_floor_bytes = 0;
  // The highest peak of the last 3 steps (or buckets: a job's final one may hold only its last
  // milliseconds), and of the step a running rank is in (RankTimeline::in_progress).
  uint64_t last_peak_bytes = 0;
  uint64_t transient_bytes = 0;  // the highest peak - floor in the window
  // Usable capacity minus the latest peak (0 when already over).
  uint64_t headroom_bytes = 0;
  double floor_bytes_per_step = 0;
  double trend_z = 0;
  bool trend_fitted = false;         // the two above were fitted (min_points steps or more)
  int64_t forecast_step = -1;        // peak reaches capacity
  int64_t floor_forecast_step = -1;  // the floor alone reaches capacity
  double step_ns = 0;                // median step period
  int64_t eta_ns = 0;                // from the start of last_step to forecast_step
};

struct HeadroomReport {
  std::string job_id;
  uint32_t ranks = 0;
  uint32_t forecasts = 0;             // ranks with status kForecast
  // > 0 for a job without step markers: its "steps" are time-bucket indexes of this width.
  int64_t bucket_ns = 0;
  // Out of memory, then at capacity, then forecasts soonest first, then the rest; by rank within.
  std::vector<RankHeadroom> entries;
  HeadroomParams params;
};

// Runs the analysis over `job`. Pure.
HeadroomReport ForecastHeadroom(const JobTimeline& job, const HeadroomParams& params = {});

// InvalidArgument when recent_steps is 1 to min_points - 1: every rank's window would be too
// short to fit, and "no rank is on course to fill its device" would be said of a job that
// leaks. 0 (all steps after warm-up) is fine.
absl::Status CheckHeadroomParams(const HeadroomParams& params);

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_HEADROOM_H_
