// The edge between the collector's wire messages and the analyses' plain input: stored rollups
// (GetRollupsResponse) become a JobTimeline and a LiveAt answer becomes a RankLiveSet, with each
// rank's string-table ids resolved to names. The only analysis code that sees query.proto.
#ifndef MEMTRACE_QUERY_ANALYSIS_ROLLUP_CONVERT_H_
#define MEMTRACE_QUERY_ANALYSIS_ROLLUP_CONVERT_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/memtrace/v1/query.pb.h"
#include "query/analysis/live_set.h"
#include "query/analysis/timeline.h"

namespace memtrace::analysis {

// Builds the timeline of `job_id` from its rollups. Steps are sorted; an id missing from a
// rank's string table is named "tag#7" / "source#7" / "phase#7" (the entry's batch was lost,
// the bytes are still real). INVALID_ARGUMENT when a (rank, attempt) appears twice or a rank
// has the same step twice, naming them.
absl::StatusOr<JobTimeline> TimelineFromRollups(absl::string_view job_id,
                                                const v1::GetRollupsResponse& rollups,
                                                v1::TimelineAxis axis = v1::TIMELINE_AXIS_STEP);

// Converts one rank's live allocations. Host allocations (pageable, pinned) are left out unless
// include_host: the analyses compare device memory. The wire form carries no phase per
// allocation yet, so LiveAllocation::phase and open_phases stay empty.
RankLiveSet LiveSetFromProto(const v1::LiveAtResponse& live, bool include_host = false);

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_ROLLUP_CONVERT_H_
