#include "query/cli/commands/compare.h"

#include <string>
#include <vector>

#include "query/analysis/render.h"
#include "query/cli/commands/analysis_client.h"
#include "query/cli/commands/analysis_command.h"

namespace memtrace::cli {
namespace {

constexpr char kName[] = "compare";
constexpr char kUsage[] =
    "Usage: memtrace compare --job A --job B [--min-change FRACTION] [--axis step|time]\n"
    "                        [common flags]\n"
    "\n"
    "Runs diverged, growth, leaks, peak (by phase) and headroom on two stored jobs (e.g. before\n"
    "and after a config change) with their default settings and lists the findings side by\n"
    "side, changed ones first: the first diverging rank, growing tags, leaking ranks, the\n"
    "highest step peak and each phase's, forecasts and the final floor. A growth rate is one\n"
    "rank's (the median over the ranks where the group grows), followed by on how many ranks\n"
    "it grows. Peaks, floors and growth summed over ranks that differ by less than\n"
    "--min-change (default 0.05 = 5%) count as unchanged.\n"
    "When only one job has step markers, both are read on time buckets (as --axis time):\n"
    "read by step and by bucket, every rate differed in its units alone. The axis row says so.\n"
    "Two jobs read on time buckets (no step markers, or --axis time) are compared in one\n"
    "window of whole steps, the wider of the two jobs' own (for jobs stored at other bucket\n"
    "widths, --bucket_ms, rounded up to a whole number of both), so a job's column may differ\n"
    "from what the command alone says of it: its warm-up is 5 of those windows, not of its own.";

int Run(const Command& self, const std::vector<std::string>& args, CommandIo& io) {
  FlagSet flags;
  AnalysisOptions options;
  v1::CompareRequest request;
  std::vector<std::string> jobs;
  flags.AddRepeatable("job", "JOB", "a job id (see memtrace jobs); give exactly two",
                      [&jobs](absl::string_view v) {
                        jobs.emplace_back(v);
                        return absl::OkStatus();
                      });
  AddDoubleFlag(flags, "min-change", "FRACTION",
                "smallest relative change reported, in [0, 1) (default 0.05)", kFractionBelowOne,
                [&request](double v) { request.mutable_params()->set_min_change_fraction(v); });
  v1::TimelineAxis axis = v1::TIMELINE_AXIS_STEP;
  AddAxisFlag(flags, &axis);
  AddAnalysisFlags(io, flags, &options);
  if (std::optional<int> exit = ParseCommandLine(self, flags, args, io)) return *exit;
  request.set_axis(axis);
  if (jobs.size() != 2 || jobs[0].empty() || jobs[1].empty()) {
    return ReportError(io,
                       absl::InvalidArgumentError(
                           absl::StrCat("give two jobs: --job A --job B (got ", jobs.size(), ")")),
                       kName);
  }
  request.set_job_a(jobs[0]);
  request.set_job_b(jobs[1]);
  absl::StatusOr<AnalysisClient> client =
      AnalysisClient::Create(options.collector, options.timeout);
  if (!client.ok()) return ReportError(io, client.status(), kName);
  return PrintReport(kName, client->Compare(request), options, &analysis::RenderCompare, io);
}

}  // namespace

Command CompareCommand() {
  Command command{kName, "the analyses of two jobs side by side, and what changed", kUsage,
                  nullptr};
  command.run = [self = command](const std::vector<std::string>& args, CommandIo& io) {
    return Run(self, args, io);
  };
  return command;
}

}  // namespace memtrace::cli
