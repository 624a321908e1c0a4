// The user's alternative to memtrace's queries: the same events exported to CSV and the same four
// questions asked in SQL, in DuckDB (npm @duckdb/node-api, run by node) or, when DuckDB cannot be
// installed, sqlite3 (diverged and live only). The SQL is what a user would write over raw
// events: live bytes as a running sum per rank, steps from the STEP markers, a free's tag from the
// allocation at its address, per-step floors, medians across ranks, slopes of floors.
#ifndef MEMTRACE_TOOLS_BENCH_SQL_BASELINE_H_
#define MEMTRACE_TOOLS_BENCH_SQL_BASELINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace memtrace::bench {

struct CsvExport {
  std::string events_csv;   // rank,seq,ts,kind,address,bytes,tag
  std::string strings_csv;  // rank,id,kind,value
  uint64_t rows = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};

// Writes every stored event of `job_id` in `data_dir` (read back through EventStore::ReadEvents,
// as an export tool would) to <out_dir>/<job_id>.events.csv and its string tables to
// <out_dir>/<job_id>.strings.csv. The directory must not be open elsewhere.
absl::StatusOr<CsvExport> ExportJobCsv(const std::string& data_dir, const std::string& job_id,
                                       const std::string& out_dir);

// The thresholds the SQL uses: the analyses' defaults (diverged.h, growth.h, leaks.h).
struct SqlParams {
  uint32_t live_rank = 0;
  int64_t live_at_ns = 0;
  std::vector<uint32_t> other_ranks;
  int warmup_steps = 5;
  int baseline_steps = 5;
  int persistence_steps = 5;
  uint64_t min_excess_bytes = 64ull << 20;
  double min_excess_fraction = 0.02;
  uint64_t min_growth_bytes = 64ull << 20;
};

struct SqlQuestion {
  std::string name;  // "diverged", "growth", "leaks", "live"
  std::string sql;   // over tables `events` and `strings`
};

// DuckDB SQL for all four questions; sqlite SQL for diverged and live.
std::vector<SqlQuestion> DuckDbQuestions(const SqlParams& params);
std::vector<SqlQuestion> SqliteQuestions(const SqlParams& params);

struct SqlTiming {
  std::string name;
  double cold_ms = 0;  // DuckDB: straight over the CSV file; sqlite: first run after import
  double warm_ms = 0;  // median of repeats over the table loaded in memory
  std::string answer;  // first rows, as JSON (DuckDB) or CSV (sqlite)
};

struct SqlRun {
  std::string engine;  // "DuckDB v1.5.6", "sqlite 3.40.1"
  double load_ms = 0;  // CSV -> in-memory table
  std::vector<SqlTiming> questions;
};

// Installs @duckdb/node-api under `cache_dir` with npm unless it is already there; returns the
// directory holding node_modules.
absl::StatusOr<std::string> EnsureDuckDb(const std::string& cache_dir, absl::Duration timeout);

// Runs the questions in DuckDB through node (one process, `threads` DuckDB threads).
absl::StatusOr<SqlRun> RunDuckDb(const std::string& module_dir, const CsvExport& csv,
                                 const std::vector<SqlQuestion>& questions, int warm_repeats,
                                 int threads, absl::Duration timeout);

// Runs the questions in sqlite3 (an in-memory database the CSV is imported into).
absl::StatusOr<SqlRun> RunSqlite(const CsvExport& csv, const std::vector<SqlQuestion>& questions,
                                 int warm_repeats, absl::Duration timeout);

}  // namespace memtrace::bench

#endif  // MEMTRACE_TOOLS_BENCH_SQL_BASELINE_H_
