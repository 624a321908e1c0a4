// Latency of the four questions memtrace answers, asked the way the CLI and the Analysis service
// ask them: gRPC Query calls (GetRollups, LiveAt) to a collector serving a data directory, the
// wire answer converted to the analyses' input (query/analysis/rollup_convert.h), then the pure
// analysis. "Cold" is the first question after a fresh collector start (a new EventStore open:
// RocksDB caches empty; the OS page cache is whatever it is), "warm" the median of repeats.
#ifndef MEMTRACE_TOOLS_BENCH_QUERY_RUN_H_
#define MEMTRACE_TOOLS_BENCH_QUERY_RUN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace memtrace::bench {

enum class Question { kDiverged, kGrowth, kLeaks, kLive };
const char* QuestionName(Question q);
inline constexpr Question kAllQuestions[] = {Question::kDiverged, Question::kGrowth,
                                             Question::kLeaks, Question::kLive};

struct QueryPlan {
  std::string data_dir;  // a collector data directory no other process has open
  std::string job_id;
  // `live`: rank live_rank at time live_at_ns, next to other_ranks (the same moment).
  uint32_t live_rank = 0;
  int64_t live_at_ns = 0;
  std::vector<uint32_t> other_ranks;
  int warm_repeats = 5;
};

struct QuestionTiming {
  Question question = Question::kDiverged;
  double open_ms = 0;  // collector start (store open) before the cold question
  double cold_ms = 0;
  double warm_ms = 0;  // median of the warm repeats
  std::string answer;  // one line, e.g. "rank 5 from step 30"
  uint64_t response_bytes = 0;  // wire bytes the question read
  // For the rollup questions, one warm answer taken apart in-process: reading the rollups from
  // the store (EventStore::Rollups, no gRPC), converting them, and the analysis alone; the rest
  // of warm_ms is gRPC (serialize, loopback, parse).
  double store_ms = 0;
  double convert_ms = 0;
  double analysis_ms = 0;
};

// Starts a collector on the directory once per question (so each has a cold first call), asks
// it, repeats it warm, and stops the collector.
absl::StatusOr<std::vector<QuestionTiming>> TimeQuestions(const QueryPlan& plan);

// The step-start time of `step` on `rank` (from the stored rollups), to pick live_at_ns.
absl::StatusOr<int64_t> StepStartNs(const std::string& data_dir, const std::string& job_id,
                                    uint32_t rank, int64_t step);

}  // namespace memtrace::bench

#endif  // MEMTRACE_TOOLS_BENCH_QUERY_RUN_H_
