// `compare --job A --job B`: the same analyses on two jobs side by side (before and after a
// config change), and the differences that matter, one item per finding.
#ifndef MEMTRACE_QUERY_ANALYSIS_COMPARE_H_
#define MEMTRACE_QUERY_ANALYSIS_COMPARE_H_

#include <string>
#include <vector>

#include "query/analysis/diverged.h"
#include "query/analysis/growth.h"
#include "query/analysis/headroom.h"
#include "query/analysis/leaks.h"
#include "query/analysis/peak.h"
#include "query/analysis/timeline.h"

namespace memtrace::analysis {

struct CompareParams {
  DivergenceParams diverged;
  GrowthParams growth;
  LeakParams leaks;
  PeakParams peak;
  HeadroomParams headroom;
  // Peaks and floors that differ by less than this fraction are "unchanged".
  double min_change_fraction = 0.05;
};

struct JobAnalyses {
  DivergenceReport diverged;
  GrowthReport growth;
  LeakReport leaks;
  PeakReport peak;
  HeadroomReport headroom;
  // Median over ranks of each rank's last floor.
  uint64_t final_floor_bytes = 0;
  // The highest step peak of any rank, and that rank: compared whatever the peak grouping
  // (a job without phases has no phase peaks to compare).
  uint64_t max_peak_bytes = 0;
  uint32_t max_peak_rank = 0;
  uint32_t ranks = 0;
  int64_t steps = 0;  // steps of the longest rank
  // The earliest rank's first key (step, or time-bucket index on the time axis): moments are
  // compared from it, since two jobs' buckets are wall-clock times that never match.
  int64_t first_key = 0;
};

// One line of the comparison: what is compared, and how it reads on each side.
struct CompareItem {
  std::string analysis;  // "axis", "diverged", "growth", "leaks", "peak", "headroom", "floor"
  std::string subject;   // e.g. "first rank", a tag name, a phase name
  std::string a;         // human-readable value for job A ("-" when absent)
  std::string b;
  // The number behind it (bytes, bytes/step, step), 0 when absent. For growth the bytes/step
  // summed over the growing ranks, while the text gives one rank's: a changed rate and a changed
  // number of growing ranks both change it.
  double a_value = 0;
  double b_value = 0;
  bool changed = false;
};

struct CompareReport {
  std::string job_a;
  std::string job_b;
  JobAnalyses a;
  JobAnalyses b;
  std::vector<CompareItem> items;  // changed items first, in analysis order
};

// Runs every rollup-based analysis on one job.
JobAnalyses AnalyzeJob(const JobTimeline& job, const CompareParams& params = {});

// Runs AnalyzeJob on both and lists the differences. Pure.
CompareReport CompareJobs(const JobTimeline& a, const JobTimeline& b,
                          const CompareParams& params = {});

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_COMPARE_H_
