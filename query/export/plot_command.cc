#include "query/export/plot_command.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "query/analysis/rollup_convert.h"
#include "query/analysis/units.h"
#include "query/cli/flags.h"
#include "query/cli/query_client.h"
#include "query/export/output_file.h"
#include "query/export/svg_plot.h"

namespace memtrace::exporter {
namespace {

constexpr char kUsage[] =
    "Usage: memtrace plot --job JOB -o FILE.svg [--metric live|floor|peak] [--ranks 0,1,5]\n"
    "\n"
    "Draws each rank's memory per step as an SVG line: live bytes at the step's end (live, the\n"
    "default), the step's floor or its peak. The rank that left the cohort first (as `memtrace\n"
    "diverged` finds it) is drawn in red on top, the step it diverged at and any leak's onset\n"
    "(a rising floor, as `memtrace leaks` finds it) are marked with labelled vertical lines,\n"
    "and so is the step where a rank ran out of memory (an OOM event).\n"
    "--ranks limits the lines drawn; the analyses still compare every rank. FILE '-' writes to\n"
    "stdout. The SVG's elements carry data-rank / data-highlighted / data-onset-step attributes.\n"
    "A job without step markers is drawn by time bucket unless --axis is given (as the\n"
    "analyses compare it; a note on stderr says so). On time buckets the ticks are UTC clock\n"
    "times, rates are per second or minute, and the SVG's keys are buckets\n"
    "(data-onset-bucket: ns since the epoch / data-bucket-ns), not steps. A running rank's\n"
    "last step or bucket, still in progress, is not drawn (nor compared), as in the analyses;\n"
    "nor is an ended rank's last step that its stream stopped well inside (memtrace timeline's\n"
    "cut_short: a job an OOM ended stops every rank mid-step), though its OOM is marked.";

absl::StatusOr<analysis::JobTimeline> FetchTimeline(const cli::QueryClient& client,
                                                    const std::string& job, v1::TimelineAxis axis) {
  // The rows' scalars: a plot draws one number a row, and its marks (diverged, leaking curves,
  // OOMs) read no tag. The full rows of an 8-rank, 5 h job without step markers (144 k rows)
  // took 209 MB of memory.
  absl::StatusOr<v1::GetRollupsResponse> rollups =
      client.GetJobRollups(job, axis, /*max_response_bytes=*/0, /*with_subprocesses=*/false,
                           /*scalars_only=*/true);
  if (!rollups.ok()) return rollups.status();
  return analysis::TimelineFromRollups(job, *rollups, axis);
}

// The job's timeline on --axis; without --axis, on time buckets when the job has no step
// markers, as the analyses (`memtrace diverged`) then compare it, which one line on io.err says.
// Plotted on its single step instead, every rank would be one point and none could diverge.
absl::StatusOr<analysis::JobTimeline> LoadTimeline(const cli::QueryClient& client,
                                                   const std::string& job, v1::TimelineAxis axis,
                                                   bool axis_given, cli::CommandIo& io) {
  absl::StatusOr<analysis::JobTimeline> timeline = FetchTimeline(client, job, axis);
  if (!timeline.ok() || axis_given || axis != v1::TIMELINE_AXIS_STEP || timeline->ranks.empty() ||
      analysis::HasStepMarkers(*timeline)) {
    return timeline;
  }
  timeline = FetchTimeline(client, job, v1::TIMELINE_AXIS_TIME);
  if (!timeline.ok()) return timeline;
  io.err << "memtrace plot: job '" << job << "' has no step markers: plotting "
         << absl::FormatDuration(absl::Nanoseconds(timeline->bucket_ns))
         << " time buckets (--axis step for its single step)\n";
  return timeline;
}

struct PlotFlags {
  std::string job, output, metric = "live", ranks, axis = "step";
  bool axis_given = false;
  std::string collector;
  absl::Duration timeout = absl::Seconds(30);
  int64_t width = 1200, height = 700;
};

void RegisterPlotFlags(const cli::CommandIo& io, cli::FlagSet* flags, PlotFlags* f) {
  f->collector = io.default_collector;
  flags->AddString("job", "JOB", "job id (required)", &f->job);
  flags->AddString("o", "FILE", "output SVG file (required; '-' = stdout)", &f->output);
  flags->AddAlias("output", "o");
  flags->AddString("metric", "live|floor|peak", "what each line shows (default live)", &f->metric);
  flags->AddString("ranks", "LIST", "only these ranks, e.g. 0,1,5 or 0-3 (default all)", &f->ranks);
  flags->Add("axis", "step|time",
             "steps (default; time buckets when the job has no step markers) or time buckets on "
             "the x axis",
             [f](absl::string_view v) {
               f->axis = std::string(v);
               f->axis_given = true;
               return absl::OkStatus();
             });
  flags->AddInt("width", "PX", "image width (default 1200)", &f->width);
  flags->AddInt("height", "PX", "image height (default 700)", &f->height);
  flags->AddString("collector", "ADDR",
                   absl::StrCat("collector host:port (default $MEMTRACE_COLLECTOR or ",
                                cli::kDefaultCollector, "; now ", io.default_collector, ")"),
                   &f->collector);
  flags->AddDuration("timeout", "DURATION", "deadline of each request (default 30s)", &f->timeout);
}

// The flags' values checked and turned into PlotOptions; INVALID_ARGUMENT names the bad flag.
absl::StatusOr<PlotOptions> ResolvePlotOptions(const PlotFlags& f) {
  if (f.job.empty()) return absl::InvalidArgumentError("--job is required");
  if (f.output.empty()) return absl::InvalidArgumentError("-o FILE is required");
  PlotOptions options;
  absl::StatusOr<analysis::Metric> metric = ParsePlotMetric(f.metric);
  if (!metric.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--metric: ", metric.status().message()));
  }
  options.metric = *metric;
  if (!f.ranks.empty()) {
    absl::StatusOr<std::set<uint32_t>> ranks = cli::ParseRankList(f.ranks);
    if (!ranks.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--ranks: ", ranks.status().message()));
    }
    options.ranks = *ranks;
  }
  if (f.axis != "step" && f.axis != "time") {
    return absl::InvalidArgumentError(
        absl::StrCat("--axis: '", f.axis, "' is not one of step, time"));
  }
  if (f.width < 400 || f.width > 20000 || f.height < 300 || f.height > 20000) {
    return absl::InvalidArgumentError("--width / --height: 400..20000 x 300..20000 pixels");
  }
  options.width = static_cast<int>(f.width);
  options.height = static_cast<int>(f.height);
  return options;
}

absl::Status CheckRanksExist(const analysis::JobTimeline& timeline, const std::string& job,
                             const std::set<uint32_t>& ranks) {
  for (uint32_t rank : ranks) {
    bool found = false;
    for (const analysis::RankTimeline& r : timeline.ranks) found |= r.rank == rank;
    if (!found)
      return absl::NotFoundError(absl::StrCat("--ranks: job ", job, " has no rank ", rank));
  }
  return absl::OkStatus();
}

// A restarted job's lines are each rank's latest attempt: says so, naming an earlier attempt's
// OOM among the ranks drawn (what the restart followed, which no line shows), as the analyses'
// notes do. Empty for a job never restarted.
std::string RestartNote(const analysis::JobTimeline& timeline, const std::set<uint32_t>& shown) {
  std::map<uint32_t, uint32_t> latest;
  std::set<uint32_t> attempts;
  for (const analysis::RankTimeline& r : timeline.ranks) {
    latest[r.rank] = std::max(latest[r.rank], r.attempt);
    attempts.insert(r.attempt);
  }
  if (attempts.size() < 2) return "";
  std::vector<std::string> unread_ooms;
  for (const analysis::RankTimeline& r : timeline.ranks) {
    if (r.attempt == latest[r.rank] || shown.count(r.rank) == 0) continue;
    if (r.FirstOomRow() != nullptr)
      unread_ooms.push_back(absl::StrCat("rank ", r.rank, " attempt ", r.attempt));
  }
  return absl::StrCat("; each rank's latest attempt drawn (the job has ", attempts.size(), ")",
                      unread_ooms.empty() ? ""
                                          : absl::StrCat(", not drawn: the OOM",
                                                         unread_ooms.size() > 1 ? "s of " : " of ",
                                                         absl::StrJoin(unread_ooms, ", ")));
}

// What a written plot shows, for stderr: ranks (those --ranks kept, of all), the highlighted
// one, leaks, and which attempts of a restarted job.
std::string PlotSummary(const std::string& output, const analysis::JobTimeline& timeline,
                        const std::set<uint32_t>& only_ranks, const PlotMarks& marks) {
  // Ranks, not rank-attempts: a restarted rank is one line of the plot (its latest attempt).
  std::set<uint32_t> all, shown;
  for (const analysis::RankTimeline& r : timeline.ranks) {
    all.insert(r.rank);
    if (only_ranks.empty() || only_ranks.count(r.rank) > 0) shown.insert(r.rank);
  }
  const size_t drawn = shown.size();
  return absl::StrCat(
      "wrote ", output, ": ",
      drawn == all.size() ? absl::StrCat(drawn) : absl::StrCat(drawn, " of ", all.size()),
      " ranks, ",
      marks.highlighted_rank
          ? absl::StrCat(
                "rank ", *marks.highlighted_rank,
                shown.count(*marks.highlighted_rank) > 0 ? " highlighted (diverged at "
                                                         : " diverged at ",
                analysis::FormatKey(marks.onset_step, timeline.time_axis ? timeline.bucket_ns : 0),
                shown.count(*marks.highlighted_rank) > 0 ? ")" : ", not drawn: not in --ranks")
          : std::string("no rank diverged"),
      marks.leaks.empty() ? "" : absl::StrCat(", ", marks.leaks.size(), " leaking"),
      RestartNote(timeline, shown));
}

int RunPlot(const cli::Command& self, const std::vector<std::string>& args, cli::CommandIo& io) {
  PlotFlags f;
  cli::FlagSet flags;
  RegisterPlotFlags(io, &flags, &f);
  absl::StatusOr<cli::FlagSet::Parsed> parsed = flags.Parse(args);
  if (!parsed.ok()) return cli::ReportError(io, parsed.status(), self.name);
  if (parsed->help) {
    io.out << self.usage << "\n\nFlags:\n" << flags.Describe();
    return cli::kExitOk;
  }
  if (!parsed->positional.empty()) {
    return cli::ReportError(io,
                            absl::InvalidArgumentError(absl::StrCat(
                                "unexpected argument '", parsed->positional.front(), "'")),
                            self.name);
  }
  absl::StatusOr<PlotOptions> options = ResolvePlotOptions(f);
  if (!options.ok()) return cli::ReportError(io, options.status(), self.name);

  absl::StatusOr<cli::QueryClient> client = cli::QueryClient::Create(f.collector, f.timeout);
  if (!client.ok()) return cli::ReportError(io, client.status(), self.name);
  const v1::TimelineAxis wire_axis =
      f.axis == "time" ? v1::TIMELINE_AXIS_TIME : v1::TIMELINE_AXIS_STEP;
  absl::StatusOr<analysis::JobTimeline> timeline =
      LoadTimeline(*client, f.job, wire_axis, f.axis_given, io);
  if (!timeline.ok()) return cli::ReportError(io, timeline.status(), self.name);
  absl::Status ranks = CheckRanksExist(*timeline, f.job, options->ranks);
  if (!ranks.ok()) return cli::ReportError(io, ranks, self.name);
  // On time buckets, fallen back to or asked for with --axis time, the marks come from windows
  // of whole steps, as the collector's analyses read them.
  PlotMarks marks = MarksFromAnalyses(*timeline, /*step_windows=*/timeline->time_axis);
  absl::Status written = WriteOutputFile(f.output, io.out, [&](std::ostream& out) {
    out << RenderMemoryPlot(*timeline, marks, *options);
    return absl::OkStatus();
  });
  if (!written.ok()) return cli::ReportError(io, written, self.name);
  if (f.output != "-") {
    io.err << PlotSummary(f.output, *timeline, options->ranks, marks) << "\n";
  }
  return cli::kExitOk;
}

}  // namespace

cli::Command PlotCommand() {
  cli::Command command{"plot", "draw each rank's memory per step as an SVG, divergence marked",
                       kUsage, nullptr};
  command.run = [self = command](const std::vector<std::string>& args, cli::CommandIo& io) {
    return RunPlot(self, args, io);
  };
  return command;
}

}  // namespace memtrace::exporter
