// `live`: what was live on one rank at a moment (a time, or its OOM), grouped by tag and/or
// source, top N, next to the same groups on the other ranks at the same moment.
#ifndef MEMTRACE_QUERY_ANALYSIS_LIVE_H_
#define MEMTRACE_QUERY_ANALYSIS_LIVE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "query/analysis/live_set.h"
#include "query/analysis/timeline.h"

namespace memtrace::analysis {

enum class LiveGroupBy { kTag, kSource, kTagSource };
enum class LiveOrder {
  kBytes,   // most bytes on the rank first
  kExcess,  // most bytes above the other ranks' median first: "what is different here"
};

struct LiveParams {
  LiveGroupBy by = LiveGroupBy::kTag;
  LiveOrder order = LiveOrder::kBytes;
  uint32_t top_n = 10;
  // Per group, the other ranks' bytes are listed one by one only up to this many ranks (the
  // median and maximum always cover all of them).
  uint32_t max_other_ranks = 16;
};

// A rank's OOM, from its rollups: the first step that recorded one.
struct OomMoment {
  int64_t step = 0;
  int64_t ts_ns = 0;  // the end of that step's rollup: the latest the OOM can have happened
  uint64_t requested_bytes = 0;
  // What the failed allocation was for, when the live set's replay read it ("" otherwise).
  std::string tag;
  std::string source;
};

// The first OOM `rank` recorded, if any.
std::optional<OomMoment> FindOom(const RankTimeline& rank);

struct RankBytes {
  uint32_t rank = 0;
  uint64_t bytes = 0;
};

struct LiveGroup {
  std::string tag;     // set when grouping by tag
  std::string source;  // set when grouping by source
  uint64_t bytes = 0;
  uint64_t count = 0;
  int64_t oldest_step = 0;
  int64_t newest_step = 0;
  uint64_t others_median_bytes = 0;
  uint64_t others_max_bytes = 0;
  uint32_t others_max_rank = 0;
  int64_t excess_bytes = 0;       // bytes - others_median_bytes
  std::vector<RankBytes> others;  // by rank, up to max_other_ranks
};

struct LiveReport {
  std::string job_id;
  uint32_t rank = 0;
  int64_t at_step = 0;
  int64_t at_ns = 0;
  std::optional<OomMoment> oom;  // set when the moment is the rank's OOM
  std::vector<std::string> open_phases;
  uint64_t total_bytes = 0;
  uint64_t total_count = 0;
  uint32_t other_ranks = 0;
  uint64_t others_median_total_bytes = 0;
  uint32_t groups_total = 0;  // groups before the top-N cut
  std::vector<LiveGroup> groups;
  LiveParams params;
};

// Groups `rank`'s live allocations and compares them with `others` (the other ranks at the same
// moment; may be empty). `oom` is copied into the report. Pure.
LiveReport DescribeLive(absl::string_view job_id, const RankLiveSet& rank,
                        absl::Span<const RankLiveSet> others, const LiveParams& params = {},
                        std::optional<OomMoment> oom = std::nullopt);

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_LIVE_H_
