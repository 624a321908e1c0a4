#include "query/cli/commands/growth.h"

#include "absl/strings/str_cat.h"
#include "query/analysis/growth.h"
#include "query/analysis/render.h"
#include "query/cli/commands/analysis_client.h"
#include "query/cli/commands/analysis_command.h"

namespace memtrace::cli {
namespace {

constexpr char kName[] = "growth";
constexpr char kUsage[] =
    "Usage: memtrace growth --job JOB [--by tag|rank|tag,rank|source|source,rank]\n"
    "                       [--warmup N] [--window N] [--min-growth BYTES] [--min-z Z]\n"
    "                       [--metric floor|end|peak] [--attempt N] [--axis step|time]\n"
    "                       [--subprocesses] [common flags]\n"
    "\n"
    "Which module tag (FSDP shard), source library or rank grows. For every group on every\n"
    "rank, its live bytes at each step end after --warmup are fitted with a robust\n"
    "(Theil-Sen) line, from where it began to rise if it was flat before, or where a slower\n"
    "rise steepened (a leak that started late keeps its own rate); a group grows when the fitted "
    "growth is at least --min-growth\n"
    "and the trend is significant (Kendall z >= --min-z), so jitter and single jumps do not\n"
    "count. A rise over the last 3 or more steps, too few for that test, counts when each\n"
    "step's rise stands out of the series' step-to-step noise (twice its robust spread).\n"
    "Groups are listed fastest first with bytes/step (per second on time buckets), the ranks\n"
    "where they grow, and whether\n"
    "that is every rank fitted (e.g. gradients accumulating without zero_grad) or some (a leak\n"
    "on one rank); a rank with too few steps after its warm-up is not fitted and is counted\n"
    "apart (\"all 7 of 8 ranks (1 too short to fit)\"). --by tag (default) and source sum over "
    "ranks; tag,rank and\n"
    "source,rank list each rank apart; rank fits each rank's --metric (default the floor).\n"
    "An empty list means nothing grows.\n" MEMTRACE_SUBPROCESSES_HELP;

int Run(const Command& self, const std::vector<std::string>& args, CommandIo& io) {
  FlagSet flags;
  AnalysisOptions options;
  v1::GrowthRequest request;
  v1::GrowthParams* p = request.mutable_params();
  flags.AddString("job", "JOB", "job id (see memtrace jobs); required", request.mutable_job_id());
  AddChoiceFlag<v1::GrowthBy>(flags, "by",
                              {{"tag", v1::GROWTH_BY_TAG},
                               {"rank", v1::GROWTH_BY_RANK},
                               {"tag,rank", v1::GROWTH_BY_TAG_RANK},
                               {"source", v1::GROWTH_BY_SOURCE},
                               {"source,rank", v1::GROWTH_BY_SOURCE_RANK}},
                              "grouping (default tag)", [p](v1::GrowthBy by) { p->set_by(by); });
  AddUint32Flag(flags, "warmup", "N", "first steps of each rank not fitted (default 5)",
                [p](uint32_t v) { p->set_warmup_steps(v); });
  const uint32_t min_window = analysis::GrowthParams().min_points;
  AddStepWindowFlag(flags, "window",
                    absl::StrCat("fit only the last N steps, at least ", min_window,
                                 " (default, and 0: all after warm-up)"),
                    min_window, [p](uint32_t v) { p->set_window_steps(v); });
  AddBytesFlag(flags, "min-growth", "least growth over the window that counts (default 64MiB)",
               [p](uint64_t v) { p->set_min_growth_bytes(v); });
  AddDoubleFlag(flags, "min-z", "Z", "least trend statistic that counts, > 0 (default 3)",
                kPositiveNumber, [p](double v) { p->set_min_trend_z(v); });
  AddChoiceFlag<v1::AnalysisMetric>(flags, "metric",
                                    {{"floor", v1::ANALYSIS_METRIC_FLOOR},
                                     {"end", v1::ANALYSIS_METRIC_END},
                                     {"peak", v1::ANALYSIS_METRIC_PEAK}},
                                    "series of --by rank (default floor)",
                                    [p](v1::AnalysisMetric m) { p->set_rank_metric(m); });
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
  // A series per rank exists only --by rank; elsewhere the metric would be ignored.
  if (p->has_rank_metric() && p->by() != v1::GROWTH_BY_RANK) {
    return ReportError(io, absl::InvalidArgumentError("--metric applies to --by rank only"), kName);
  }
  absl::StatusOr<AnalysisClient> client =
      AnalysisClient::Create(options.collector, options.timeout);
  if (!client.ok()) return ReportError(io, client.status(), kName);
  return PrintReport(kName, client->Growth(request), options, &analysis::RenderGrowth, io);
}

}  // namespace

Command GrowthCommand() {
  Command command{kName, "which tag / source / rank grows, how fast, on all ranks or some", kUsage,
                  nullptr};
  command.run = [self = command](const std::vector<std::string>& args, CommandIo& io) {
    return Run(self, args, io);
  };
  return command;
}

}  // namespace memtrace::cli
