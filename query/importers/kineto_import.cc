#include "query/importers/kineto_import.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "query/importers/kineto_parser.h"
#include "query/importers/progress_bar.h"

namespace memtrace::importers {
namespace {

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// FNV-1a over 64-bit words.
class Fnv1a {
 public:
  void Add(uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      hash_ ^= (v >> (8 * i)) & 0xff;
      hash_ *= 0x100000001b3ull;
    }
  }
  uint64_t hash() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ull;
};

// ImportedRank::fingerprint; without `options`, ImportedRank::trace_fingerprint, which leaves
// out what the options change: the annotations (module scopes are dropped with module_tags off)
// and the name ids of ranges (interned after them).
uint64_t Fingerprint(const KinetoTrace& trace, const KinetoImportOptions* options) {
  Fnv1a h;
  if (options != nullptr) {
    h.Add(options->include_cpu_memory);
    h.Add(options->module_tags);
  }
  h.Add(static_cast<uint64_t>(trace.base_time_ns));
  h.Add(trace.memory.size());
  for (const KinetoMemoryRecord& r : trace.memory) {
    h.Add(static_cast<uint64_t>(r.ts_ns));
    h.Add(static_cast<uint64_t>(r.bytes));
    h.Add(r.address);
    h.Add((uint64_t{static_cast<uint32_t>(r.device_type)} << 32) |
          static_cast<uint32_t>(r.device_id));
  }
  const auto add_range = [&h, options](const KinetoRange& r) {
    h.Add(static_cast<uint64_t>(r.start_ns));
    h.Add(static_cast<uint64_t>(r.end_ns));
    h.Add(r.thread);
    if (options != nullptr) h.Add(r.name);
  };
  h.Add(trace.steps.size());
  for (const KinetoStepRange& s : trace.steps) {
    add_range(s.range);
    h.Add(static_cast<uint64_t>(s.step));
    h.Add(s.gpu);
  }
  if (options != nullptr) {
    h.Add(trace.annotations.size());
    for (const KinetoRange& a : trace.annotations) add_range(a);
  }
  return h.hash() != 0 ? h.hash() : 1;
}

std::string Gib(uint64_t bytes) {
  return absl::StrFormat("%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
}

}  // namespace

std::string FormatSummary(const KinetoFileSummary& s) {
  const KinetoEventStats& e = s.events;
  std::string line = absl::StrCat(s.rank.path, ": ", s.parse.trace_events, " events read, ",
                                  e.memory_events, " memory events imported (",
                                  e.cuda_memory_events, " CUDA, ", e.cpu_memory_events, " CPU");
  if (e.other_memory_events > 0) absl::StrAppend(&line, ", ", e.other_memory_events, " other");
  absl::StrAppend(&line, ")");
  if (e.cpu_memory_skipped > 0) absl::StrAppend(&line, ", ", e.cpu_memory_skipped, " CPU skipped");
  if (s.parse.memory_skipped > 0) {
    absl::StrAppend(&line, ", ", s.parse.memory_skipped,
                    " without Addr/Bytes/ts or with a malformed value skipped");
  }
  if (s.parse.memory_args_unread > 0) {
    absl::StrAppend(&line, ", ", s.parse.memory_args_unread,
                    " with Total Reserved or Ev Idx malformed kept without it");
  }
  absl::StrAppend(&line, ", ", e.steps, " steps (", s.parse.step_ranges, " ProfilerStep ranges), ",
                  e.tags, " tags (", e.tagged_allocs, " allocations tagged), rank ", s.rank.rank,
                  " of ", s.rank.world_size, " (", s.rank.rank_source, "), baseline ",
                  Gib(e.seeded_bytes), " seeded as ", e.seeded_allocations, " allocations");
  if (e.cuda_devices.size() > 1) {
    // One process's memory on several GPUs is one rank, as the agent records such a process.
    absl::StrAppend(&line, ", CUDA devices ", absl::StrJoin(e.cuda_devices, " and "),
                    " summed in this rank");
  }
  if (e.unmatched_frees > 0) {
    absl::StrAppend(&line, ", ", e.unmatched_frees,
                    " frees of blocks already freed dropped (events missing from the trace)");
  }
  if (e.total_allocated_mismatches > 0) {
    // Places, not events: after each the live bytes stored differ from Total Allocated until
    // another jump evens them out, and every event since would disagree.
    absl::StrAppend(&line, ", ", e.total_allocated_mismatches,
                    " jumps of Total Allocated that no event explains (events missing from the "
                    "trace)");
  }
  absl::StrAppend(&line, absl::StrFormat(", %.2fs", s.seconds));
  const RankImportSink::Delivery& d = s.delivery;
  if (d.recorded > 0 && d.already_stored >= d.recorded) {
    absl::StrAppend(&line, "; the collector already had all of it: nothing new stored");
  } else if (d.already_stored > 0) {
    absl::StrAppend(&line, "; the collector already had ", d.already_stored, " of the ", d.recorded,
                    " events it makes (memory events, steps, samples)");
  }
  return line;
}

namespace {

// Parses, assigns a rank to and stores one file: the `index`-th of the import.
absl::StatusOr<KinetoFileSummary> ImportKinetoFile(const std::string& path, size_t index,
                                                   const KinetoImportOptions& options,
                                                   const RankSinkFactory& sinks,
                                                   RankAssigner& assigner, bool* sink_opened) {
  absl::Time start = absl::Now();
  KinetoFileSummary summary;
  absl::StatusOr<KinetoTrace> trace;
  {
    bool terminal = options.progress != nullptr && isatty(fileno(options.progress));
    ProgressBar bar(options.progress, terminal, BaseName(path));
    KinetoParseOptions parse_options;
    parse_options.module_tags = options.module_tags;
    parse_options.progress = [&bar, &summary](uint64_t done, uint64_t total) {
      summary.file_bytes = total;
      bar.Update(done, total);
    };
    trace = ParseKinetoFile(path, parse_options);
  }
  if (!trace.ok()) return trace.status();
  if (trace->memory.empty()) {
    // Stored, it would be a rank of steps alone, or an empty job: no analysis has anything to
    // read, and the job would say nothing of why.
    return absl::FailedPreconditionError(
        trace->counts.memory_skipped > 0
            ? absl::StrCat(path, ": none of its ", trace->counts.memory_skipped,
                           " [memory] events could be imported (without Addr, Bytes or ts, or "
                           "with a malformed value)")
            : absl::StrCat(path,
                           ": the trace has no [memory] events: record it with "
                           "torch.profiler.profile(profile_memory=True)"));
  }
  summary.parse = trace->counts;
  summary.rank.path = path;
  summary.rank.pid = trace->first_pid;
  summary.rank.fingerprint = Fingerprint(*trace, &options);
  summary.rank.trace_fingerprint = Fingerprint(*trace, nullptr);
  for (const KinetoMemoryRecord& r : trace->memory) {
    const int64_t at = trace->base_time_ns + r.ts_ns;  // both bounded to +-2^62 by the parser
    if (summary.rank.first_ts_ns == 0 || at < summary.rank.first_ts_ns)
      summary.rank.first_ts_ns = at;
    if (summary.rank.last_ts_ns == 0 || at > summary.rank.last_ts_ns) summary.rank.last_ts_ns = at;
  }
  absl::StatusOr<RankChoice> choice =
      assigner.Assign(index, trace->distributed,
                      options.stored_rank_of ? options.stored_rank_of(summary.rank) : std::nullopt);
  if (!choice.ok()) return choice.status();
  summary.rank.rank = choice->rank;
  summary.rank.world_size = choice->world_size;
  summary.rank.rank_source = choice->source;
  for (const KinetoMemoryRecord& r : trace->memory) {
    if (r.device_type == kKinetoDeviceCuda && r.device_id >= 0) {
      summary.rank.device_index = r.device_id;
      break;
    }
  }
  absl::StatusOr<std::unique_ptr<RankImportSink>> sink = sinks(summary.rank);
  if (!sink.ok()) return sink.status();
  *sink_opened = true;
  KinetoEventOptions event_options;
  event_options.include_cpu_memory = options.include_cpu_memory;
  event_options.checkpoint_events = options.checkpoint_events;
  RankImportSink* target = sink->get();
  event_options.checkpoint = [target] { return target->Checkpoint(); };
  absl::StatusOr<KinetoEventStats> stats = RecordKinetoTrace(&*trace, event_options, *target);
  if (!stats.ok()) {
    return absl::Status(stats.status().code(), absl::StrCat(path, ": rank ", choice->rank, ": ",
                                                            stats.status().message()));
  }
  if (absl::Status finished = target->Finish(); !finished.ok()) {
    return absl::Status(finished.code(),
                        absl::StrCat(path, ": rank ", choice->rank, ": ", finished.message()));
  }
  summary.events = *stats;
  summary.delivery = target->delivered();
  summary.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return summary;
}

}  // namespace

absl::StatusOr<RankAssigner> CheckFilesBeforeImport(const std::vector<std::string>& paths) {
  std::vector<KinetoDistributedInfo> headers;
  std::map<std::string, std::string> seen;  // canonical path -> path as given
  for (const std::string& path : paths) {
    absl::StatusOr<KinetoDistributedInfo> header = ReadKinetoHeader(path);
    absl::Status checked = header.status();
    if (checked.ok()) {
      std::error_code ec;
      const std::string canonical = std::filesystem::weakly_canonical(path, ec).string();
      auto [it, inserted] = seen.try_emplace(ec ? path : canonical, path);
      if (!inserted) {
        checked = absl::InvalidArgumentError(
            absl::StrCat(path, ": the same file as ", it->second, ", given twice"));
      }
    }
    if (!checked.ok()) {
      return absl::Status(checked.code(),
                          absl::StrCat(checked.message(), " (nothing was imported)"));
    }
    headers.push_back(*std::move(header));
  }
  absl::StatusOr<RankAssigner> plan = RankAssigner::Plan(paths, headers);
  if (!plan.ok()) {
    return absl::Status(plan.status().code(),
                        absl::StrCat(plan.status().message(), " (nothing was imported)"));
  }
  return plan;
}

absl::StatusOr<std::vector<KinetoFileSummary>> ImportKinetoFiles(
    const std::vector<std::string>& paths, const KinetoImportOptions& options,
    const RankSinkFactory& sinks, const std::function<void(const KinetoFileSummary&)>& on_file) {
  absl::StatusOr<RankAssigner> assigner = CheckFilesBeforeImport(paths);
  if (!assigner.ok()) return assigner.status();
  if (options.before_first_file) {
    if (absl::Status ready = options.before_first_file(*assigner); !ready.ok()) {
      return absl::Status(ready.code(), absl::StrCat(ready.message(), " (nothing was imported)"));
    }
  }
  std::vector<KinetoFileSummary> summaries;
  for (size_t index = 0; index < paths.size(); ++index) {
    bool sink_opened = false;
    absl::StatusOr<KinetoFileSummary> summary =
        ImportKinetoFile(paths[index], index, options, sinks, *assigner, &sink_opened);
    if (!summary.ok()) {
      if (summaries.empty()) {
        if (sink_opened) return summary.status();  // some of its events may be stored
        return absl::Status(summary.status().code(),
                            absl::StrCat(summary.status().message(), " (nothing was imported)"));
      }
      // What a partial import left behind, and that repeating it is safe.
      return absl::Status(
          summary.status().code(),
          absl::StrCat(summary.status().message(), " (",
                       summaries.size() == 1
                           ? std::string("the file before it was")
                           : absl::StrCat("the ", summaries.size(), " files before it were"),
                       " imported, and importing them again stores nothing twice: fix or leave "
                       "out this file and run the import again)"));
    }
    if (on_file) on_file(*summary);
    summaries.push_back(*std::move(summary));
  }
  return summaries;
}

}  // namespace memtrace::importers
