// `memtrace live` of a rank's subprocess (RankIdentity.subprocess_of_rank: an inference engine
// or a worker that a rank's process started, which inherited its RANK), named by its stream's
// number in `memtrace ranks`. The analyses compare ranks and leave subprocesses out; a rank's
// own `live` lists each subprocess's live bytes beside it, and this reads what those bytes are:
// the subprocess's live set at a moment, by tag and source, compared with nothing.
#ifndef MEMTRACE_COLLECTOR_SERVER_SUBPROCESS_LIVE_H_
#define MEMTRACE_COLLECTOR_SERVER_SUBPROCESS_LIVE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collector/store/event_store.h"
#include "proto/memtrace/v1/analysis.pb.h"
#include "proto/memtrace/v1/query.pb.h"

namespace memtrace::collector {

// The stream numbered `rank` among a job's `streams` (EventStore::ListRanks) when it is a rank's
// subprocess; nullptr when it is a rank or none of them.
const v1::RankSummary* FindSubprocessStream(const std::vector<v1::RankSummary>& streams,
                                            uint32_t rank);

// Its rank's end of `step`, which the caller finds in the rank's rows (the analyses' step
// metrics): a time (LivePoint::Kind::kAtCollectorTime), or kNow for the rank's last step; an
// error (NOT_FOUND naming the rank) when the rank has no such step.
using RankStepEnd = std::function<absl::StatusOr<LivePoint>(int64_t step)>;

// Fills `report` with `stream`'s (a subprocess's, one of the job's `streams`) live set at
// `request`'s moment: its latest; a time (LiveRequest.at_ns, collector's clock); its own first
// OOM; its own peak (its rows' highest peak_bytes, read after the event that reached it); or a
// step: the end of its own step S where it records step markers (a trainer whose engine took
// the rank first: RankIdentity.started_the_rank), else its rank's end of S, `rank_step_end`
// (an engine opens no step range), and for the rank's last step, the rank's last event once its
// stream has ended (its latest while it runs). NOT_FOUND for an attempt it did not run in, a
// stream with no event yet, a step it or its rank does not have, or an OOM it did not have;
// OUT_OF_RANGE for a moment before its first event.
absl::Status DescribeSubprocessLive(const EventStore& store,
                                    const std::vector<v1::RankSummary>& streams,
                                    const v1::RankSummary& stream, const v1::LiveRequest& request,
                                    const RankStepEnd& rank_step_end, v1::LiveReport* report);

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_SERVER_SUBPROCESS_LIVE_H_
