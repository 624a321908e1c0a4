#include "tools/sim/rank_report.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace memtrace::sim {

RankReport ReportRank(const WorkloadOptions& workload, const RankOutcome& o) {
  RankReport report;
  // Counted as durable when acknowledged, they read as stored: the sim printed 39052 durable
  // where the collector, having lost a third of its write-ahead log, held 27313.
  const uint64_t lost_by_collector = std::min(o.stats.events_lost_collector, o.stats.durable_seq);
  report.durable = o.stats.durable_seq - lost_by_collector;
  report.line = absl::StrCat("rank ", o.rank, ": ", o.stats.last_seq, " events, ", report.durable,
                             " durable, ", o.stats.events_lost, " lost");
  if (lost_by_collector > 0) {
    absl::StrAppend(&report.line, " (", lost_by_collector,
                    " of them acknowledged, then lost by the collector)");
  }
  if (!o.status.ok()) absl::StrAppend(&report.line, " -- FAILED: ", o.status.message());
  if (o.oom_step.has_value()) {
    // A job too big for the simulated device runs out of memory where nothing was planted;
    // "planted: none" above would otherwise be all it said.
    const bool planted = workload.oom_rank.has_value() && *workload.oom_rank == o.rank;
    absl::StrAppend(
        &report.line, " -- ran out of memory in step ", *o.oom_step,
        planted ? " (planted)" : " (NOT planted: this rank's memory outgrew --device_bytes)");
  }
  return report;
}

}  // namespace memtrace::sim
