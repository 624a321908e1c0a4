// What the simulator says of one rank at the end of a run: events, durable, lost, why it failed,
// where it ran out of memory.
#ifndef MEMTRACE_TOOLS_SIM_RANK_REPORT_H_
#define MEMTRACE_TOOLS_SIM_RANK_REPORT_H_

#include <cstdint>
#include <string>

#include "tools/sim/runner.h"
#include "tools/sim/workload.h"

namespace memtrace::sim {

struct RankReport {
  // Events the collector holds: acknowledged, less those it acknowledged and then lost (an
  // async store that lost its last writes, TransportStats::events_lost_collector).
  uint64_t durable = 0;
  // "rank 3: 20000 events, 20000 durable, 0 lost" and what else there is to say.
  std::string line;
};

RankReport ReportRank(const WorkloadOptions& workload, const RankOutcome& outcome);

}  // namespace memtrace::sim

#endif  // MEMTRACE_TOOLS_SIM_RANK_REPORT_H_
