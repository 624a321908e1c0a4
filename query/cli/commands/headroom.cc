#include "query/cli/commands/headroom.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "query/analysis/headroom.h"
#include "query/analysis/render.h"
#include "query/cli/commands/analysis_client.h"
#include "query/cli/commands/analysis_command.h"

namespace memtrace::cli {
namespace {

constexpr char kName[] = "headroom";
constexpr char kUsage[] =
    "Usage: memtrace headroom --job JOB [--capacity BYTES] [--recent N] [--warmup N]\n"
    "                         [--min-growth BYTES] [--attempt N] [--axis step|time]\n"
    "                         [--subprocesses] [common flags]\n"
    "\n"
    "A forecast per rank: the robust slope of its step floor over the last --recent steps\n"
    "(at least 8; from where it began to rise, if it was flat before), extrapolated (plus the\n"
    "rank's highest transient peak above the floor in those steps: a periodic spike runs out\n"
    "of memory first) to the device's capacity, e.g. \"rank 3 reaches 80.0 GiB at step ~412\n"
    "(37 min after 2026-12-02 16:54:03.250, when its last step began)\": the time is from the\n"
    "last step that ended (a running rank's step in progress is none, nor an ended rank's\n"
    "last step cut short: see memtrace timeline), not from now. Its peak\n"
    "so far counts in the latest peak, and an OOM in it is one. The capacity is --capacity, else "
    "the device total\n"
    "the agent sampled; memory the device uses outside traced allocations (device used minus\n"
    "live bytes at the agent's samples) is subtracted. A floor without a significant rise (at\n"
    "least --min-growth; or, over the last 3 or more steps, each step's rise standing out of\n"
    "the step-to-step noise) gets no forecast; a rank that already hit an OOM, or whose peak\n"
    "already reaches the capacity, says so (a line each for the first 8, soonest first; the\n"
    "table lists every rank). Ranks whose rows are alike share one, listing\n"
    "them (\"0-2,4-7\"; a long list cut short with its count: --format json lists every "
    "rank).\n" MEMTRACE_SUBPROCESSES_HELP
    "\nheadroom compares none of them with another: each is forecast on its own, against the\n"
    "device it shares with its rank (whose memory is among what the device used outside it).";

int Run(const Command& self, const std::vector<std::string>& args, CommandIo& io) {
  FlagSet flags;
  AnalysisOptions options;
  v1::HeadroomRequest request;
  v1::HeadroomParams* p = request.mutable_params();
  flags.AddString("job", "JOB", "job id (see memtrace jobs); required", request.mutable_job_id());
  flags.Add("capacity", "BYTES", "device memory per rank, > 0 (default: the sampled device total)",
            [p](absl::string_view v) -> absl::Status {
              absl::StatusOr<uint64_t> bytes = ParseBytes(v);
              if (!bytes.ok()) return bytes.status();
              // 0 would read as "no capacity" for every rank, not as the default.
              if (*bytes == 0) return absl::InvalidArgumentError("must be more than 0 bytes");
              p->set_capacity_bytes(*bytes);
              return absl::OkStatus();
            });
  const uint32_t min_recent = analysis::HeadroomParams().min_points;
  AddStepWindowFlag(flags, "recent",
                    absl::StrCat("steps the trend is fitted over, at least ", min_recent,
                                 " (default 50; 0: all after warm-up)"),
                    min_recent, [p](uint32_t v) { p->set_recent_steps(v); });
  AddUint32Flag(flags, "warmup", "N", "first steps left out (default 5)",
                [p](uint32_t v) { p->set_warmup_steps(v); });
  AddBytesFlag(flags, "min-growth", "least floor growth over the window (default 64MiB)",
               [p](uint64_t v) { p->set_min_growth_bytes(v); });
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
  return PrintReport(kName, client->Headroom(request), options, &analysis::RenderHeadroom, io);
}

}  // namespace

Command HeadroomCommand() {
  Command command{kName, "when each rank reaches its device's capacity at its current trend",
                  kUsage, nullptr};
  command.run = [self = command](const std::vector<std::string>& args, CommandIo& io) {
    return Run(self, args, io);
  };
  return command;
}

}  // namespace memtrace::cli
