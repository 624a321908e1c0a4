// `memtrace import --job J --format kineto FILE...`: imports per-rank PyTorch profiler (Kineto)
// traces into the collector through the normal ingest path, one agent Transport per rank
// (identity.launcher "kineto-import"), and prints one summary line per file.
#ifndef MEMTRACE_QUERY_IMPORTERS_IMPORT_COMMAND_H_
#define MEMTRACE_QUERY_IMPORTERS_IMPORT_COMMAND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "query/cli/command.h"
#include "query/importers/kineto_import.h"

namespace memtrace::importers {

cli::Command ImportCommand();

struct TransportSinkOptions {
  std::string collector;
  std::string job_id;
  uint32_t attempt = 0;
  // How long a checkpoint or the final drain may wait for the collector's acknowledgements.
  absl::Duration drain_timeout = absl::Seconds(60);
};

// A RankImportSink that sends to the collector through a real Transport. Finish() drains,
// closes the stream, and fails (naming the collector) unless every event was acknowledged as
// durable with none lost.
absl::StatusOr<std::unique_ptr<RankImportSink>> StartTransportSink(
    const TransportSinkOptions& options, const ImportedRank& rank);

}  // namespace memtrace::importers

#endif  // MEMTRACE_QUERY_IMPORTERS_IMPORT_COMMAND_H_
