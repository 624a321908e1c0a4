#include "query/cli/commands/leaks.h"

#include "query/analysis/render.h"
#include "query/cli/commands/analysis_client.h"
#include "query/cli/commands/analysis_command.h"
#include "query/cli/time_arg.h"

namespace memtrace::cli {
namespace {

constexpr char kName[] = "leaks";
constexpr char kUsage[] =
    "Usage: memtrace leaks --job JOB [--rank R] [--at TIME] [--warmup N]\n"
    "                      [--min-growth BYTES] [--min-boundaries N] [--top N] [--attempt N]\n"
    "                      [--axis step|time] [--subprocesses] [common flags]\n"
    "\n"
    "Leak or spike? Each rank's curve is classified from its per-step rollups: leak (the step\n"
    "floor keeps rising: robust slope since it began to rise, significant, still rising\n"
    "lately; or, over its last 3 or more steps, each rise standing out of the noise), spikes\n"
    "(peaks stand far above the floor in a few steps) or plateau. Its floor start and end are\n"
    "the medians of the first and last few step floors (the end lags a fast leak's last\n"
    "floor; memtrace timeline has each). Leak candidates come from\n"
    "each rank's live set (now, or at --at TIME): allocations made after warm-up and still\n"
    "live across at least --min-boundaries step boundaries, grouped by tag and call site\n"
    "(source) with counts and bytes, largest first (--top per rank). Phase-aware for RL\n"
    "trainers: memory allocated in a phase (e.g. rollout) and still live after that phase\n"
    "ended is listed, what several runs of the phase left first (one run's leftovers, such as\n"
    "optimizer state made by the first update, are often meant to stay); so are phase-named\n"
    "tags still holding memory at the ends of steps in which their phase ran and closed.\n"
    "Candidates count steps (also with --axis time), so a job without step markers has none.\n"
    "In every table, rows alike but for their rank are one row listing the ranks (\"0-2,4-7\";\n"
    "a long list cut short with its count: --format json lists every rank).\n"
    "\n"
    "TIME: ns since the epoch, now, now-15m, -90s, RFC 3339 (2026-12-02T16:54:03Z), or a\n"
    "time as memtrace prints it (2026-12-02 16:54:03.250, UTC), in\n"
    "the collector's clock: each rank is read at it in its own clock, shifted by the offset\n"
    "its agent measured (memtrace ranks), so hosts whose clocks disagree still line "
    "up.\n" MEMTRACE_SUBPROCESSES_HELP;

int Run(const Command& self, const std::vector<std::string>& args, CommandIo& io) {
  FlagSet flags;
  AnalysisOptions options;
  v1::LeaksRequest request;
  v1::LeakParams* p = request.mutable_params();
  flags.AddString("job", "JOB", "job id (see memtrace jobs); required", request.mutable_job_id());
  AddUint32Flag(flags, "rank", "R",
                "only this rank (default every rank; with --subprocesses, a subprocess's number)",
                [&request](uint32_t v) { request.set_rank(v); });
  std::string at;
  flags.AddString("at", "TIME",
                  "candidates and phase survivors from the live sets at this time (default now; a "
                  "rank restarted since is read at the attempt that held it); the curves and the "
                  "phase-tagged memory at step ends read every step stored",
                  &at);
  AddUint32Flag(flags, "warmup", "N", "first steps not classified (default 5)",
                [p](uint32_t v) { p->set_warmup_steps(v); });
  AddBytesFlag(flags, "min-growth", "least floor growth that is a leak (default 64MiB)",
               [p](uint64_t v) { p->set_min_growth_bytes(v); });
  AddUint32Flag(flags, "min-boundaries", "N",
                "step boundaries a candidate must have survived (default 3)",
                [p](uint32_t v) { p->set_min_boundaries(v); });
  // From 1, as live's --top: 0 left the candidates out without a word.
  AddUint32Flag(
      flags, "top", "N", "candidates per rank (default 20)", [p](uint32_t v) { p->set_top_n(v); },
      1);
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
  if (!at.empty()) {
    absl::StatusOr<int64_t> ns = ParseTimeArg(at, io.now);
    if (!ns.ok()) {
      return ReportError(
          io, absl::InvalidArgumentError(absl::StrCat("--at: ", ns.status().message())), kName);
    }
    request.set_at_ns(*ns);
  }
  absl::StatusOr<AnalysisClient> client =
      AnalysisClient::Create(options.collector, options.timeout);
  if (!client.ok()) return ReportError(io, client.status(), kName);
  return PrintReport(kName, client->Leaks(request), options, &analysis::RenderLeaks, io);
}

}  // namespace

Command LeaksCommand() {
  Command command{kName, "plateau / spikes / leak per rank, leak candidates, phase survivors",
                  kUsage, nullptr};
  command.run = [self = command](const std::vector<std::string>& args, CommandIo& io) {
    return Run(self, args, io);
  };
  return command;
}

}  // namespace memtrace::cli
