// `memtrace live` of a rank's subprocess (RankIdentity.subprocess_of_rank: an inference engine
// or a worker that a rank's process started, which inherited its RANK), named by its stream's
// number in `memtrace ranks`. The analyses compare ranks and leave subprocesses out; a rank's
// own `live` lists each subprocess's live bytes beside it, and this reads what those bytes are:
// the subprocess's live set at a moment, by tag and source, compared with nothing.
#ifndef MEMTRACE_COLLECTOR_SERVER_SUBPROCESS_LIVE_H_
#define MEMTRACE_COLLECTOR_SERVER_SUBPROCESS_LIVE_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collector/store/event_store.h"
#include "proto/memtrace/v1/analysis.pb.h"
#include "proto/memtrace/v1/query.pb.h"

namespace memtrace::collector {

// The stream numbered `rank` in job `job_id` when it is a rank's subprocess; nullopt when it is
// a rank or no stream of the job. NOT_FOUND naming the job when the store does not know it.
absl::StatusOr<std::optional<v1::RankSummary>> FindSubprocessStream(const EventStore& store,
                                                                    absl::string_view job_id,
                                                                    uint32_t rank);

// Fills `report` with `stream`'s (a subprocess's) live set at `request`'s moment: its latest;
// a time (LiveRequest.at_ns, collector's clock); its own first OOM; its own peak (its rows'
// highest peak_bytes, read after the event that reached it); or, for a step, `step_end`: its
// rank's end of that step, which the caller found in the rank's rows (the subprocess has no
// steps of its own, as a rule: its process opens no step range). NOT_FOUND for an attempt it
// did not run in, or an OOM it did not have; OUT_OF_RANGE for a moment before its first event.
absl::Status DescribeSubprocessLive(const EventStore& store, const v1::RankSummary& stream,
                                    const v1::LiveRequest& request,
                                    const std::optional<LivePoint>& step_end,
                                    v1::LiveReport* report);

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_SERVER_SUBPROCESS_LIVE_H_
