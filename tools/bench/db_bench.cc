#include "tools/bench/db_bench.h"

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "query/cli/text_escape.h"
#include "tools/bench/proc_stats.h"

namespace memtrace::bench {

std::string DbBenchCommand(const DbBenchOptions& o, int64_t num) {
  return absl::StrCat(o.binary, " --benchmarks=fillseq --db=", cli::ShellWord(o.dir),
                      " --key_size=", o.key_size, " --value_size=", o.value_size,
                      " --batch_size=", o.batch_size, " --threads=", o.threads,
                      " --sync=", o.sync ? 1 : 0, " --compression_type=", o.compression,
                      " --compression_ratio=", o.compression_ratio, " --num=", num,
                      " --write_buffer_size=", o.write_buffer_size,
                      " --max_background_jobs=2 --stats_interval_seconds=0");
}

absl::StatusOr<DbBenchResult> ParseFillseq(absl::string_view output) {
  // Progress reports end in '\r', not '\n'.
  for (absl::string_view line : absl::StrSplit(output, absl::ByAnyChar("\r\n"))) {
    if (line.rfind("fillseq", 0) != 0) continue;
    std::vector<absl::string_view> w = absl::StrSplit(line, ' ', absl::SkipEmpty());
    DbBenchResult r;
    bool have_ops = false;
    for (size_t i = 1; i < w.size(); ++i) {
      if (w[i] == "micros/op") (void)absl::SimpleAtod(w[i - 1], &r.micros_per_op);
      if (w[i] == "ops/sec") have_ops = absl::SimpleAtod(w[i - 1], &r.ops_per_second);
      if (w[i] == "MB/s") (void)absl::SimpleAtod(w[i - 1], &r.mb_per_second);
    }
    if (!have_ops) continue;
    r.line = std::string(line);
    return r;
  }
  return absl::NotFoundError(
      absl::StrCat("no fillseq result line in db_bench output: ", output.substr(0, 2000)));
}

namespace {

absl::StatusOr<DbBenchResult> RunOnce(const DbBenchOptions& options, int64_t num) {
  const std::string command = DbBenchCommand(options, num);
  absl::StatusOr<CommandResult> run =
      RunCommand(command, absl::Seconds(options.seconds * 4 + 60));
  if (!run.ok()) return run.status();
  if (run->exit_code != 0) {
    return absl::InternalError(absl::StrCat("db_bench exited ", run->exit_code,
                                            run->timed_out ? " (timed out)" : "", ": ",
                                            run->output.substr(0, 2000)));
  }
  absl::StatusOr<DbBenchResult> r = ParseFillseq(run->output);
  if (!r.ok()) return r.status();
  r->command = command;
  return r;
}

int64_t PerThread(double ops, int threads) {
  return std::max<int64_t>(16, static_cast<int64_t>(ops / std::max(1, threads)));
}

}  // namespace

absl::StatusOr<DbBenchResult> RunDbBench(const DbBenchOptions& options) {
  if (access(options.binary.c_str(), X_OK) != 0) {
    return absl::UnavailableError(
        absl::StrCat(options.binary, " not found: apt-get install rocksdb-tools"));
  }
  absl::StatusOr<DbBenchResult> probe =
      RunOnce(options, PerThread(options.expected_ops_per_second, options.threads));
  if (!probe.ok() || options.seconds <= 1.5) return probe;
  return RunOnce(options, PerThread(probe->ops_per_second * options.seconds, options.threads));
}

}  // namespace memtrace::bench
