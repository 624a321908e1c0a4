// Latency of the four questions memtrace answers, asked the way `memtrace diverged|growth|leaks|
// live` asks them: one gRPC call to the collector's Analysis service, which reads the job's
// rollups (and live sets) from the store, converts them to the analyses' input
// (query/analysis/rollup_convert.h), runs the pure analysis and answers with a report. "Cold" is
// the first question after a fresh collector start (a new EventStore open: RocksDB caches and
// the Analysis service's timeline cache empty; the OS page cache is whatever it is), "warm" the
// median of repeats (the timeline cache holds the job).
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
  // `live`: rank live_rank at time live_at_ns, next to every other rank at the same moment.
  uint32_t live_rank = 0;
  int64_t live_at_ns = 0;
  int warm_repeats = 5;
};

struct QuestionTiming {
  Question question = Question::kDiverged;
  double open_ms = 0;  // collector start (store open) before the cold question
  double cold_ms = 0;
  double warm_ms = 0;  // median of the warm repeats
  std::string answer;  // one line, e.g. "rank 5 from step 30"
  uint64_t response_bytes = 0;  // wire bytes the question read
  // For the rollup questions, the service's work taken apart in-process after the calls:
  // loading the timeline from the store (LoadJobTimeline: read and convert, as the service does
  // without its cache) and the analysis alone.
  double load_ms = 0;
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
