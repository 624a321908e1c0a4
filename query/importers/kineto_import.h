// Imports Kineto trace files, one per rank: parse a file (streaming), decide its rank (see
// rank_assignment.h), open that rank's sink, record its events (kineto_events.h), close the
// sink, and report a summary; then the next file. Only one file's memory events are held at a
// time. Where events go is the caller's choice (a Transport per rank in the CLI, a recording
// sink in tests).
#ifndef MEMTRACE_QUERY_IMPORTERS_KINETO_IMPORT_H_
#define MEMTRACE_QUERY_IMPORTERS_KINETO_IMPORT_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/stream/event_sink.h"
#include "query/importers/kineto_events.h"
#include "query/importers/kineto_trace.h"
#include "query/importers/rank_assignment.h"

namespace memtrace::importers {

// Who one imported file is, for the sink's stream identity.
struct ImportedRank {
  int32_t rank = 0;
  int32_t world_size = 0;
  std::string rank_source;
  std::string path;
  std::optional<int64_t> pid;  // of the profiled process
  int32_t device_index = -1;   // the (first) CUDA device its memory events name
  // Names what is imported (never 0): a hash of the trace's memory records, steps, annotations
  // and base time, and of the options that change the events. The same file imported the same
  // way gets the same one.
  uint64_t fingerprint = 0;
  // The same of the trace alone, whatever the options: the same trace imported with other flags
  // has another `fingerprint` and this one.
  uint64_t trace_fingerprint = 0;
  // The first and last memory event, ns since the epoch (0 when the trace has none).
  int64_t first_ts_ns = 0;
  int64_t last_ts_ns = 0;
};

// One rank's destination. Finish() is called once after the last event: it must return only
// when everything recorded is delivered (or fail saying why).
class RankImportSink : public EventSink {
 public:
  // Waits for what was recorded so far to drain (called every checkpoint_events events), so a
  // bounded sink never has to drop.
  virtual absl::Status Checkpoint() = 0;
  virtual absl::Status Finish() = 0;
  // After a successful Finish: how many of the events recorded the destination already held
  // (the same file imported before into the same job, rank and attempt), and how many were
  // recorded.
  struct Delivery {
    uint64_t recorded = 0;
    uint64_t already_stored = 0;
  };
  virtual Delivery delivered() const { return {}; }
};

using RankSinkFactory =
    std::function<absl::StatusOr<std::unique_ptr<RankImportSink>>(const ImportedRank& rank)>;

struct KinetoImportOptions {
  bool include_cpu_memory = true;
  bool module_tags = true;  // see KinetoParseOptions::module_tags
  uint64_t checkpoint_events = 1 << 18;
  // Progress bar on this stream when it is a terminal; nullptr for none.
  std::FILE* progress = nullptr;
  // Called once every file is checked (CheckFilesBeforeImport), before the first is parsed,
  // with the ranks planned, which it may amend (RankAssigner::ImplyWorldSize): an error stops
  // the import there, with nothing imported.
  std::function<absl::Status(RankAssigner& plan)> before_first_file;
  // The rank the job already holds a parsed trace as, if any (`trace`: all but its rank and
  // world size): a file that states no rank, imported again, keeps it.
  std::function<std::optional<int32_t>(const ImportedRank& trace)> stored_rank_of;
};

struct KinetoFileSummary {
  ImportedRank rank;
  KinetoParseCounts parse;
  KinetoEventStats events;
  uint64_t file_bytes = 0;
  double seconds = 0;
  RankImportSink::Delivery delivery;
};

// "rank1.json.gz: 216092 events read, 28010 memory events imported (26770 CUDA, 1240 CPU),
//  5 steps (5 ProfilerStep ranges), 2 tags, rank 1 of 2 (distributedInfo), ..."
std::string FormatSummary(const KinetoFileSummary& summary);

// Checks what can be checked of `paths` before any is stored, and plans their ranks: that each
// opens and reads as a trace up to its events, that no file is given twice, and that no two
// state the same rank before their events (distributedInfo there, where PyTorch writes it, or
// their names; see rank_assignment.h). Errors name the file and say that nothing was imported.
absl::StatusOr<RankAssigner> CheckFilesBeforeImport(const std::vector<std::string>& paths);

// Imports `paths` in order, calling `on_file` after each, after CheckFilesBeforeImport. Stops
// at the first error, which names the file and, when files before it were imported (they stay
// imported), how many.
absl::StatusOr<std::vector<KinetoFileSummary>> ImportKinetoFiles(
    const std::vector<std::string>& paths, const KinetoImportOptions& options,
    const RankSinkFactory& sinks,
    const std::function<void(const KinetoFileSummary&)>& on_file = nullptr);

}  // namespace memtrace::importers

#endif  // MEMTRACE_QUERY_IMPORTERS_KINETO_IMPORT_H_
