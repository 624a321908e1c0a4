#include "query/cli/commands/ranks.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "query/cli/query_client.h"

namespace memtrace::cli {
namespace {

constexpr char kUsage[] =
    "Usage: memtrace ranks --job JOB [common flags]\n"
    "\n"
    "One row per rank of JOB as the collector stored it: host, local rank, attempt, how the\n"
    "rank was identified (env: the rank its sender gave, RANK from the launcher or, for\n"
    "`memtrace import`, the trace's rank; host+device+pid otherwise; subprocess of rank N\n"
    "for a process rank N started that inherited its RANK, numbered as host+device+pid and\n"
    "left out of the analyses, which memtrace live --rank N shows beside it; started rank\n"
    "N's process for the one that started it and connected after it, stored alike), events\n"
    "stored, the highest durable sequence number, its state (running: its agent is connected,\n"
    "and its last step or time bucket is still in progress, which the analyses compare ranks\n"
    "without; ended: it closed its stream cleanly; vanished: neither, as a crashed or killed\n"
    "process), whether the agent closed its stream cleanly (complete), the agent's counters as\n"
    "it last sent them (events lost; unacked: bytes of batches waiting behind its last one, in\n"
    "memory or spooled), the events up to the\n"
    "durable sequence number that the collector never stored (missing: batches the agent's\n"
    "full spool dropped, or acknowledged events a collector lost to a machine crash under\n"
    "--durability async or a damaged write-ahead log, which no agent can resend; agents count\n"
    "both in lost as well once they reconnect, so the two overlap and do not add up), the\n"
    "time of the last acknowledged batch, live bytes, the current step (- for a rank that\n"
    "sent no step marker), anomalies the\n"
    "collector counted (frees of unknown addresses, double frees, time going back,\n"
    "timestamps far past when the collector received them, ...) and OOM events.\n"
    "With --format json or csv also: world size, pid, device, launcher, first and last\n"
    "event time in the rank's own clock (add clock_offset_ns for the collector's, which\n"
    "memtrace jobs uses), the agent's clock estimate (collector clock minus the rank's, and the\n"
    "round trip it was measured over, in ns; empty when the agent sent none), and the\n"
    "anomalies by kind (anomaly_kinds: 'kind=count' for each kind counted, as named in\n"
    "memtrace.v1.AnomalyCounts).";

// "free_unknown=1 time_future=3": each kind of AnomalyCounts counted, in field order. By
// reflection, so that a kind added to the proto shows without a change here.
std::string AnomalyKinds(const v1::AnomalyCounts& counts) {
  std::string out;
  const google::protobuf::Descriptor* descriptor = counts.GetDescriptor();
  const google::protobuf::Reflection* reflection = counts.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    if (field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_UINT64) continue;
    const uint64_t count = reflection->GetUInt64(counts, field);
    if (count != 0) absl::StrAppend(&out, out.empty() ? "" : " ", field->name(), "=", count);
  }
  return out;
}

// Sequence numbers start at 1 and every stored event has its own, so those up to the durable
// one that were never stored are the difference.
uint64_t MissingEvents(const v1::RankSummary& rank) {
  return rank.durable_seq() > rank.events_stored() ? rank.durable_seq() - rank.events_stored() : 0;
}

int RunRanks(const Command& self, const std::vector<std::string>& args, CommandIo& io) {
  FlagSet flags;
  CommonOptions common;
  std::string job;
  flags.AddString("job", "JOB", "job id (see memtrace jobs); required", &job);
  AddCommonFlags(io, flags, &common);
  if (std::optional<int> exit = ParseCommandLine(self, flags, args, io)) return *exit;
  if (job.empty()) return ReportError(io, absl::InvalidArgumentError("--job is required"), "ranks");

  absl::StatusOr<QueryClient> client = QueryClient::Create(common.collector, common.timeout);
  if (!client.ok()) return ReportError(io, client.status(), "ranks");
  absl::StatusOr<v1::ListRanksResponse> response = client->ListRanks(job);
  if (!response.ok()) return ReportError(io, response.status(), "ranks");
  if (response->ranks().empty()) {
    return ReportError(io, absl::NotFoundError(
                               absl::StrCat("job '", job, "' has no ranks at ", common.collector)));
  }
  WriteTable(RanksTable(*response, common.format != OutputFormat::kTable), common.format, io.out);
  return kExitOk;
}

}  // namespace

Table RanksTable(const v1::ListRanksResponse& response, bool detailed) {
  std::vector<Column> columns = {{"rank", ColumnType::kInt},
                                 {"host", ColumnType::kText},
                                 {"local", ColumnType::kInt},
                                 {"attempt", ColumnType::kInt}};
  if (detailed) {
    columns.insert(columns.end(), {{"world_size", ColumnType::kInt},
                                   {"pid", ColumnType::kInt},
                                   {"device", ColumnType::kInt},
                                   {"launcher", ColumnType::kText},
                                   {"first_event", ColumnType::kTimeNs},
                                   {"last_event", ColumnType::kTimeNs},
                                   {"clock_offset_ns", ColumnType::kInt},
                                   {"clock_round_trip_ns", ColumnType::kInt}});
  }
  columns.insert(columns.end(), {{"identified_by", ColumnType::kText},
                                 {"events", ColumnType::kInt},
                                 {"durable_seq", ColumnType::kInt},
                                 {"state", ColumnType::kText},
                                 {"complete", ColumnType::kBool},
                                 {"lost", ColumnType::kInt},
                                 {"unacked", ColumnType::kBytes},
                                 {"missing", ColumnType::kInt},
                                 {"last_ack", ColumnType::kTimeNs},
                                 {"live", ColumnType::kBytes},
                                 {"step", ColumnType::kInt},
                                 {"anomalies", ColumnType::kInt},
                                 {"ooms", ColumnType::kInt}});
  if (detailed) columns.push_back({"anomaly_kinds", ColumnType::kText});
  Table table(std::move(columns));
  for (const v1::RankSummary& rank : response.ranks()) {
    const v1::RankIdentity& id = rank.identity();
    std::vector<Cell> row = {uint64_t{rank.rank()}, id.host(), int64_t{id.local_rank()},
                             uint64_t{id.attempt()}};
    if (detailed) {
      row.insert(row.end(),
                 {int64_t{id.world_size()}, uint64_t{id.pid()}, int64_t{id.device_index()},
                  id.launcher(), int64_t{rank.first_ts_ns()}, int64_t{rank.last_ts_ns()}});
      if (rank.has_clock()) {
        row.insert(row.end(), {int64_t{rank.clock().offset_ns()},
                               int64_t{rank.clock().round_trip_ns()}});
      } else {
        row.insert(row.end(), {std::monostate(), std::monostate()});
      }
    }
    row.insert(
        row.end(),
        {rank.identified_by(), uint64_t{rank.events_stored()}, uint64_t{rank.durable_seq()},
         std::string(rank.connected()  ? "running"
                     : rank.complete() ? "ended"
                                       : "vanished"),
         rank.complete(), uint64_t{rank.counters().events_lost()},
         uint64_t{rank.counters().spool_bytes()}, MissingEvents(rank),
         int64_t{rank.last_ack_unix_ns()}, uint64_t{rank.live_bytes()},
         // A rank with no event yet has no step either (its summary was never updated).
         rank.no_step_markers() || rank.events_stored() == 0 ? Cell{}
                                                             : Cell{int64_t{rank.current_step()}},
         uint64_t{rank.anomalies()}, uint64_t{rank.ooms()}});
    if (detailed) row.push_back(AnomalyKinds(rank.anomaly_counts()));
    table.AddRow(std::move(row));
  }
  return table;
}

Command RanksCommand() {
  Command command{"ranks", "per-rank identity, stored events, agent health and live bytes", kUsage,
                  nullptr};
  command.run = [self = command](const std::vector<std::string>& args, CommandIo& io) {
    return RunRanks(self, args, io);
  };
  return command;
}

}  // namespace memtrace::cli
