#include "query/cli/commands/live.h"

#include "query/analysis/render.h"
#include "query/cli/commands/analysis_client.h"
#include "query/cli/commands/analysis_command.h"
#include "query/cli/time_arg.h"

namespace memtrace::cli {
namespace {

constexpr char kName[] = "live";
constexpr char kUsage[] =
    "Usage: memtrace live --job JOB --rank R\n"
    "                     [--at TIME | --at-step S | --at-oom | --at-peak]\n"
    "                     [--top N] [--by tag|source|tag,source] [--order bytes|excess]\n"
    "                     [--attempt N] [common flags]\n"
    "\n"
    "What was live on rank R at a moment, grouped by tag (and/or source library), top N,\n"
    "each group next to the same group on the other ranks at the same moment (their median\n"
    "and maximum, and the difference: what is different on this rank). The moment: --at TIME\n"
    "on every rank; --at-step S, the end of step S on each rank; --at-oom, the rank's first\n"
    "OOM event (with the size it asked for) and that event's time on the other ranks; without\n"
    "--attempt, in the latest attempt that had one (a restart usually follows an OOM);\n"
    "--at-peak, the moment rank R's live bytes first reached their highest (in --attempt N,\n"
    "else its latest), which a spike's step end is long past, and that time on the other\n"
    "ranks (memtrace peak --by rank lists each rank's peak). A --at or --at-step before a\n"
    "restart reads the latest attempt that holds it; each other rank is read at its attempt\n"
    "running at that moment (at a step: the one running at rank R's end of it that has the\n"
    "step, else its latest that has it). With none of them: everything stored (the latest\n"
    "state); the other ranks at that state too, unless rank R stopped before them (it died,\n"
    "or ran out of memory while they went on): then they are read at its last event.\n"
    "Read at a time, a rank whose first event came after it is not compared (it is counted:\n"
    "'N other ranks had not begun by then').\n"
    "Rank R's subprocesses (processes it started that inherited its RANK, such as an\n"
    "inference engine: memtrace ranks lists them) follow its total, each read at the moment:\n"
    "a step's end, the time, the peak's; at an OOM or with no moment, rank R's last event.\n"
    "Their memory is on R's device but in none of R's figures; one whose stream is damaged\n"
    "says so ('not read: DATA_LOSS: ...') and R's report stands. --rank N of a subprocess's\n"
    "own number (memtrace ranks) shows what it holds, compared with no rank: at --at TIME,\n"
    "its own --at-oom or --at-peak, or --at-step S: its own end of step S where it records\n"
    "step markers, else its rank's (at the rank's last event for its last step, once ended).\n"
    "\n"
    "TIME: ns since the epoch, now, now-15m, -90s, RFC 3339 (2026-12-02T16:54:03Z), or a\n"
    "time as memtrace prints it (2026-12-02 16:54:03.250, UTC), in\n"
    "the collector's clock: each rank is read at it in its own clock, shifted by the offset\n"
    "its agent measured (memtrace ranks), so hosts whose clocks disagree still line up.";

int Run(const Command& self, const std::vector<std::string>& args, CommandIo& io) {
  FlagSet flags;
  AnalysisOptions options;
  v1::LiveRequest request;
  v1::LiveParams* p = request.mutable_params();
  flags.AddString("job", "JOB", "job id (see memtrace jobs); required", request.mutable_job_id());
  std::optional<uint32_t> rank;
  flags.AddOptionalUint32(
      "rank", "R", "the rank, or a rank's subprocess, to show (see memtrace ranks); required",
      &rank);
  std::string at;
  flags.AddString("at", "TIME", "the moment: a time", &at);
  std::optional<uint32_t> at_step;
  flags.AddOptionalUint32("at-step", "S", "the moment: the end of step S", &at_step);
  bool at_oom = false;
  flags.AddBool("at-oom", "the moment: the rank's first OOM", &at_oom);
  bool at_peak = false;
  flags.AddBool("at-peak", "the moment: the rank's highest live bytes", &at_peak);
  // At least 1: 0 printed an empty table.
  AddUint32Flag(
      flags, "top", "N", "groups shown (default 10)", [p](uint32_t v) { p->set_top_n(v); }, 1);
  AddChoiceFlag<v1::LiveGroupBy>(flags, "by",
                                 {{"tag", v1::LIVE_GROUP_BY_TAG},
                                  {"source", v1::LIVE_GROUP_BY_SOURCE},
                                  {"tag,source", v1::LIVE_GROUP_BY_TAG_SOURCE}},
                                 "grouping (default tag)",
                                 [p](v1::LiveGroupBy by) { p->set_by(by); });
  AddChoiceFlag<v1::LiveOrder>(flags, "order",
                               {{"bytes", v1::LIVE_ORDER_BYTES}, {"excess", v1::LIVE_ORDER_EXCESS}},
                               "most bytes first (default), or most above the other ranks first",
                               [p](v1::LiveOrder o) { p->set_order(o); });
  AddUint32Flag(flags, "attempt", "N", "restart attempt of rank R (default its latest; see above)",
                [&request](uint32_t v) { request.set_attempt(v); });
  AddAnalysisFlags(io, flags, &options);
  if (std::optional<int> exit = ParseCommandLine(self, flags, args, io)) return *exit;
  if (request.job_id().empty()) {
    return ReportError(io, absl::InvalidArgumentError("--job is required"), kName);
  }
  if (!rank.has_value()) {
    return ReportError(io, absl::InvalidArgumentError("--rank is required"), kName);
  }
  request.set_rank(*rank);
  if (int(!at.empty()) + int(at_step.has_value()) + int(at_oom) + int(at_peak) > 1) {
    return ReportError(
        io,
        absl::InvalidArgumentError("give at most one of --at, --at-step, --at-oom and --at-peak"),
        kName);
  }
  if (!at.empty()) {
    absl::StatusOr<int64_t> ns = ParseTimeArg(at, io.now);
    if (!ns.ok()) {
      return ReportError(
          io, absl::InvalidArgumentError(absl::StrCat("--at: ", ns.status().message())), kName);
    }
    request.set_at_ns(*ns);
  } else if (at_step.has_value()) {
    request.set_at_step(*at_step);
  } else if (at_oom) {
    request.set_at_oom(true);
  } else if (at_peak) {
    request.set_at_peak(true);
  }
  absl::StatusOr<AnalysisClient> client =
      AnalysisClient::Create(options.collector, options.timeout);
  if (!client.ok()) return ReportError(io, client.status(), kName);
  return PrintReport(kName, client->Live(request), options, &analysis::RenderLive, io);
}

}  // namespace

Command LiveCommand() {
  Command command{kName,
                  "what was live on a rank at a time, its OOM or its peak, vs the other ranks",
                  kUsage, nullptr};
  command.run = [self = command](const std::vector<std::string>& args, CommandIo& io) {
    return Run(self, args, io);
  };
  return command;
}

}  // namespace memtrace::cli
