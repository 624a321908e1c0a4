#include "query/cli/commands/diverged.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "query/analysis/render.h"
#include "query/cli/commands/analysis_client.h"
#include "query/cli/commands/analysis_command.h"

namespace memtrace::cli {
namespace {

constexpr char kName[] = "diverged";
constexpr char kUsage[] =
    "Usage: memtrace diverged --job JOB [--metric floor|end|peak] [--persistence N]\n"
    "                         [--min-z Z] [--min-excess BYTES] [--warmup N] [--absolute]\n"
    "                         [--attempt N] [--axis step|time] [--subprocesses]\n"
    "                         [common flags]\n"
    "\n"
    "Which rank's memory left the cohort first, and at which step. Per step, every rank's\n"
    "memory (the step floor by default: what it keeps once transients are freed) is compared\n"
    "with the median of all ranks; a rank diverges when it stays outside the cohort (robust z\n"
    ">= --min-z against the cohort's MAD, and at least --min-excess bytes and 2% of the median)\n"
    "for --persistence steps in a row, so one spike does not count. When the ranks split in\n"
    "two groups of a third or more each (half of them leak alike), the cohort is the group\n"
    "that kept its baseline, and the report says so. Each rank is measured\n"
    "from its own baseline (its level at the start of the first steps after --warmup), so a\n"
    "rank that always held more is listed as an offset, not as diverged (--absolute compares\n"
    "raw bytes).\n"
    "Shows the onset step and time, the rank's value vs the cohort median, and the ranks that\n"
    "followed in onset order. \"No rank diverged\" is an answer too (exit code 0).\n"
    "\"drift from\" is the first step of the run of deviations (a quarter of the threshold or\n"
    "more, on the same side) that leads to the onset. On the floor, memory kept from step S\n"
    "on usually shows from step S+1 (a step's floor is its lowest point, often before S's\n"
    "allocation), so a leak that `memtrace leaks` says is \"rising since S\" (its last step\n"
    "at the old floor) drifts from S+1 here.\n" MEMTRACE_SUBPROCESSES_HELP;

int Run(const Command& self, const std::vector<std::string>& args, CommandIo& io) {
  FlagSet flags;
  AnalysisOptions options;
  v1::DivergedRequest request;
  v1::DivergenceParams* p = request.mutable_params();
  flags.AddString("job", "JOB", "job id (see memtrace jobs); required", request.mutable_job_id());
  AddChoiceFlag<v1::AnalysisMetric>(
      flags, "metric",
      {{"floor", v1::ANALYSIS_METRIC_FLOOR},
       {"end", v1::ANALYSIS_METRIC_END},
       {"peak", v1::ANALYSIS_METRIC_PEAK}},
      "per-step value compared: minimum (floor, default), at step end, or maximum",
      [p](v1::AnalysisMetric m) { p->set_metric(m); });
  // 0 steps in a row would be no test at all (the analysis would count it as 1).
  AddUint32Flag(
      flags, "persistence", "N", "steps in a row outside the cohort, >= 1 (default 5)",
      [p](uint32_t v) { p->set_persistence_steps(v); }, 1);
  AddDoubleFlag(flags, "min-z", "Z", "robust z a rank must reach, > 0 (default 3.5)",
                kPositiveNumber, [p](double v) { p->set_min_z(v); });
  AddBytesFlag(flags, "min-excess", "smallest difference from the cohort (default 64MiB)",
               [p](uint64_t v) { p->set_min_excess_bytes(v); });
  AddUint32Flag(flags, "warmup", "N", "first steps of each rank not compared (default 5)",
                [p](uint32_t v) { p->set_warmup_steps(v); });
  flags.Add("absolute", "", "compare raw bytes instead of each rank's change since its baseline",
            [p](absl::string_view v) {
              bool absolute = false;
              if (!absl::SimpleAtob(v, &absolute)) {
                return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not true or false"));
              }
              p->set_absolute(absolute);
              return absl::OkStatus();
            });
  AddUint32Flag(flags, "attempt", "N", "restart attempt to analyse (default each rank's latest)",
                [p](uint32_t v) { p->set_attempt(v); });
  v1::TimelineAxis axis = v1::TIMELINE_AXIS_STEP;
  AddAxisFlag(flags, &axis);
  bool subprocesses = false;
  AddSubprocessesFlag(flags, &subprocesses);
  AddAnalysisFlags(io, flags, &options);
  if (std::optional<int> exit = ParseCommandLine(self, flags, args, io)) return *exit;
  request.set_axis(axis);
  request.set_subprocesses(subprocesses);
  if (request.job_id().empty()) {
    return ReportError(io, absl::InvalidArgumentError("--job is required"), kName);
  }
  absl::StatusOr<AnalysisClient> client =
      AnalysisClient::Create(options.collector, options.timeout);
  if (!client.ok()) return ReportError(io, client.status(), kName);
  return PrintReport(kName, client->Diverged(request), options, &analysis::RenderDivergence, io);
}

}  // namespace

Command DivergedCommand() {
  Command command{kName, "the earliest rank whose memory left the cohort, and at which step",
                  kUsage, nullptr};
  command.run = [self = command](const std::vector<std::string>& args, CommandIo& io) {
    return Run(self, args, io);
  };
  return command;
}

}  // namespace memtrace::cli
