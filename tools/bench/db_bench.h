// RocksDB's own write benchmark (Debian rocksdb-tools, /usr/bin/db_bench) as the ceiling for the
// collector's ingest: fillseq with the collector's key size, value size, batch size, sync and
// compression, on the same disk, in the same run.
#ifndef MEMTRACE_TOOLS_BENCH_DB_BENCH_H_
#define MEMTRACE_TOOLS_BENCH_DB_BENCH_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memtrace::bench {

struct DbBenchOptions {
  std::string binary = "/usr/bin/db_bench";
  std::string dir;  // emptied by db_bench (fillseq destroys the db first)
  int key_size = 20;
  int value_size = 100;
  int batch_size = 1;   // entries per WriteBatch
  int threads = 1;
  bool sync = true;
  std::string compression = "lz4";
  double compression_ratio = 0.5;
  // db_bench ignores --duration for sequential fills, so the run is sized by --num (entries per
  // thread): a probe of about 1 s at expected_ops_per_second measures the rate, then the real
  // run writes rate x seconds entries.
  double seconds = 10;
  double expected_ops_per_second = 10000;
  int64_t write_buffer_size = 64 << 20;
};

struct DbBenchResult {
  double ops_per_second = 0;  // entries written per second, all threads together
  double micros_per_op = 0;
  double mb_per_second = 0;
  std::string command;
  std::string line;  // db_bench's own result line
};

// The command line for `options` writing `num` entries per thread.
std::string DbBenchCommand(const DbBenchOptions& options, int64_t num);

// Runs db_bench fillseq (probe, then the sized run); UNAVAILABLE when the binary is missing.
absl::StatusOr<DbBenchResult> RunDbBench(const DbBenchOptions& options);

// Reads "fillseq : 1.23 micros/op 812345 ops/sec 10.0 seconds 8123450 operations; 52.1 MB/s".
absl::StatusOr<DbBenchResult> ParseFillseq(absl::string_view output);

}  // namespace memtrace::bench

#endif  // MEMTRACE_TOOLS_BENCH_DB_BENCH_H_
