#include "query/importers/import_command.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <ostream>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/stream/transport.h"
#include "proto/connect/client_channel.h"
#include "proto/connect/collector_address.h"
#include "query/cli/flags.h"
#include "query/cli/query_client.h"

namespace memtrace::importers {
namespace {

constexpr char kUsage[] =
    "Usage: memtrace import --job JOB --format kineto FILE [FILE...]\n"
    "\n"
    "Imports PyTorch profiler (Kineto) Chrome-trace JSON files, plain or .gz, one file per rank,\n"
    "into the collector as job JOB. The rank of a file is its distributedInfo.rank, else a rank\n"
    "in its name (rank3, rank_3, rank3_of_8, _r3.), else in its directory's (rank_3/, as\n"
    "tensorboard_trace_handler writes them), else the lowest rank no file states and the job\n"
    "does not hold, in file order (a trace the job holds already keeps its rank).\n"
    "All files get one world size: the largest any states (distributedInfo, _of_8), at least\n"
    "the number of files and the highest rank + 1. When no file states one, at least the job's\n"
    "own (its ranks' world size, its highest rank + 1), so a run's ranks imported one command\n"
    "at a time are of at least the size of those before them (which keep the size they were\n"
    "stored with: import a run's files in one command for one size).\n"
    "\n"
    "Imported: [memory] events as allocations and frees (CUDA ones as device memory, CPU ones\n"
    "as host memory, which live bytes leave out), Total Reserved as device samples,\n"
    "ProfilerStep#N as step N, user annotations (record_function) and module scopes\n"
    "(with_modules=True: \"nn.Module: Linear_3\") as the tag of the allocations made inside\n"
    "them on the same thread, innermost first. Memory allocated before the trace began\n"
    "(Total Allocated at its first event) is seeded as allocations tagged kineto:before-trace,\n"
    "so live bytes equal the profiler's Total Allocated. Importing a file again into the same\n"
    "job, rank and attempt stores nothing new; importing another trace (or the same one with\n"
    "other flags) there is refused: give it another --job or --attempt; so is a trace that is\n"
    "already another rank of the job. A world size a file states below the job's ranks' or\n"
    "other than the import's, or a trace recorded more than a day away from most of the job's\n"
    "traces (those each within a day of the next are one run), is warned of; a name stating a\n"
    "rank outside its own world size (\"rank5_of_4\") is refused, unless a distributedInfo\n"
    "before its events states the rank. Every file is opened and read up to its events, and the\n"
    "collector asked for the job, before any is stored: a missing or unreadable file, a file\n"
    "given twice, two files stating one rank (in distributedInfo or their names) or an\n"
    "unreachable collector import nothing. A file without [memory] events is refused (record\n"
    "with profile_memory=True).\n"
    "\n"
    "A profiler trace holds a few steps: the analyses' defaults (--warmup 5, a trend over 8 or\n"
    "more steps) find them too short; use --warmup 0, and peak, live and timeline. Total\n"
    "Reserved is the device sample, so headroom's \"outside\" is the caching allocator's free\n"
    "cache (reserved minus allocated), where the agent's is memory outside any allocation.\n"
    "\n"
    "Exit codes: 2 for a bad command line (flags, a file given twice), 1 when a file cannot be\n"
    "read or imported or the collector fails.";

// Forwards to a Transport and waits for durability at checkpoints.
class TransportSink : public RankImportSink {
 public:
  TransportSink(std::unique_ptr<Transport> transport, std::string collector, std::string job_id,
                absl::Duration drain_timeout)
      : transport_(std::move(transport)),
        collector_(std::move(collector)),
        job_id_(std::move(job_id)),
        drain_timeout_(drain_timeout) {}
  // A sink dropped without Finish (the import stopped at an error) gives up at once: the
  // Transport's own destructor would wait 5 s more for a collector that already did not answer.
  ~TransportSink() override { (void)transport_->Shutdown(absl::ZeroDuration()); }

  void Record(const Event& event) override { transport_->Record(event); }
  uint32_t Intern(StringKind kind, std::string_view value) override {
    return transport_->Intern(kind, value);
  }

  absl::Status Checkpoint() override { return Drain(); }

  absl::Status Finish() override {
    absl::Status drained = Drain();
    if (drained.ok()) drained = transport_->Shutdown(drain_timeout_);
    if (!drained.ok()) {
      (void)transport_->Shutdown(absl::ZeroDuration());
      return drained;
    }
    TransportStats stats = transport_->stats();
    if (stats.events_lost > 0) {
      return absl::DataLossError(absl::StrCat(stats.events_lost, " of ", stats.events_recorded,
                                              " events were lost on the way to the collector at ",
                                              collector_));
    }
    if (stats.durable_seq < stats.last_seq) {
      return absl::DataLossError(absl::StrCat("the collector at ", collector_,
                                              " acknowledged events up to ", stats.durable_seq,
                                              " of ", stats.last_seq));
    }
    return absl::OkStatus();
  }

  Delivery delivered() const override {
    const TransportStats stats = transport_->stats();
    return {stats.last_seq, std::min(stats.durable_at_first_hello, stats.last_seq)};
  }

 private:
  // Waits until everything recorded is durable, for at most drain_timeout; a collector that
  // refuses the stream (another trace already there, a bad token) fails it at once, since
  // waiting cannot change its answer.
  absl::Status Drain() {
    const absl::Time deadline = absl::Now() + drain_timeout_;
    while (true) {
      absl::Status flushed = transport_->Flush(
          std::min(kDrainSlice, std::max(absl::ZeroDuration(), deadline - absl::Now())));
      if (flushed.ok()) return flushed;
      const TransportStats stats = transport_->stats();
      if (!stats.connected && stats.last_stream_refused) {
        // The collector words it for agents (a second process of one rank, its host and pid);
        // for an import, the holder is a trace imported before, or a process streaming it.
        if (stats.last_stream_code == absl::StatusCode::kAlreadyExists) {
          return absl::FailedPreconditionError(absl::StrCat(
              "the collector at ", collector_, " refused the import: job '", job_id_,
              "' holds this rank already, as another trace imported before as this attempt (or "
              "this one imported with other flags: import it under another --job or --attempt), "
              "or as a process streaming the rank now (import it once that ended); `memtrace "
              "ranks --job ",
              job_id_, "` shows which (state running, or ended). The collector answered ",
              "ALREADY_EXISTS"));
        }
        return absl::FailedPreconditionError(absl::StrCat(
            "the collector at ", collector_, " refused the import: ", stats.last_stream_error));
      }
      if (!absl::IsDeadlineExceeded(flushed) || absl::Now() >= deadline) {
        return Explain(flushed.code());
      }
    }
  }

  static constexpr absl::Duration kDrainSlice = absl::Milliseconds(200);

  // The whole wait's outcome (the last slice's own message named its 200 ms).
  absl::Status Explain(absl::StatusCode code) const {
    const TransportStats stats = transport_->stats();
    const std::string& said = stats.last_stream_error;
    return absl::Status(
        code,
        absl::StrCat(
            "events not durable at the collector at ", collector_, " within ",
            absl::FormatDuration(drain_timeout_),
            said.empty() ? " (is it running? --collector)" : absl::StrCat(" (it said ", said, ")"),
            ": ", stats.last_seq - std::min(stats.durable_seq, stats.last_seq), " of ",
            stats.last_seq, " events not acknowledged", stats.connected ? "" : ", not connected"));
  }

  std::unique_ptr<Transport> transport_;
  std::string collector_;
  std::string job_id_;
  absl::Duration drain_timeout_;
};

// An imported rank's run_id: its trace's fingerprint without the import's flags.
std::string TraceRunId(const ImportedRank& rank) {
  return absl::StrFormat("kineto-trace:%016x", rank.trace_fingerprint);
}

// What the job already holds, read before any file is parsed: an unreachable collector fails
// the import at once (it used to wait out --drain-timeout after parsing the first file), and a
// trace that does not belong with the job's ranks is caught before it is stored.
class JobGuard {
 public:
  JobGuard(std::string job, std::string collector, uint32_t attempt, std::ostream& warnings)
      : job_(std::move(job)),
        collector_(std::move(collector)),
        attempt_(attempt),
        warnings_(warnings) {}

  // Reads the job's ranks (none for a new job). Warns when this import's files state a world
  // size (distributedInfo, "_of_N") smaller than theirs: the traces of another run, most
  // likely. A size implied by the number of files is no evidence either way: importing one
  // rank's file at a time gives each "of 1". Such files take the size the job's ranks imply.
  absl::Status Read(RankAssigner& plan) {
    absl::StatusOr<cli::QueryClient> client =
        cli::QueryClient::Create(collector_, kPreflightTimeout);
    if (!client.ok()) return client.status();
    absl::StatusOr<v1::ListRanksResponse> ranks = client->ListRanks(job_);
    if (absl::IsNotFound(ranks.status())) {
      WarnOfDisagreeingSizes(plan);
      return absl::OkStatus();
    }
    if (!ranks.ok()) return ranks.status();
    int32_t job_world_size = 0;
    std::set<int32_t> held_here;  // at this import's attempt: another trace there is refused
    for (const v1::RankSummary& r : ranks->ranks()) {
      held_.push_back(r);
      if (r.identity().attempt() == attempt_ && r.rank() <= INT32_MAX) {
        held_here.insert(static_cast<int32_t>(r.rank()));
      }
      // A stream without a launcher rank (a worker without RANK, a rank's subprocess) is
      // numbered from 1000000: no world size of the job's.
      const int64_t implied = r.identity().rank() >= 0 ? int64_t{r.rank()} + 1 : 0;
      job_world_size = static_cast<int32_t>(std::min<int64_t>(
          INT32_MAX, std::max<int64_t>({job_world_size, r.identity().world_size(), implied})));
    }
    WarnOfDisagreeingSizes(plan);
    plan.ImplyWorldSize(job_world_size);
    plan.ReserveJobRanks(std::move(held_here));
    const int32_t world_size = plan.world_size();
    for (const v1::RankSummary& r : held_) {
      // A held size below this one may be implied only (a file imported alone is "of 1"):
      // no evidence. One above it is: the job's ranks are of a larger run than these state.
      if (!plan.world_size_stated() || r.identity().world_size() <= world_size) continue;
      warnings_ << "memtrace import: warning: job " << job_ << " already holds rank " << r.rank()
                << " of " << r.identity().world_size() << " (launcher "
                << (r.identity().launcher().empty() ? "unknown" : r.identity().launcher())
                << "), and this import's files are ranks of " << world_size
                << ": are they traces of one run? (another --job keeps runs apart)\n";
      break;
    }
    return absl::OkStatus();
  }

  // The rank the job holds this trace as at this import's attempt: imported again, or with
  // other flags (then refused there, as before, not stored as a new rank beside itself).
  std::optional<int32_t> StoredRankOf(const ImportedRank& trace) const {
    const std::string trace_id = TraceRunId(trace);
    for (const v1::RankSummary& r : held_) {
      const v1::RankIdentity& id = r.identity();
      if (id.launcher() != "kineto-import" || id.attempt() != attempt_ || r.rank() > INT32_MAX) {
        continue;
      }
      if (id.process_start_ns() == trace.fingerprint || id.run_id() == trace_id) {
        return static_cast<int32_t>(r.rank());
      }
    }
    return std::nullopt;
  }

  // Refuses a trace that is already another rank of the job, stored or imported just now: the
  // same trace imported the same way has the same fingerprint (process_start_ns), and one
  // process is one rank.
  absl::Status Admit(const ImportedRank& rank) {
    for (const v1::RankSummary& r : held_) {
      const v1::RankIdentity& id = r.identity();
      if (id.launcher() != "kineto-import" || id.process_start_ns() != rank.fingerprint) continue;
      // The same rank again (resent: stored once), or as another attempt (refused by the
      // collector only if that attempt holds another trace).
      if (r.rank() == static_cast<uint32_t>(rank.rank)) continue;
      return Duplicate(rank, absl::StrCat("rank ", r.rank(), " (attempt ", id.attempt(),
                                          ") of job ", job_, " at ", collector_));
    }
    auto [it, inserted] = imported_.try_emplace(rank.fingerprint, rank.path);
    if (!inserted)
      return Duplicate(rank, absl::StrCat("what ", it->second, " was just imported as"));
    Remember(rank);
    return absl::OkStatus();
  }

 private:
  static constexpr absl::Duration kPreflightTimeout = absl::Seconds(10);

  // Files of one import whose stated world size is not the import's: every file is given one,
  // the largest stated, of files, and of ranks ("rank 1 of 6 (distributedInfo)" of a trace whose
  // distributedInfo says 2), and nothing said why.
  void WarnOfDisagreeingSizes(const RankAssigner& plan) {
    const std::map<int32_t, std::string> sizes = plan.StatedWorldSizes();
    const int32_t world_size = plan.world_size();
    if (std::all_of(sizes.begin(), sizes.end(),
                    [&](const auto& size) { return size.first == world_size; })) {
      return;
    }
    std::vector<std::string> each;
    for (const auto& [size, file] : sizes) each.push_back(absl::StrCat(size, " in ", file));
    warnings_ << "memtrace import: warning: the files state world size"
              << (sizes.size() > 1 ? "s " : " ") << absl::StrJoin(each, ", ")
              << ", and each is imported as a rank of " << world_size
              << " (the largest size stated, number of files, or rank + 1): are they traces of one "
                 "run? (another --job keeps runs apart)\n";
  }

  struct Span {
    std::string path;
    int64_t first_ns = 0;
    int64_t last_ns = 0;
  };
  static int64_t Gap(const Span& a, int64_t first_ns, int64_t last_ns) {
    return a.last_ns < first_ns   ? first_ns - a.last_ns
           : a.first_ns > last_ns ? a.first_ns - last_ns
                                  : 0;
  }

  void Remember(const ImportedRank& rank) {
    if (rank.first_ts_ns != 0) admitted_.push_back({rank.path, rank.first_ts_ns, rank.last_ts_ns});
  }

 public:
  // After the files are imported: the job's ranks and the import's files fall into groups of
  // traces each within a day of the next; a file outside the main group (the one with the most
  // ranks the job held, else the most files, the earliest of equals) is warned of, with its
  // distance to that group. Checked file by file as they came, traces 961 days apart in one
  // command went unremarked, or the file after the odd one out was named; measured against
  // every other trace, two files of another run imported together into a job hid each other.
  void WarnOfFarApart() {
    constexpr int64_t kDayNs = int64_t{24} * 3600 * 1'000'000'000;
    struct Member {
      int64_t first_ns;
      int64_t last_ns;
      const Span* file;  // null: a rank the job held
    };
    if (admitted_.empty()) return;
    std::vector<Member> all;
    for (const v1::RankSummary& r : held_) {
      if (r.events_stored() > 0) all.push_back({r.first_ts_ns(), r.last_ts_ns(), nullptr});
    }
    for (const Span& file : admitted_) all.push_back({file.first_ns, file.last_ns, &file});
    std::sort(all.begin(), all.end(),
              [](const Member& a, const Member& b) { return a.first_ns < b.first_ns; });
    std::vector<size_t> group_of(all.size());
    std::vector<std::pair<size_t, size_t>> counts;  // per group: (ranks held, files)
    int64_t reach_ns = INT64_MIN;
    for (size_t i = 0; i < all.size(); ++i) {
      if (i == 0 || all[i].first_ns - reach_ns > kDayNs) counts.emplace_back(0, 0);
      reach_ns = i == 0 ? all[i].last_ns : std::max(reach_ns, all[i].last_ns);
      group_of[i] = counts.size() - 1;
      ++(all[i].file == nullptr ? counts.back().first : counts.back().second);
    }
    if (counts.size() < 2) return;
    const size_t main =
        static_cast<size_t>(std::max_element(counts.begin(), counts.end()) - counts.begin());
    const bool main_holds_ranks = counts[main].first > 0;
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i].file == nullptr || group_of[i] == main) continue;
      int64_t nearest = INT64_MAX;
      for (size_t k = 0; k < all.size(); ++k) {
        if (group_of[k] == main)
          nearest = std::min(nearest, Gap(*all[i].file, all[k].first_ns, all[k].last_ns));
      }
      const int64_t days = nearest / kDayNs;
      warnings_ << "memtrace import: warning: " << all[i].file->path << " was recorded "
                << (days >= 2 ? absl::StrCat(days, " days")
                              : absl::FormatDuration(
                                    absl::Trunc(absl::Nanoseconds(nearest), absl::Hours(1))))
                << " away from "
                << (main_holds_ranks ? absl::StrCat("most of job ", job_, "'s traces")
                                     : std::string("most of this import's files"))
                << ": is it a trace of the same run? (another --job keeps runs apart)\n";
    }
  }

 private:
  static absl::Status Duplicate(const ImportedRank& rank, const std::string& where) {
    return absl::FailedPreconditionError(
        absl::StrCat(rank.path, ": the same trace, imported the same way, is already ", where,
                     "; one process's trace is one rank"));
  }

  std::string job_;
  std::string collector_;
  uint32_t attempt_;
  std::ostream& warnings_;
  std::vector<v1::RankSummary> held_;
  std::map<uint64_t, std::string> imported_;  // fingerprint -> path, this import's
  std::vector<Span> admitted_;                // this import's files, as admitted
};

int RunImport(const cli::Command& self, const std::vector<std::string>& args, cli::CommandIo& io) {
  cli::FlagSet flags;
  TransportSinkOptions sink_options;
  sink_options.collector = io.default_collector;
  std::string format;
  bool skip_cpu = false;
  bool no_module_tags = false;
  int64_t attempt = 0;
  flags.AddString("job", "JOB", "job id to import into (required)", &sink_options.job_id);
  flags.AddString("format", "kineto", "trace format (required; only kineto)", &format);
  flags.AddString("collector", "ADDR",
                  absl::StrCat("collector host:port (default $MEMTRACE_COLLECTOR or ",
                               cli::kDefaultCollector, "; now ", io.default_collector, ")"),
                  &sink_options.collector);
  flags.AddInt("attempt", "N", "attempt (restart count) of the imported run (default 0)", &attempt);
  flags.AddBool("skip-cpu-memory",
                "drop CPU [memory] events instead of importing them as host "
                "memory",
                &skip_cpu);
  flags.AddBool("no-module-tags",
                "tag allocations by record_function ranges only, not by the "
                "nn.Module scopes of with_modules=True traces",
                &no_module_tags);
  flags.AddDuration("drain-timeout", "DURATION",
                    "how long to wait for the collector to store each rank (default 60s)",
                    &sink_options.drain_timeout);
  absl::StatusOr<cli::FlagSet::Parsed> parsed = flags.Parse(args);
  if (!parsed.ok()) return cli::ReportError(io, parsed.status(), self.name);
  if (parsed->help) {
    io.out << self.usage << "\n\nFlags:\n" << flags.Describe();
    return cli::kExitOk;
  }
  auto usage_error = [&](const std::string& message) {
    return cli::ReportError(io, absl::InvalidArgumentError(message), self.name);
  };
  if (sink_options.job_id.empty()) return usage_error("--job is required");
  if (format != "kineto") {
    return usage_error(format.empty() ? "--format is required (kineto)"
                                      : absl::StrCat("--format: '", format,
                                                     "' is not a known trace format (kineto)"));
  }
  if (attempt < 0 || attempt > UINT32_MAX) {
    return usage_error(absl::StrCat("--attempt: ", attempt, " is out of range"));
  }
  sink_options.attempt = static_cast<uint32_t>(attempt);
  if (parsed->positional.empty()) return usage_error("no trace files given");
  // The Transport would dial "host:99999" on port 34463, and only after parsing every file.
  if (absl::Status s = connect::CheckCollectorAddress("--collector", sink_options.collector);
      !s.ok()) {
    return cli::ReportError(io, s, self.name);
  }

  KinetoImportOptions options;
  options.include_cpu_memory = !skip_cpu;
  options.module_tags = !no_module_tags;
  options.progress = stderr;
  JobGuard guard(sink_options.job_id, sink_options.collector, sink_options.attempt, io.err);
  options.before_first_file = [&guard](RankAssigner& plan) { return guard.Read(plan); };
  options.stored_rank_of = [&guard](const ImportedRank& trace) {
    return guard.StoredRankOf(trace);
  };
  uint64_t memory_events = 0;
  size_t files_with_news = 0;  // files the collector did not already hold whole
  absl::StatusOr<std::vector<KinetoFileSummary>> summaries = ImportKinetoFiles(
      parsed->positional, options,
      [&](const ImportedRank& rank) -> absl::StatusOr<std::unique_ptr<RankImportSink>> {
        if (absl::Status admitted = guard.Admit(rank); !admitted.ok()) return admitted;
        return StartTransportSink(sink_options, rank);
      },
      [&](const KinetoFileSummary& summary) {
        io.out << FormatSummary(summary) << "\n";
        io.out.flush();
        memory_events += summary.events.memory_events;
        const RankImportSink::Delivery& d = summary.delivery;
        if (d.recorded == 0 || d.already_stored < d.recorded) ++files_with_news;
      });
  if (!summaries.ok()) return cli::ReportError(io, summaries.status(), self.name);
  guard.WarnOfFarApart();
  io.out << "imported " << summaries->size() << " file" << (summaries->size() == 1 ? "" : "s")
         << " into job " << sink_options.job_id << ": " << memory_events
         << " memory events, stored at " << sink_options.collector
         << (files_with_news == 0 ? " (all of it already there: nothing new)" : "") << "\n";
  return cli::kExitOk;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RankImportSink>> StartTransportSink(
    const TransportSinkOptions& options, const ImportedRank& rank) {
  TransportOptions transport_options;
  transport_options.collector_address = options.collector;
  // TLS and the token from the environment, as the agents and every other command.
  absl::StatusOr<connect::ClientSecurity> security = connect::ClientSecurityFromEnv();
  if (!security.ok()) return security.status();
  transport_options.channel_factory = connect::ChannelFactoryFor(*std::move(security));
  v1::RankIdentity& id = transport_options.identity;
  id.set_job_id(options.job_id);
  id.set_rank(rank.rank);
  id.set_world_size(rank.world_size);
  id.set_local_rank(rank.device_index >= 0 ? rank.device_index : 0);
  id.set_attempt(options.attempt);
  id.set_device_index(rank.device_index);
  if (rank.pid.has_value() && *rank.pid >= 0 && *rank.pid <= UINT32_MAX) {
    id.set_pid(static_cast<uint32_t>(*rank.pid));
  }
  // Stands for the process start: the same file imported the same way is the same producer
  // (a resend, stored once); another trace for this rank is another producer, refused, not
  // spliced into the first one's stream by sequence number.
  id.set_process_start_ns(rank.fingerprint);
  // Which trace it is, whatever the flags: a later import of it with others is this rank's.
  id.set_run_id(TraceRunId(rank));
  id.set_launcher("kineto-import");
  id.set_agent_version("memtrace-import/1");
  transport_options.log_failures = false;
  // The trace's timestamps are its own host's, from when it was recorded: shifting them by this
  // host's offset from the collector moved every import by a different few ms.
  transport_options.send_clock_estimate = false;
  // Another trace for a rank that holds one is refused, not stored as its next attempt.
  transport_options.new_attempt_if_taken = false;
  absl::StatusOr<std::unique_ptr<Transport>> transport = Transport::Start(transport_options);
  if (!transport.ok()) return transport.status();
  return std::make_unique<TransportSink>(std::move(*transport), options.collector, options.job_id,
                                         options.drain_timeout);
}

cli::Command ImportCommand() {
  cli::Command command{"import", "import per-rank PyTorch profiler (Kineto) traces", kUsage,
                       nullptr};
  command.run = [self = command](const std::vector<std::string>& args, cli::CommandIo& io) {
    return RunImport(self, args, io);
  };
  return command;
}

}  // namespace memtrace::importers
