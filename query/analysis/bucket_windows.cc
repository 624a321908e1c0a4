#include "query/analysis/bucket_windows.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace memtrace::analysis {
namespace {

// Candidate windows, in buckets, tried from the smallest: up to a minute's step in 250 ms
// buckets (60 left such steps read bucket by bucket, a leak dated from the job's start).
constexpr int64_t kWindows[] = {2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 30, 45, 60, 90, 120, 180, 240};
// A window must leave this many points a rank (median over ranks) for the analyses to use.
constexpr size_t kMinWindowsPerRank = 8;
// Bucket floors that swing by less than this share of the memory are left as they are.
constexpr double kNegligibleSwing = 0.01;
// A window is taken when it calms the swing to this share of the buckets'.
constexpr double kCalmed = 0.25;

int64_t WindowKey(int64_t bucket, int64_t window) {
  // Floor division: bucket indexes are times since the epoch, but a window must not straddle 0.
  const int64_t q = bucket / window;
  return (bucket % window != 0 && bucket < 0) ? q - 1 : q;
}

// Calls emit(begin, end, key) for each run [begin, end) of the `count` buckets (bucket_at(i),
// ascending) that fall in one window of `window` buckets.
template <typename BucketAt, typename Emit>
void ForEachWindow(size_t count, int64_t window, BucketAt bucket_at, Emit emit) {
  size_t begin = 0;
  while (begin < count) {
    const int64_t key = WindowKey(bucket_at(begin), window);
    size_t end = begin + 1;
    while (end < count && WindowKey(bucket_at(end), window) == key) ++end;
    emit(begin, end, key);
    begin = end;
  }
}

double MedianOf(std::vector<double>& v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  return v[mid];
}

double Percentile90(std::vector<double>& v) {
  const size_t at = v.size() * 9 / 10;
  std::nth_element(v.begin(), v.begin() + at, v.end());
  return v[at];
}

// One rank's floors, by bucket, ascending.
struct FloorSeries {
  std::vector<int64_t> bucket;
  std::vector<uint64_t> floor;
};

// The median over ranks of each rank's 90th percentile of the changes between consecutive
// windows' floors (a window's floor: its lowest bucket floor), and of its number of windows;
// and each rank's (NaN for one with too few windows to say). Not the median change: windows of 8
// buckets over 10-bucket steps mostly hold a step's last bucket, whose floor is the step's, and
// their median change is as calm as whole steps'; the fifth that holds none is what the percentile
// sees.
struct Swing {
  double change = 0;
  size_t windows = 0;
  std::vector<double> by_rank;
};

Swing SwingOf(const std::vector<FloorSeries>& ranks, int64_t window) {
  std::vector<double> changes, counts, rank_changes;
  Swing s;
  for (const FloorSeries& r : ranks) {
    rank_changes.clear();
    size_t windows = 0;
    bool have_previous = false;
    int64_t previous_key = 0;
    uint64_t previous_floor = 0;
    ForEachWindow(
        r.bucket.size(), window, [&](size_t i) { return r.bucket[i]; },
        [&](size_t begin, size_t end, int64_t key) {
          const uint64_t floor = *std::min_element(r.floor.begin() + begin, r.floor.begin() + end);
          ++windows;
          if (have_previous && key == previous_key + 1) {
            rank_changes.push_back(floor > previous_floor ? double(floor - previous_floor)
                                                          : double(previous_floor - floor));
          }
          have_previous = true;
          previous_key = key;
          previous_floor = floor;
        });
    counts.push_back(static_cast<double>(windows));
    if (rank_changes.size() >= 3) changes.push_back(Percentile90(rank_changes));
    s.by_rank.push_back(rank_changes.size() >= 3 ? changes.back()
                                                 : std::numeric_limits<double>::quiet_NaN());
  }
  s.change = MedianOf(changes);
  s.windows = static_cast<size_t>(MedianOf(counts));
  return s;
}

int64_t ChooseWindow(const std::vector<FloorSeries>& ranks) {
  std::vector<double> levels, floors;
  for (const FloorSeries& r : ranks) {
    floors.assign(r.floor.begin(), r.floor.end());
    if (!floors.empty()) levels.push_back(MedianOf(floors));
  }
  const double level = MedianOf(levels);
  const Swing buckets = SwingOf(ranks, 1);
  if (level <= 0 || buckets.change <= kNegligibleSwing * level) return 1;
  // Every window that leaves enough points, each computed once.
  std::vector<std::pair<int64_t, Swing>> tried;
  for (int64_t window : kWindows) {
    Swing s = SwingOf(ranks, window);
    if (s.windows < kMinWindowsPerRank) break;
    tried.emplace_back(window, std::move(s));
  }
  size_t chosen = tried.size();  // the first that calms the median rank's swing
  for (size_t i = 0; i < tried.size() && chosen == tried.size(); ++i) {
    if (tried[i].second.change <= kCalmed * buckets.change) chosen = i;
  }
  if (chosen == tried.size()) return 1;
  // It must calm every rank's own swing too, not only the median rank's: a leaking rank's
  // steps grow longer than the others', and windows the cohort's steps kept calm missed every
  // other one of its step ends (its floor read 7 GiB above the truth, a leak from its first
  // window, growth a third too high). Calm: at most twice the least swing any window gives the
  // rank, or negligible. The first such window from the median's; else the median's.
  // A rank too short to be measured at the median's window is left out; one measured there
  // must be measured, and calm, at the window taken (a window too wide to measure a short
  // leaking rank passed it by, and was taken for that).
  std::vector<double> least(ranks.size(), std::numeric_limits<double>::infinity());
  for (const auto& [window, s] : tried) {
    for (size_t r = 0; r < ranks.size(); ++r) {
      if (!std::isnan(s.by_rank[r])) least[r] = std::min(least[r], s.by_rank[r]);
    }
  }
  const std::vector<double>& at_median = tried[chosen].second.by_rank;
  for (size_t i = chosen; i < tried.size(); ++i) {
    const Swing& s = tried[i].second;
    bool every_rank_calm = true;
    for (size_t r = 0; r < ranks.size() && every_rank_calm; ++r) {
      if (std::isnan(at_median[r])) continue;
      every_rank_calm = !std::isnan(s.by_rank[r]) &&
                        s.by_rank[r] <= std::max(2 * least[r], kNegligibleSwing * level);
    }
    if (every_rank_calm) return tried[i].first;
  }
  return tried[chosen].first;
}

using GroupsByName = std::map<NameId, GroupBytes>;

// Every group of `list` with its highest peak; with `live`, also its live bytes and open flag:
// a phase's live bytes at its last close within the window once it closed in one of its
// buckets (rows come in order), else at the latest bucket's end.
void AddGroups(absl::Span<const GroupBytes> list, bool live, GroupsByName* out) {
  for (const GroupBytes& g : list) {
    GroupBytes& w = (*out)[g.name];
    w.name = g.name;
    w.peak_bytes = std::max(w.peak_bytes, g.peak_bytes);
    if (live) {
      if (g.closed || !w.closed) w.live_bytes = g.live_bytes;
      w.closed |= g.closed;
      w.open = g.open;
    }
  }
}

std::vector<GroupBytes> Values(const GroupsByName& map) {
  std::vector<GroupBytes> out;
  out.reserve(map.size());
  for (const auto& [name, g] : map) out.push_back(g);
  return out;
}

// One rank's points of one window as one.
StepPoint Merge(absl::Span<const StepPoint> points, int64_t key) {
  const StepPoint& first = points.front();
  const StepPoint& last = points.back();
  StepPoint out;
  out.step = key;
  out.start_ns = first.start_ns;
  out.end_ns = last.end_ns;
  out.start_bytes = first.start_bytes;
  out.floor_bytes = first.floor_bytes;
  out.peak_bytes = first.peak_bytes;
  out.peak_ns = first.peak_ns;
  out.peak_seq = first.peak_seq;
  out.end_bytes = last.end_bytes;
  GroupsByName tags, sources, phases;
  for (const StepPoint& p : points) {
    out.floor_bytes = std::min(out.floor_bytes, p.floor_bytes);
    if (p.peak_bytes > out.peak_bytes) {  // the first moment it was reached
      out.peak_bytes = p.peak_bytes;
      out.peak_ns = p.peak_ns;
      out.peak_seq = p.peak_seq;
    }
    out.allocs += p.allocs;
    out.frees += p.frees;
    out.alloc_bytes += p.alloc_bytes;
    out.free_bytes += p.free_bytes;
    if (p.device_used_max >= out.device_used_max) {
      out.device_used_max = p.device_used_max;
      out.live_at_device_used_max = p.live_at_device_used_max;
    }
    out.device_total = std::max(out.device_total, p.device_total);
    out.ooms += p.ooms;
    if (p.oom_requested_bytes != 0) out.oom_requested_bytes = p.oom_requested_bytes;
    out.events_lost += p.events_lost;
    // A tag's or source's live bytes are the last bucket's (a row lists every group that held
    // any: one it leaves out held none); a phase is as last seen (closed in an earlier bucket).
    AddGroups(p.by_tag(), /*live=*/&p == &last, &tags);
    AddGroups(p.by_source(), /*live=*/&p == &last, &sources);
    AddGroups(p.by_phase(), /*live=*/true, &phases);
  }
  if (!tags.empty() || !sources.empty() || !phases.empty()) {
    out.groups = StepGroups(Values(tags), Values(sources), Values(phases));
  }
  return out;
}

}  // namespace

int64_t StepWindowOf(const JobTimeline& job) {
  if (!job.time_axis) return 1;
  std::vector<FloorSeries> ranks(job.ranks.size());
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    for (const StepPoint& p : job.ranks[i].steps) {
      ranks[i].bucket.push_back(p.step);
      ranks[i].floor.push_back(p.floor_bytes);
    }
  }
  return ChooseWindow(ranks);
}

int64_t StepWindowOf(const JobStepMetrics& job) {
  if (!job.time_axis) return 1;
  std::vector<FloorSeries> ranks(job.ranks.size());
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    ranks[i].bucket = job.ranks[i].step;
    ranks[i].floor = job.ranks[i].floor_bytes;
  }
  return ChooseWindow(ranks);
}

JobTimeline InStepWindows(const JobTimeline& job, int64_t window) {
  if (!job.time_axis || window <= 1) return job;
  JobTimeline out;
  out.job_id = job.job_id;
  out.time_axis = true;
  out.bucket_ns = job.bucket_ns * window;
  out.names = job.names;
  out.ranks.reserve(job.ranks.size());
  for (const RankTimeline& r : job.ranks) {
    RankTimeline& w = out.ranks.emplace_back();
    w.rank = r.rank;
    w.attempt = r.attempt;
    w.host = r.host;
    w.device_index = r.device_index;
    w.allocator = r.allocator;
    const absl::Span<const StepPoint> points(r.steps);
    // The bucket in progress comes last; the window it falls in is in progress itself: without
    // that bucket it would be a window short of its buckets, as partial as the bucket was.
    const size_t n = points.size();
    ForEachWindow(
        r.row_count(), window, [&](size_t i) { return r.row(i).step; },
        [&](size_t begin, size_t end, int64_t key) {
          if (end <= n) {
            w.steps.push_back(Merge(points.subspan(begin, end - begin), key));
            return;
          }
          std::vector<StepPoint> last(points.begin() + begin, points.end());
          last.push_back(*r.in_progress);
          w.in_progress = Merge(last, key);
        });
  }
  return out;
}

JobStepMetrics InStepWindows(const JobStepMetrics& job, int64_t window) {
  if (!job.time_axis || window <= 1) return job;
  JobStepMetrics out;
  out.job_id = job.job_id;
  out.time_axis = true;
  out.bucket_ns = job.bucket_ns * window;
  out.ranks.reserve(job.ranks.size());
  for (const RankStepMetrics& r : job.ranks) {
    RankStepMetrics& w = out.ranks.emplace_back();
    w.rank = r.rank;
    w.attempt = r.attempt;
    w.host = r.host;
    // As above: the window of the bucket in progress is in progress.
    const size_t n = r.size();
    ForEachWindow(
        r.row_count(), window, [&](size_t i) { return r.step_at(i); },
        [&](size_t begin, size_t end, int64_t key) {
          if (end > n) {
            RankStepMetrics::Row merged = *r.in_progress;
            merged.step = key;
            if (begin < n) merged.start_ns = r.start_ns[begin];
            for (size_t i = begin; i < n; ++i) {
              merged.floor_bytes = std::min(merged.floor_bytes, r.floor_bytes[i]);
              merged.peak_bytes = std::max(merged.peak_bytes, r.peak_bytes[i]);
            }
            w.in_progress = merged;
            return;
          }
          w.step.push_back(key);
          w.start_ns.push_back(r.start_ns[begin]);
          w.floor_bytes.push_back(
              *std::min_element(r.floor_bytes.begin() + begin, r.floor_bytes.begin() + end));
          w.end_bytes.push_back(r.end_bytes[end - 1]);
          w.peak_bytes.push_back(
              *std::max_element(r.peak_bytes.begin() + begin, r.peak_bytes.begin() + end));
        });
  }
  return out;
}

int64_t CommonWindowNs(int64_t a_ns, int64_t b_ns, int64_t at_least_ns) {
  constexpr int64_t kHour = 3'600'000'000'000;
  constexpr int64_t kMostTimesAsked = 4;
  if (a_ns <= 0 || b_ns <= 0) return 0;
  if (a_ns > kHour || b_ns > kHour) return 0;
  const int64_t a_part = a_ns / std::gcd(a_ns, b_ns);
  if (a_part > kHour / b_ns) return 0;  // the lcm would pass an hour (or int64)
  const int64_t lcm = a_part * b_ns;
  const int64_t asked = std::max<int64_t>(at_least_ns, 1);
  const int64_t window = (asked + lcm - 1) / lcm * lcm;
  if (window > kHour) return 0;
  return window / kMostTimesAsked <= asked ? window : 0;
}

}  // namespace memtrace::analysis
