#include "query/cli/commands/peak.h"

#include "query/analysis/render.h"
#include "query/cli/commands/analysis_client.h"
#include "query/cli/commands/analysis_command.h"

namespace memtrace::cli {
namespace {

constexpr char kName[] = "peak";
constexpr char kUsage[] =
    "Usage: memtrace peak --job JOB [--by phase|tag|source|rank] [--warmup N] [--attempt N]\n"
    "                     [--axis step|time] [--subprocesses] [common flags]\n"
    "\n"
    "The most memory each group reached on each rank, at which step, its typical (median)\n"
    "peak per step (per run of a phase for --by phase) and its typical bytes at a step's end\n"
    "(at a phase's last close in a step for --by phase). --by phase (default): per NVTX phase\n"
    "(e.g. an RL trainer's rollout, weight_sync, actor_update) all live bytes while the phase\n"
    "was open, and what was live when it closed; --by tag / source: that group's own bytes;\n"
    "--by rank: the step peak and the moment it was reached (\"reached at\", read by\n"
    "`memtrace live --rank R --at-peak`). Highest peak first. A job that recorded no phases\n"
    "(most jobs that are not RL trainers) is answered by rank unless --by is given (a note on\n"
    "stderr says so); --by phase gives its empty answer. A running rank's step in progress\n"
    "(or an ended rank's last step cut short: see memtrace timeline) raises a peak it passed,\n"
    "but is no step of the typical ones; a rank (or group) seen only in it, such as a rank\n"
    "still in its first step, is listed with its peak so far and 0 steps. Ranks whose rows are "
    "alike share one, listing them (\"0-2,4-7\"; a long list\n"
    "cut short with its count: --format json lists every rank), with the range of the steps\n"
    "at which each reached that peak (by step; by rank, each row's own moment keeps it "
    "apart).\n" MEMTRACE_SUBPROCESSES_HELP;

int Run(const Command& self, const std::vector<std::string>& args, CommandIo& io) {
  FlagSet flags;
  AnalysisOptions options;
  v1::PeakRequest request;
  v1::PeakParams* p = request.mutable_params();
  bool by_given = false;
  flags.AddString("job", "JOB", "job id (see memtrace jobs); required", request.mutable_job_id());
  AddChoiceFlag<v1::PeakBy>(flags, "by",
                            {{"phase", v1::PEAK_BY_PHASE},
                             {"tag", v1::PEAK_BY_TAG},
                             {"source", v1::PEAK_BY_SOURCE},
                             {"rank", v1::PEAK_BY_RANK}},
                            "grouping (default phase; rank when the job recorded no phases)",
                            [p, &by_given](v1::PeakBy by) {
                              p->set_by(by);
                              by_given = true;
                            });
  AddUint32Flag(flags, "warmup", "N", "first steps left out (default 0)",
                [p](uint32_t v) { p->set_warmup_steps(v); });
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
  absl::StatusOr<v1::PeakReport> report = client->Peak(request);
  // No phase at all (none left out by --warmup): the default answers what it can, by rank.
  if (!by_given && report.ok() && report->summaries().empty() && report->entries().empty() &&
      p->warmup_steps() == 0 && report->ranks() > 0) {
    io.err << "memtrace peak: job '" << request.job_id()
           << "' has no phase in its steps so far: peak by rank (--by phase for the phases' empty "
              "answer)\n";
    p->set_by(v1::PEAK_BY_RANK);
    report = client->Peak(request);
  }
  return PrintReport(kName, report, options, &analysis::RenderPeak, io);
}

}  // namespace

Command PeakCommand() {
  Command command{kName, "peak per phase (or tag, source, rank) on each rank", kUsage, nullptr};
  command.run = [self = command](const std::vector<std::string>& args, CommandIo& io) {
    return Run(self, args, io);
  };
  return command;
}

}  // namespace memtrace::cli
