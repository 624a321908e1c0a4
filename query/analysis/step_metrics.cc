#include "query/analysis/step_metrics.h"

namespace memtrace::analysis {

uint64_t RankStepMetrics::Value(size_t i, Metric metric) const {
  switch (metric) {
    case Metric::kFloor:
      return floor_bytes[i];
    case Metric::kEnd:
      return end_bytes[i];
    case Metric::kPeak:
      return peak_bytes[i];
  }
  return floor_bytes[i];
}

void RankStepMetrics::Add(const StepPoint& point) {
  step.push_back(point.step);
  start_ns.push_back(point.start_ns);
  floor_bytes.push_back(point.floor_bytes);
  end_bytes.push_back(point.end_bytes);
  peak_bytes.push_back(point.peak_bytes);
}

void RankStepMetrics::MoveLastToInProgress() {
  in_progress =
      Row{step.back(), start_ns.back(), floor_bytes.back(), end_bytes.back(), peak_bytes.back()};
  step.pop_back();
  start_ns.pop_back();
  floor_bytes.pop_back();
  end_bytes.pop_back();
  peak_bytes.pop_back();
}

JobStepMetrics StepMetricsOf(const JobTimeline& job) {
  JobStepMetrics out;
  out.job_id = job.job_id;
  out.time_axis = job.time_axis;
  out.bucket_ns = job.bucket_ns;
  out.ranks.reserve(job.ranks.size());
  for (const RankTimeline& r : job.ranks) {
    RankStepMetrics& m = out.ranks.emplace_back();
    m.rank = r.rank;
    m.attempt = r.attempt;
    m.host = r.host;
    for (const StepPoint& p : r.steps) m.Add(p);
    if (r.in_progress.has_value()) {
      m.Add(*r.in_progress);
      m.MoveLastToInProgress();
    }
    m.cut_short = r.cut_short;
  }
  return out;
}

bool HasStepMarkers(const JobStepMetrics& job) {
  return internal::HasStepMarkersOf(
      job.ranks, [](const RankStepMetrics& r) { return r.row_count(); },
      [](const RankStepMetrics& r) { return r.step_at(0); });
}

std::vector<const RankStepMetrics*> SelectRanks(const JobStepMetrics& job,
                                                std::optional<uint32_t> attempt) {
  return internal::SelectLatestAttempts(job.ranks, attempt);
}

StepGrid BuildStepGrid(const std::vector<const RankStepMetrics*>& ranks) {
  return internal::BuildStepGridOf(
      ranks, [](const RankStepMetrics& r) { return r.size(); },
      [](const RankStepMetrics& r, size_t i) { return r.step[i]; });
}

}  // namespace memtrace::analysis
