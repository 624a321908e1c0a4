// Writes a job's memory as Chrome trace-event JSON, the format ui.perfetto.dev and
// chrome://tracing load. Per rank (and attempt) one process, pid = rank (rank + 10000000 x
// attempt for restarts; see TracePids past attempt 429), named "rank N (host)", holding:
//   - "live bytes": counter of device live bytes; exact from raw events when the caller has
//     them (FineSeries), else from the rollups (the value at each step's start and end);
//   - "step floor/peak": the floor and peak of each step, held over the step (two series);
//   - "device used": counter from device samples (raw) or each step's device_used_max;
//   - "tag: NAME": live bytes of the job's top tags at each step end;
//   - "step N" slices on the "steps" thread, with the step's rollup in args;
//   - from raw events: each phase run (rollout, weight_sync, ...) as an async slice (a "b"/"e"
//     pair: runs that do not nest get lanes of their own), and each OOM as an instant event "OOM"
//     on the steps thread, with the bytes requested, tag and call site in args.
// Times are microseconds since the earliest moment in the export (otherData.time_origin_ns
// holds it in ns since the epoch), so sub-microsecond detail survives the JSON doubles.
#ifndef MEMTRACE_QUERY_EXPORT_PERFETTO_TRACE_H_
#define MEMTRACE_QUERY_EXPORT_PERFETTO_TRACE_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "proto/memtrace/v1/query.pb.h"
#include "query/export/live_series.h"

namespace memtrace::exporter {

inline constexpr char kLiveBytesTrack[] = "live bytes";
inline constexpr char kStepFloorPeakTrack[] = "step floor/peak";
inline constexpr char kDeviceUsedTrack[] = "device used";
inline constexpr char kTagTrackPrefix[] = "tag: ";

// Raw-event series of one rank, keyed by (rank, attempt).
struct FineSeries {
  std::vector<SeriesPoint> live;
  std::vector<SeriesPoint> device_used;
  std::vector<PhaseSlice> phases;
  std::vector<OomMark> ooms;
};
using FineSeriesMap = std::map<std::pair<uint32_t, uint32_t>, FineSeries>;

struct PerfettoOptions {
  // How many tags get a counter track (the ones with the most live bytes at any step end).
  size_t top_tags = 5;
  // The rollups are time buckets (GetRollups with TIMELINE_AXIS_TIME), not steps.
  bool time_axis = false;
};

// The process id of a rank's attempt in the trace: rank + 10000000 x attempt, one of its own
// for every stream of the job (ranks below 10000000: launcher ranks, subprocesses and
// rankless workers alike).
int64_t TracePid(uint32_t rank, uint32_t attempt);

// The process ids of `rollups`' streams, in its order: each one's TracePid while all of them fit
// the 32 bits Perfetto's JSON importer reads a pid into (through attempt 429; a larger one is
// read as pid 0, and every such stream drawn into one process); past that, 1, 2, ... in order
// of attempt and rank, the process names ("rank N attempt A") saying which is which.
std::vector<int64_t> TracePids(const v1::GetRollupsResponse& rollups);

// Writes the trace of `job_id`. Ranks absent from `fine` use their rollups for live bytes.
// Fails only when `out` goes bad (INTERNAL naming the failure).
absl::Status WritePerfettoTrace(const std::string& job_id, const v1::GetRollupsResponse& rollups,
                                const FineSeriesMap& fine, const PerfettoOptions& options,
                                std::ostream& out);

}  // namespace memtrace::exporter

#endif  // MEMTRACE_QUERY_EXPORT_PERFETTO_TRACE_H_
