#include "query/export/export_command.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "collector/rollup/saturating.h"
#include "query/analysis/timeline.h"
#include "query/analysis/units.h"
#include "query/cli/flags.h"
#include "query/cli/query_client.h"
#include "query/export/event_reader.h"
#include "query/export/output_file.h"
#include "query/export/perfetto_trace.h"

namespace memtrace::exporter {
namespace {

constexpr char kUsage[] =
    "Usage: memtrace export --job JOB --format perfetto -o FILE\n"
    "\n"
    "Writes the job's memory as a Chrome trace-event JSON file that ui.perfetto.dev and\n"
    "chrome://tracing open: one process per rank and restart attempt (pid = rank, plus\n"
    "10000000 x attempt for a restart's; past attempt 429, which would not fit Perfetto's 32-bit\n"
    "pids, every process is numbered 1, 2, ... by attempt and rank instead), one per process a\n"
    "rank started that inherited its RANK (\"rank R subprocess pid P\": an inference engine;\n"
    "memtrace ranks lists them) and one per process that started a rank's and connected after\n"
    "it (\"rank R parent pid P\"), with counter tracks for live bytes, each step's floor and\n"
    "peak, device memory used and the top tags' live bytes at\n"
    "each step end (tags ranked by the most any rank held at a step end: one freed within its\n"
    "step, such as activations, has none), and one slice per step. Live bytes and device used\n"
    "come from every raw event (ReadEvents), reduced to at most --max-points per rank (keeping\n"
    "each interval's lowest and highest value); the raw events also give each run of an NVTX\n"
    "phase (rollout, weight_sync, ...) as an async slice, and each OOM as an\n"
    "instant event with the bytes requested, tag and call site. --raw=false uses only the\n"
    "per-step rollups. FILE '-' writes to stdout.";

struct ExportFlags {
  std::string collector;
  absl::Duration timeout = absl::Seconds(30);
  std::string job;
  std::string format;
  std::string output;
  std::string axis = "step";
  bool axis_given = false;
  bool raw = true;
  int64_t max_points = 200000;
  int64_t top_tags = 5;
};

// Whether any rank has a step other than the implicit step 0 (analysis::HasStepMarkers, on the
// wire form). The ranks', as the analyses and plot decide it: not their subprocesses'.
bool HasStepMarkers(const v1::GetRollupsResponse& rollups) {
  return analysis::internal::HasStepMarkersOf(
      rollups.ranks(),
      [](const v1::RankRollups& r) {
        return r.identity().has_subprocess_of_rank() ? 0 : r.steps_size();
      },
      [](const v1::RankRollups& r) { return r.steps(0).step(); });
}

absl::StatusOr<FineSeriesMap> ReadFineSeries(const ExportFlags& flags,
                                             const cli::QueryClient& client,
                                             const v1::GetRollupsResponse& rollups,
                                             std::ostream& err) {
  FineSeriesMap fine;
  absl::StatusOr<v1::ListRanksResponse> ranks = client.ListRanks(flags.job);
  if (!ranks.ok()) return ranks.status();
  absl::StatusOr<EventReader> reader = EventReader::Create(flags.collector, flags.timeout);
  if (!reader.ok()) return reader.status();
  for (const v1::RankRollups& rank : rollups.ranks()) {
    // The rank's span and size decide the buckets that bound its points (3 a bucket), and its
    // clock estimate moves its events to the collector's clock, as the rollups are.
    Bucketing bucketing;
    int64_t clock_offset_ns = 0;
    for (const v1::RankSummary& s : ranks->ranks()) {
      if (s.rank() != rank.rank() || s.identity().attempt() != rank.attempt()) continue;
      clock_offset_ns = s.has_clock() ? s.clock().offset_ns() : 0;
      if (s.events_stored() > static_cast<uint64_t>(flags.max_points)) {
        bucketing.count = std::max<int64_t>(1, flags.max_points / 3);
        // In uint64: an agent's absurd timestamps must not overflow the span.
        const uint64_t span =
            s.last_ts_ns() > s.first_ts_ns()
                ? static_cast<uint64_t>(s.last_ts_ns()) - static_cast<uint64_t>(s.first_ts_ns())
                : 0;
        bucketing.width_ns = static_cast<int64_t>(
            std::min<uint64_t>(span / static_cast<uint64_t>(bucketing.count) + 1, INT64_MAX));
        bucketing.origin_ns = s.first_ts_ns();
      }
    }
    LiveSeriesBuilder builder(bucketing);
    absl::Status read = reader->ForEach(flags.job, rank.rank(), rank.attempt(),
                                        [&builder](const Event& e) { builder.Add(e); });
    if (read.code() == absl::StatusCode::kUnimplemented) {
      err << "memtrace export: the collector has no ReadEvents; live bytes from rollups only\n";
      return FineSeriesMap();
    }
    if (!read.ok()) return read;
    FineSeries& series = fine[{rank.rank(), rank.attempt()}];
    series.live = builder.TakeLive();
    series.device_used = builder.TakeDeviceUsed();
    for (std::vector<SeriesPoint>* points : {&series.live, &series.device_used}) {
      for (SeriesPoint& p : *points) p.ts_ns = collector::SaturatingAdd(p.ts_ns, clock_offset_ns);
    }
    series.phases = builder.TakePhases();
    for (PhaseSlice& s : series.phases) {
      s.begin_ns = collector::SaturatingAdd(s.begin_ns, clock_offset_ns);
      s.end_ns = collector::SaturatingAdd(s.end_ns, clock_offset_ns);
    }
    series.ooms = builder.TakeOoms();
    for (OomMark& m : series.ooms) m.ts_ns = collector::SaturatingAdd(m.ts_ns, clock_offset_ns);
    if (builder.phases_dropped() > 0) {
      err << "memtrace export: rank " << rank.rank() << ": " << builder.phases_dropped()
          << " phase runs past the first " << LiveSeriesBuilder::kMaxPhaseSlices << " left out\n";
    }
  }
  return fine;
}

int RunExport(const cli::Command& self, const std::vector<std::string>& args,
              cli::CommandIo& io) {
  ExportFlags f;
  f.collector = io.default_collector;
  cli::FlagSet flags;
  flags.AddString("job", "JOB", "job id (required)", &f.job);
  flags.AddString("format", "perfetto", "output format (required; only perfetto)", &f.format);
  flags.AddString("o", "FILE", "output file (required; '-' = stdout)", &f.output);
  flags.AddAlias("output", "o");
  flags.AddString("collector", "ADDR",
                  absl::StrCat("collector host:port (default $MEMTRACE_COLLECTOR or ",
                               cli::kDefaultCollector, "; now ", io.default_collector, ")"),
                  &f.collector);
  flags.AddDuration("timeout", "DURATION", "deadline of each request (default 30s)", &f.timeout);
  flags.Add("axis", "step|time",
            "rollups by step (default; time buckets when the job has no step markers) or by time "
            "bucket",
            [&f](absl::string_view v) {
              f.axis = std::string(v);
              f.axis_given = true;
              return absl::OkStatus();
            });
  flags.AddBool("raw", "counters from every raw event (default true; --raw=false: rollups)",
                &f.raw);
  flags.AddInt("max-points", "N", "live-bytes points per rank at most (default 200000)",
               &f.max_points);
  flags.AddInt("top-tags", "N", "tags with a counter track, by live bytes at step ends (default 5)",
               &f.top_tags);
  absl::StatusOr<cli::FlagSet::Parsed> parsed = flags.Parse(args);
  if (!parsed.ok()) return cli::ReportError(io, parsed.status(), self.name);
  if (parsed->help) {
    io.out << self.usage << "\n\nFlags:\n" << flags.Describe();
    return cli::kExitOk;
  }
  auto usage_error = [&](const std::string& message) {
    return cli::ReportError(io, absl::InvalidArgumentError(message), self.name);
  };
  if (!parsed->positional.empty()) {
    return usage_error(absl::StrCat("unexpected argument '", parsed->positional.front(), "'"));
  }
  if (f.job.empty()) return usage_error("--job is required");
  if (f.format != "perfetto") {
    return usage_error(f.format.empty()
                           ? "--format is required (perfetto)"
                           : absl::StrCat("--format: '", f.format, "' is not one of perfetto"));
  }
  if (f.output.empty()) return usage_error("-o FILE is required");
  if (f.axis != "step" && f.axis != "time") {
    return usage_error(absl::StrCat("--axis: '", f.axis, "' is not one of step, time"));
  }
  if (f.max_points < 3) return usage_error("--max-points: must be at least 3");
  if (f.top_tags < 0) return usage_error("--top-tags: must not be negative");

  absl::StatusOr<cli::QueryClient> client = cli::QueryClient::Create(f.collector, f.timeout);
  if (!client.ok()) return cli::ReportError(io, client.status(), self.name);
  // The ranks' subprocesses too (an inference engine a rank started): a trace shows each
  // process's memory, theirs beside their rank's.
  absl::StatusOr<v1::GetRollupsResponse> rollups = client->GetJobRollups(
      f.job, f.axis == "time" ? v1::TIMELINE_AXIS_TIME : v1::TIMELINE_AXIS_STEP,
      /*max_response_bytes=*/0, /*with_subprocesses=*/true);
  if (!rollups.ok()) return cli::ReportError(io, rollups.status(), self.name);
  if (!f.axis_given && f.axis == "step" && !HasStepMarkers(*rollups)) {
    // One slice "step 0" for the whole run says nothing; the analyses and plot compare such a
    // job by time bucket, and so does its export, saying so.
    rollups = client->GetJobRollups(f.job, v1::TIMELINE_AXIS_TIME, /*max_response_bytes=*/0,
                                    /*with_subprocesses=*/true);
    if (!rollups.ok()) return cli::ReportError(io, rollups.status(), self.name);
    f.axis = "time";
    io.err << "memtrace export: job '" << f.job << "' has no step markers: exporting "
           << absl::FormatDuration(absl::Nanoseconds(rollups->bucket_ns()))
           << " time buckets (--axis step for its single step)\n";
  }
  FineSeriesMap fine;
  if (f.raw) {
    absl::StatusOr<FineSeriesMap> read = ReadFineSeries(f, *client, *rollups, io.err);
    if (!read.ok()) return cli::ReportError(io, read.status(), self.name);
    fine = std::move(*read);
  }
  PerfettoOptions options;
  options.top_tags = static_cast<size_t>(f.top_tags);
  options.time_axis = f.axis == "time";
  absl::Status written = WriteOutputFile(f.output, io.out, [&](std::ostream& out) {
    return WritePerfettoTrace(f.job, *rollups, fine, options, out);
  });
  if (!written.ok()) return cli::ReportError(io, written, self.name);
  if (f.output != "-") {
    size_t points = 0, phase_runs = 0, ooms = 0;
    for (const auto& [key, series] : fine) {
      points += series.live.size();
      phase_runs += series.phases.size();
      ooms += series.ooms.size();
    }
    // Phase runs and OOMs come from the raw events only: a trace without them says why.
    // Ranks, and their restarts' attempts apart: "16 ranks" of an 8-rank job restarted once.
    // A rank's subprocesses apart too.
    std::set<uint32_t> ranks;
    size_t attempts = 0, subprocesses = 0, parents = 0;
    for (const v1::RankRollups& r : rollups->ranks()) {
      if (r.identity().has_subprocess_of_rank()) {
        ++(r.identity().started_the_rank() ? parents : subprocesses);
        continue;
      }
      ranks.insert(r.rank());
      ++attempts;
    }
    io.err << "wrote " << f.output << ": " << ranks.size() << " ranks"
           << (attempts > ranks.size() ? absl::StrCat(" (", attempts, " rank-attempts)") : "")
           << analysis::FormatBesideTheRanks(subprocesses, parents) << ", "
           << (f.raw ? absl::StrCat(points, " live-bytes points, ", phase_runs, " phase runs and ",
                                    ooms, " OOMs from raw events")
                     : std::string("from rollups (no phase runs or OOMs: those need --raw)"))
           << "; open it in ui.perfetto.dev or chrome://tracing\n";
  }
  return cli::kExitOk;
}

}  // namespace

cli::Command ExportCommand() {
  cli::Command command{"export", "write a job's memory as a Perfetto / chrome://tracing trace",
                       kUsage, nullptr};
  command.run = [self = command](const std::vector<std::string>& args, cli::CommandIo& io) {
    return RunExport(self, args, io);
  };
  return command;
}

}  // namespace memtrace::exporter
