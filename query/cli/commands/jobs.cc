#include "query/cli/commands/jobs.h"

#include "query/cli/query_client.h"

namespace memtrace::cli {
namespace {

constexpr char kUsage[] =
    "Usage: memtrace jobs [common flags]\n"
    "\n"
    "Lists the jobs the collector has stored: ranks, events (of every attempt of every rank),\n"
    "the time of the first and last event (in the collector's clock: each rank's shifted by\n"
    "its clock offset, see memtrace ranks), the span between them, and restarts: ranks stored\n"
    "again as a later attempt (a restart, or a rerun under the same id; the analyses read each\n"
    "rank's latest attempt, `memtrace ranks` lists them all), subprocesses: processes a rank\n"
    "started that inherited its RANK (an inference engine, a compile worker), and parents:\n"
    "processes that started a rank's process and connected after it (a trainer whose engine\n"
    "initialised CUDA first, and so holds the rank). Both are stored beside their rank and\n"
    "counted in neither ranks nor restarts.";

int RunJobs(const Command& self, const std::vector<std::string>& args, CommandIo& io) {
  FlagSet flags;
  CommonOptions common;
  AddCommonFlags(io, flags, &common);
  if (std::optional<int> exit = ParseCommandLine(self, flags, args, io)) return *exit;

  absl::StatusOr<QueryClient> client = QueryClient::Create(common.collector, common.timeout);
  if (!client.ok()) return ReportError(io, client.status(), "jobs");
  absl::StatusOr<v1::ListJobsResponse> response = client->ListJobs();
  if (!response.ok()) return ReportError(io, response.status(), "jobs");
  WriteTable(JobsTable(*response), common.format, io.out);
  // A header alone read as a listing that failed; the table stays (scripts read its columns).
  if (response->jobs_size() == 0) {
    io.err << "memtrace jobs: the collector at " << common.collector << " has no job stored\n";
  }
  return kExitOk;
}

}  // namespace

Table JobsTable(const v1::ListJobsResponse& response) {
  Table table({{"job", ColumnType::kText},
               {"ranks", ColumnType::kInt},
               {"events", ColumnType::kInt},
               {"first_event", ColumnType::kTimeNs},
               {"last_event", ColumnType::kTimeNs},
               {"span", ColumnType::kDurationNs},
               {"restarts", ColumnType::kInt},
               {"subprocesses", ColumnType::kInt},
               {"parents", ColumnType::kInt}});
  for (const v1::JobSummary& job : response.jobs()) {
    Cell span;
    if (job.first_ts_ns() != 0 && job.last_ts_ns() >= job.first_ts_ns()) {
      span = int64_t{job.last_ts_ns() - job.first_ts_ns()};
    }
    table.AddRow({job.job_id(), uint64_t{job.ranks()}, uint64_t{job.events()},
                  int64_t{job.first_ts_ns()}, int64_t{job.last_ts_ns()}, span,
                  uint64_t{job.restarts()}, uint64_t{job.subprocesses()}, uint64_t{job.parents()}});
  }
  return table;
}

Command JobsCommand() {
  Command command{"jobs", "list the jobs the collector has stored", kUsage, nullptr};
  command.run = [self = command](const std::vector<std::string>& args, CommandIo& io) {
    return RunJobs(self, args, io);
  };
  return command;
}

}  // namespace memtrace::cli
