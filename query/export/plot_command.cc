#include "query/export/plot_command.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
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
    "(a rising floor, as `memtrace leaks` finds it) are marked with labelled vertical lines.\n"
    "--ranks limits the lines drawn; the analyses still compare every rank. FILE '-' writes to\n"
    "stdout. The SVG's elements carry data-rank / data-highlighted / data-onset-step attributes.\n"
    "A job without step markers is drawn by time bucket unless --axis is given (as the\n"
    "analyses compare it; a note on stderr says so).";

constexpr uint32_t kMaxRank = 1 << 24;

absl::StatusOr<analysis::JobTimeline> FetchTimeline(const cli::QueryClient& client,
                                                    const std::string& job, v1::TimelineAxis axis) {
  v1::GetRollupsRequest request;
  request.set_job_id(job);
  request.set_axis(axis);
  absl::StatusOr<v1::GetRollupsResponse> rollups = client.GetRollups(request);
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

int RunPlot(const cli::Command& self, const std::vector<std::string>& args, cli::CommandIo& io) {
  std::string job, output, metric_text = "live", ranks_text, axis = "step";
  bool axis_given = false;
  std::string collector = io.default_collector;
  absl::Duration timeout = absl::Seconds(30);
  int64_t width = 1200, height = 700;
  cli::FlagSet flags;
  flags.AddString("job", "JOB", "job id (required)", &job);
  flags.AddString("o", "FILE", "output SVG file (required; '-' = stdout)", &output);
  flags.AddString("output", "FILE", "the same as -o", &output);
  flags.AddString("metric", "live|floor|peak", "what each line shows (default live)",
                  &metric_text);
  flags.AddString("ranks", "LIST", "only these ranks, e.g. 0,1,5 or 0-3 (default all)",
                  &ranks_text);
  flags.Add("axis", "step|time",
            "steps (default; time buckets when the job has no step markers) or time buckets on "
            "the x axis",
            [&](absl::string_view v) {
              axis = std::string(v);
              axis_given = true;
              return absl::OkStatus();
            });
  flags.AddInt("width", "PX", "image width (default 1200)", &width);
  flags.AddInt("height", "PX", "image height (default 700)", &height);
  flags.AddString("collector", "ADDR",
                  absl::StrCat("collector host:port (default ", io.default_collector, ")"),
                  &collector);
  flags.AddDuration("timeout", "DURATION", "deadline of each request (default 30s)", &timeout);
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
  if (job.empty()) return usage_error("--job is required");
  if (output.empty()) return usage_error("-o FILE is required");
  PlotOptions options;
  absl::StatusOr<analysis::Metric> metric = ParsePlotMetric(metric_text);
  if (!metric.ok()) return usage_error(absl::StrCat("--metric: ", metric.status().message()));
  options.metric = *metric;
  if (!ranks_text.empty()) {
    absl::StatusOr<std::set<uint32_t>> ranks = ParseRankList(ranks_text);
    if (!ranks.ok()) return usage_error(absl::StrCat("--ranks: ", ranks.status().message()));
    options.ranks = *ranks;
  }
  if (axis != "step" && axis != "time") {
    return usage_error(absl::StrCat("--axis: '", axis, "' is not one of step, time"));
  }
  if (width < 400 || width > 20000 || height < 300 || height > 20000) {
    return usage_error("--width / --height: 400..20000 x 300..20000 pixels");
  }
  options.width = static_cast<int>(width);
  options.height = static_cast<int>(height);

  absl::StatusOr<cli::QueryClient> client = cli::QueryClient::Create(collector, timeout);
  if (!client.ok()) return cli::ReportError(io, client.status(), self.name);
  const v1::TimelineAxis wire_axis =
      axis == "time" ? v1::TIMELINE_AXIS_TIME : v1::TIMELINE_AXIS_STEP;
  absl::StatusOr<analysis::JobTimeline> timeline =
      LoadTimeline(*client, job, wire_axis, axis_given, io);
  if (!timeline.ok()) return cli::ReportError(io, timeline.status(), self.name);
  if (!options.ranks.empty()) {
    for (uint32_t rank : options.ranks) {
      bool found = false;
      for (const analysis::RankTimeline& r : timeline->ranks) found |= r.rank == rank;
      if (!found) {
        return cli::ReportError(
            io, absl::NotFoundError(absl::StrCat("--ranks: job ", job, " has no rank ", rank)),
            self.name);
      }
    }
  }
  PlotMarks marks = MarksFromAnalyses(*timeline);
  absl::Status written = WriteOutputFile(output, io.out, [&](std::ostream& out) {
    out << RenderMemoryPlot(*timeline, marks, options);
    return absl::OkStatus();
  });
  if (!written.ok()) return cli::ReportError(io, written, self.name);
  if (output != "-") {
    io.err << "wrote " << output << ": " << timeline->ranks.size() << " ranks, "
           << (marks.highlighted_rank
                   ? absl::StrCat(
                         "rank ", *marks.highlighted_rank, " highlighted (diverged at ",
                         analysis::FormatKey(marks.onset_step,
                                             timeline->time_axis ? timeline->bucket_ns : 0),
                         ")")
                   : std::string("no rank diverged"))
           << (marks.leaks.empty() ? "" : absl::StrCat(", ", marks.leaks.size(), " leaking"))
           << "\n";
  }
  return cli::kExitOk;
}

}  // namespace

absl::StatusOr<std::set<uint32_t>> ParseRankList(absl::string_view text) {
  std::set<uint32_t> ranks;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    std::pair<absl::string_view, absl::string_view> range = absl::StrSplit(part, '-');
    uint32_t first = 0, last = 0;
    bool ok = absl::SimpleAtoi(range.first, &first);
    if (range.second.empty() && part.find('-') == absl::string_view::npos) {
      last = first;
    } else {
      ok = ok && absl::SimpleAtoi(range.second, &last) && last >= first;
    }
    if (!ok || last >= kMaxRank) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", part, "' is not a rank or a range of ranks"));
    }
    for (uint32_t r = first; r <= last; ++r) ranks.insert(r);
  }
  return ranks;
}

cli::Command PlotCommand() {
  cli::Command command{"plot", "draw each rank's memory per step as an SVG, divergence marked",
                       kUsage, nullptr};
  command.run = [self = command](const std::vector<std::string>& args, cli::CommandIo& io) {
    return RunPlot(self, args, io);
  };
  return command;
}

}  // namespace memtrace::exporter
