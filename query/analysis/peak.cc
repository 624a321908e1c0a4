#include "query/analysis/peak.h"

#include <algorithm>
#include <map>
#include <optional>

#include "query/analysis/robust_stats.h"

namespace memtrace::analysis {
namespace {

struct Acc {
  PeakEntry entry;
  uint32_t rows = 0;
  std::vector<double> peaks;      // one per occurrence: a row, or a phase's run (Run)
  std::vector<double> ends;       // one per row with a close
  std::optional<double> running;  // the peak of a phase's run not closed yet
};

// Makes `peak`, reached in row `p`, the group's highest when it is (or the first).
// `moment_ns`: when the row reached it, 0 when unknown (the row's start stands for it).
void RaisePeak(Acc& acc, const StepPoint& p, uint64_t peak, int64_t moment_ns) {
  if (acc.rows > 0 && peak <= acc.entry.peak_bytes) return;
  acc.entry.peak_bytes = peak;
  acc.entry.peak_step = p.step;
  acc.entry.at_moment = moment_ns != 0;
  acc.entry.peak_ns = moment_ns != 0 ? moment_ns : p.start_ns;
}

// One row of the group: the highest peak, and what was live at its close (nullopt for a phase
// that did not close in the row: what was live at its end is not what the phase left behind).
void Add(Acc& acc, const StepPoint& p, uint64_t peak, std::optional<uint64_t> end,
         int64_t moment_ns) {
  RaisePeak(acc, p, peak, moment_ns);
  ++acc.rows;
  if (end.has_value()) acc.ends.push_back(static_cast<double>(*end));
}

// A phase's row, for its runs' peaks: a run that spans rows (a rollout over four 250 ms buckets)
// peaks at the highest of them, and ends in the row where it closes. Counted row by row, the
// partial peaks of its first buckets pulled the typical peak under every rollout's. A run begun
// in the row where the one before it closed takes its peak from the rows after: that row's peak
// is mostly the closed run's (a row keeps one peak for all of a phase's runs in it).
void Run(Acc& acc, const GroupBytes& g) {
  const double peak = static_cast<double>(g.peak_bytes);
  acc.running = std::max(acc.running.value_or(peak), peak);
  if (!g.closed) return;
  acc.peaks.push_back(*acc.running);
  acc.running.reset();
}

// A row's list of the groups `by` names (kRank has none).
absl::Span<const GroupBytes> GroupsOf(const StepPoint& p, PeakBy by) {
  switch (by) {
    case PeakBy::kPhase:
      return p.by_phase();
    case PeakBy::kTag:
      return p.by_tag();
    case PeakBy::kSource:
      return p.by_source();
    case PeakBy::kRank:
      break;
  }
  return {};
}

}  // namespace

absl::string_view PeakByName(PeakBy by) {
  switch (by) {
    case PeakBy::kPhase:
      return "phase";
    case PeakBy::kTag:
      return "tag";
    case PeakBy::kSource:
      return "source";
    case PeakBy::kRank:
      return "rank";
  }
  return "phase";
}

PeakReport FindPeaks(const JobTimeline& job, const PeakParams& params) {
  PeakReport report;
  report.job_id = job.job_id;
  report.by = params.by;
  report.params = params;
  report.bucket_ns = job.time_axis ? job.bucket_ns : 0;
  std::vector<const RankTimeline*> ranks = SelectRanks(job, params.attempt);
  report.ranks = static_cast<uint32_t>(ranks.size());

  // group -> per-rank accumulators (ranks in order).
  std::map<NameId, std::vector<Acc>> groups;
  for (const RankTimeline* r : ranks) {
    std::map<NameId, Acc> mine;
    for (size_t i = std::min<size_t>(params.warmup_steps, r->steps.size()); i < r->steps.size();
         ++i) {
      const StepPoint& p = r->steps[i];
      if (params.by == PeakBy::kRank) {
        Acc& acc = mine[0];
        Add(acc, p, p.peak_bytes, p.end_bytes, p.peak_ns);
        acc.peaks.push_back(static_cast<double>(p.peak_bytes));
        continue;
      }
      if (params.by == PeakBy::kPhase) {
        for (const GroupBytes& g : GroupsOf(p, params.by)) {
          Acc& acc = mine[g.name];
          Add(acc, p, g.peak_bytes, g.closed ? std::optional<uint64_t>(g.live_bytes) : std::nullopt,
              /*moment_ns=*/0);
          Run(acc, g);
        }
        continue;
      }
      for (const GroupBytes& g : GroupsOf(p, params.by)) {
        Acc& acc = mine[g.name];
        Add(acc, p, g.peak_bytes, g.live_bytes, /*moment_ns=*/0);
        acc.peaks.push_back(static_cast<double>(g.peak_bytes));
      }
    }
    // The step a running rank is in: the peaks it reached so far were reached (live --at-peak
    // reads the highest), but its partial numbers are no step's typical ones. A group first
    // seen there (a rank in its first step, which is where a model too large for its device
    // fails; a phase begun for the first time) has its peak so far and no step (steps 0).
    if (r->in_progress.has_value() && r->steps.size() >= params.warmup_steps) {
      const StepPoint& p = *r->in_progress;
      const auto raise = [&](NameId name, uint64_t peak, int64_t moment_ns) {
        RaisePeak(mine[name], p, peak, moment_ns);
      };
      if (params.by == PeakBy::kRank) {
        raise(0, p.peak_bytes, p.peak_ns);
      } else {
        for (const GroupBytes& g : GroupsOf(p, params.by)) {
          raise(g.name, g.peak_bytes, /*moment_ns=*/0);
        }
      }
    }
    for (auto& [name, acc] : mine) {
      if (acc.running.has_value()) acc.peaks.push_back(*acc.running);  // open at the window's end
      acc.entry.group = job.names.Name(name);
      acc.entry.rank = r->rank;
      acc.entry.steps = acc.rows;
      // None: only in the step in progress, which has no typical peak yet.
      if (!acc.peaks.empty()) {
        acc.entry.median_peak_bytes = static_cast<uint64_t>(Median(acc.peaks));
      }
      acc.entry.open_at_end = static_cast<uint32_t>(acc.rows - acc.ends.size());
      if (!acc.ends.empty()) acc.entry.median_end_bytes = static_cast<uint64_t>(Median(acc.ends));
      groups[name].push_back(std::move(acc));
    }
  }

  std::vector<std::pair<PeakSummary, std::vector<PeakEntry>>> rows;
  for (auto& [name, accs] : groups) {
    PeakSummary s;
    s.group = job.names.Name(name);
    s.ranks = static_cast<uint32_t>(accs.size());
    std::vector<double> per_rank;
    std::vector<PeakEntry> entries;
    for (Acc& a : accs) {
      per_rank.push_back(static_cast<double>(a.entry.peak_bytes));
      if (entries.empty() || a.entry.peak_bytes > s.max_peak_bytes) {
        s.max_peak_bytes = a.entry.peak_bytes;
        s.max_rank = a.entry.rank;
        s.max_step = a.entry.peak_step;
      }
      entries.push_back(std::move(a.entry));
    }
    s.median_rank_peak_bytes = static_cast<uint64_t>(Median(per_rank));
    s.min_rank_peak_bytes =
        static_cast<uint64_t>(*std::min_element(per_rank.begin(), per_rank.end()));
    rows.emplace_back(std::move(s), std::move(entries));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.first.max_peak_bytes > b.first.max_peak_bytes;
  });
  for (auto& [summary, entries] : rows) {
    report.summaries.push_back(summary);
    for (PeakEntry& e : entries) report.entries.push_back(std::move(e));
  }
  return report;
}

}  // namespace memtrace::analysis
