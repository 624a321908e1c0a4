// `bazel run -c opt //tools/bench:all [-- --quick]`: every benchmark of docs/PERFORMANCE.md in one
// run, each figure next to a baseline measured in the same run, printed as one table; the scaling
// plot is written to docs/scaling.svg (full run) and the table as markdown to the work dir.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "collector/store/event_store.h"
#include "query/cli/text_escape.h"
#include "tools/bench/agent_memory.h"
#include "tools/bench/db_bench.h"
#include "tools/bench/event_template.h"
#include "tools/bench/figure_table.h"
#include "tools/bench/ingest_run.h"
#include "tools/bench/job_loader.h"
#include "tools/bench/proc_stats.h"
#include "tools/bench/query_run.h"
#include "tools/bench/sql_baseline.h"
#include "tools/bench/store_footprint.h"
#include "tools/bench/svg_plot.h"
#include "tools/sim/workload.h"
#ifdef MEMTRACE_BENCH_HAVE_CUPTI
#include "tools/bench/agent_hot_path.h"
#endif

ABSL_FLAG(bool, quick, false, "small sizes and 3 s ingest runs: the whole run in < 2 minutes");
ABSL_FLAG(std::string, sections, "agent,ingest,storage,query,scaling",
          "comma-separated subset of agent, ingest, storage, query, scaling");
ABSL_FLAG(std::string, work_dir, "/tmp/memtrace-bench", "scratch space (emptied first)");
ABSL_FLAG(int, ingest_seconds, 0, "measurement window of the 8/64-stream runs (0: 30, quick 3)");
ABSL_FLAG(int, scaling_seconds, 0, "window of the 512/1024-stream runs (0: 10, quick 2)");
ABSL_FLAG(int, db_bench_seconds, 0, "duration of each db_bench run (0: 15, quick 2)");
ABSL_FLAG(bool, db_bench, true,
          "run the db_bench baselines (off: ingest figures only, for profiles)");
ABSL_FLAG(std::string, durability, "sync", "collector durability for ingest: sync | async");
ABSL_FLAG(int64_t, deep_events_per_rank, 0,
          "events per rank of the 8 ranks x 2000 steps job (0: 1,000,000, quick 100,000)");
ABSL_FLAG(int64_t, wide_events_per_rank, 0,
          "events per rank of the 1024 ranks x 200 steps job (0: 10,000, quick 2,000)");
ABSL_FLAG(std::string, svg, "",
          "scaling plot path (default: <workspace>/docs/scaling.svg under bazel run for the full "
          "run, else <work_dir>/scaling.svg)");
ABSL_FLAG(std::string, markdown, "", "markdown table path (default <work_dir>/table.md)");
ABSL_FLAG(std::string, duckdb_dir, "",
          "where @duckdb/node-api is (installed with npm when missing; default "
          "$HOME/.cache/memtrace-bench/duckdb)");
ABSL_FLAG(std::string, agent_memory_child, "", "internal: run the agent memory measurement");

namespace memtrace::bench {
namespace {

constexpr double kMiB = 1 << 20;

// When the run started, for progress lines (first use: the start of main).
absl::Time StartTime() {
  static const absl::Time start = absl::Now();
  return start;
}

void Log(const std::string& line) {
  std::fprintf(stderr, "[bench %6.1fs] %s\n", absl::ToDoubleSeconds(absl::Now() - StartTime()),
               line.c_str());
}

std::string Fmt(double v) { return FormatNumber(v); }

struct Config {
  bool quick = false;
  std::string work;
  absl::Duration ingest_window, scaling_window;
  int db_bench_seconds = 15;
  collector::Durability durability = collector::Durability::kSync;
  int64_t deep_events = 1'000'000;
  int64_t wide_events = 10'000;
  int warm_repeats = 5;
  int64_t template_events = 200'000;
};

// Everything measured, for the table and the plot.
struct Results {
  std::vector<Figure> figures;
  std::vector<std::string> notes;  // printed under the table (answers, commands)
  std::map<int, double> ingest_by_streams;
  std::map<int, double> db_bench_by_streams;
  // Warm ms per question name, by ranks (200 steps) and by events per rank (8 x 2000).
  std::map<std::string, std::map<int, double>> query_by_ranks;
  std::map<std::string, std::map<int64_t, double>> query_by_events;
};

bool Enabled(const std::string& section) {
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_sections), ',')) {
    if (s == section) return true;
  }
  return false;
}

std::string SelfExe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// ---------------------------------------------------------------------------------------------
// Agent.

#ifdef MEMTRACE_BENCH_HAVE_CUPTI
// Translation of CUPTI records into Events, against memcpy of the same bytes.
void TranslationFigure(const HotPathResult& h, const std::string& buf, Results* r) {
  Figure f;
  f.section = "agent";
  f.name = "CUPTI MEMORY2 record -> Event (RecordTranslator into an array sink), 1 thread";
  f.value = h.translate_events_per_s;
  f.unit = "events/s";
  f.baseline = "memcpy of the same record bytes";
  f.baseline_value = h.memcpy_records_per_s;
  f.target = 10e6;
  f.note = absl::StrCat(buf, "; bare cuptiActivityGetNextRecord walk ", Fmt(h.walk_records_per_s),
                        " records/s; through the agent's RecordOrder ",
                        Fmt(h.translate_ordered_events_per_s), " events/s");
  r->figures.push_back(f);
}

// The wire encoding of a batch, each side against protobuf's own.
void BatchingFigures(const HotPathResult& h, Results* r) {
  Figure f;
  const double copy_rate = 1e9 / h.copy_ns_per_event;
  f.section = "agent";
  f.name = "batching, agent side: AppendBatchWire (4096-event batches), 1 thread";
  f.value = h.wire_encode_events_per_s;
  f.unit = "events/s";
  f.baseline = "protobuf: EncodeBatch + SerializeToString to the same bytes";
  f.baseline_value = h.encode_events_per_s;
  f.note = absl::StrCat(Fmt(h.wire_bytes_per_event), " wire bytes/event; EncodeBatch alone ",
                        Fmt(h.build_events_per_s), " events/s; copying the Events (72 B) ",
                        Fmt(copy_rate), " events/s");
  r->figures.push_back(f);
  f.name = "batching, collector side: DecodeBatchWire, 1 thread";
  f.value = h.wire_decode_events_per_s;
  f.baseline = "protobuf: ParseFromString + DecodeBatch of the same bytes";
  f.baseline_value = h.decode_events_per_s;
  f.note = "";
  r->figures.push_back(f);
}

// Handing Events to the Transport, and the latency a whole CUPTI buffer adds.
void TransportFigures(const HotPathResult& h, Results* r) {
  Figure f;
  f.section = "agent";
  f.name = "Transport::Record while the sender streams to a collector";
  f.value = h.record_ns_per_event;
  f.unit = "ns/event";
  f.better = Better::kLower;
  f.baseline = "bare loop copying the same Events into an array";
  f.baseline_value = h.copy_ns_per_event;
  f.note = absl::StrCat(Fmt(1e9 / h.record_ns_per_event), " events/s on one thread; ",
                        h.events_lost, " lost");
  r->figures.push_back(f);
  f = Figure();
  f.section = "agent";
  f.name = "Transport::RecordMany, 128 events a call (as TranslateBuffer hands them over)";
  f.value = h.record_many_ns_per_event;
  f.unit = "ns/event";
  f.better = Better::kLower;
  f.baseline = "bare loop copying the same Events into an array";
  f.baseline_value = h.copy_ns_per_event;
  f.note = absl::StrCat(Fmt(1e9 / h.record_many_ns_per_event), " events/s on one thread; ",
                        Fmt(h.record_ns_per_event / h.record_many_ns_per_event),
                        "x Record() one by one");
  r->figures.push_back(f);
  f = Figure();
  f.section = "agent";
  f.name = "added latency per 8 MiB CUPTI buffer (TranslateBuffer into Transport), median";
  f.value = h.buffer_latency_ms_median;
  f.unit = "ms";
  f.better = Better::kLower;
  f.baseline = "memcpy of the 8 MiB buffer";
  f.baseline_value = h.buffer_memcpy_ms;
  f.note = absl::StrCat("max ", Fmt(h.buffer_latency_ms_max), " ms; ",
                        Fmt(h.buffer_latency_ms_median * 1e6 / h.records_per_buffer),
                        " ns/record on CUPTI's buffer-completion thread; through the agent's "
                        "RecordOrder with a step waiting: ",
                        Fmt(h.buffer_latency_ordered_ms_median), " ms");
  r->figures.push_back(f);
}

absl::Status AgentHotPathFigures(const Config& c, Results* r) {
  Log("agent: CUPTI record translation, batching, Transport::Record, buffer latency");
  HotPathOptions o;
  o.buffers = c.quick ? 8 : 32;
  o.data_dir = c.work + "/agent-collector";
  absl::StatusOr<HotPathResult> h = MeasureHotPath(o);
  if (!h.ok()) return h.status();
  const std::string buf = absl::StrCat(h->records_per_buffer, " records of ", h->record_bytes,
                                       " B per 8 MiB buffer, ", o.buffers, " buffers");
  TranslationFigure(*h, buf, r);
  BatchingFigures(*h, r);
  TransportFigures(*h, r);
  return absl::OkStatus();
}
#endif  // MEMTRACE_BENCH_HAVE_CUPTI

// The agent's memory when the collector never acks: a child process, so that its RSS is the
// agent's alone.
absl::Status AgentMemoryFigure(Results* r) {
  Log("agent: memory bound (child process, collector that never acks)");
  absl::StatusOr<std::unique_ptr<SilentCollector>> silent = SilentCollector::Start();
  if (!silent.ok()) return silent.status();
  absl::StatusOr<CommandResult> child = RunCommand(
      absl::StrCat(cli::ShellWord(SelfExe()), " --agent_memory_child=", (*silent)->address()),
      absl::Seconds(120));
  if (!child.ok()) return child.status();
  absl::StatusOr<AgentMemoryResult> m = ParseResult(child->output);
  if (!m.ok()) return absl::InternalError(absl::StrCat(m.status().message(), ": ", child->output));
  r->notes.push_back("agent memory child: " + FormatResult(*m));
  const double stated = (m->queue_capacity * m->event_bytes + m->max_unacked_bytes) / kMiB;
  Figure f;
  f.section = "agent";
  f.name = "agent memory: peak RSS growth, unacked batches at their bound (collector never acks)";
  f.value = (m->rss_peak - m->rss_before) / kMiB;
  f.unit = "MiB";
  f.better = Better::kLower;
  f.baseline = absl::StrCat("configured bound: queue ", m->queue_capacity, " x ", m->event_bytes,
                            " B + max_unacked_bytes ", m->max_unacked_bytes >> 20, " MiB");
  f.baseline_value = stated;
  f.ratio_target = 1.1;
  f.note =
      absl::StrCat("3 s of recording at full speed; heap (RssAnon) +",
                   Fmt((m->anon_peak - m->anon_before) / kMiB), " MiB; queue allocated at start +",
                   Fmt((m->rss_started - m->rss_before) / kMiB), " MiB; unacked ",
                   Fmt(m->unacked_bytes / kMiB), " MiB; lost ", m->lost_queue_full,
                   " (queue full) + ", m->lost_spool_full, " (spool full) of ", m->events_recorded,
                   "; not counted: CUPTI buffers (8 x 4 MiB max), the 2 MiB correlation table and "
                   "the string table (at most 32 MiB of names)");
  r->figures.push_back(f);
  return absl::OkStatus();
}

absl::Status AgentSection(const Config& c, Results* r) {
#ifdef MEMTRACE_BENCH_HAVE_CUPTI
  if (absl::Status s = AgentHotPathFigures(c, r); !s.ok()) return s;
#else
  r->notes.push_back("agent: skipped the CUPTI translator bench (built without CUDA headers)");
#endif
  return AgentMemoryFigure(r);
}

// ---------------------------------------------------------------------------------------------
// Ingest (and its db_bench baselines).

struct BlockShape {
  double value_bytes = 0;  // average stored block (LZ4-compressed by the store)
  double batch_bytes = 0;  // average block's EventBatch bytes, before that LZ4
  double events_per_block = 0;
};

absl::StatusOr<BlockShape> ShapeOf(const std::string& dir, uint64_t events) {
  FootprintOptions o;
  o.compact = false;
  absl::StatusOr<StoreFootprint> f = MeasureStore(dir, o);
  if (!f.ok()) return f.status();
  const FamilyFootprint blocks = f->Family("blocks");
  if (blocks.entries == 0) return absl::InternalError("no blocks stored");
  BlockShape s;
  s.value_bytes = static_cast<double>(blocks.raw_value_bytes) / blocks.entries;
  s.batch_bytes = static_cast<double>(blocks.decompressed_value_bytes) / blocks.entries;
  s.events_per_block = static_cast<double>(events) / blocks.entries;
  return s;
}

absl::StatusOr<std::vector<EventTemplate>> IngestTemplates(const Config& c) {
  sim::WorkloadOptions w;
  w.ranks = 8;
  w.steps = 400;
  w.events_per_rank = static_cast<uint64_t>(c.template_events);
  std::vector<EventTemplate> out;
  for (int rank = 0; rank < 4; ++rank) {
    absl::StatusOr<EventTemplate> t = PlayTemplate(w, rank);
    if (!t.ok()) return t.status();
    out.push_back(std::move(*t));
  }
  return out;
}

// "collector handlers 0.12, producers 0.05, ...": CPU-s per M events by role, largest first.
std::string CpuSplit(const IngestResult& in) {
  std::vector<std::pair<double, std::string>> roles;
  for (const auto& [role, seconds] : in.cpu_seconds_by_role) {
    roles.emplace_back(seconds / (in.events_in_window / 1e6), role);
  }
  std::sort(roles.rbegin(), roles.rend());
  std::vector<std::string> parts;
  for (const auto& [per_m, role] : roles) parts.push_back(absl::StrCat(role, " ", Fmt(per_m)));
  return absl::StrJoin(parts, ", ");
}

absl::StatusOr<IngestResult> Ingest(const Config& c, const std::vector<EventTemplate>& templates,
                                    int streams, absl::Duration window) {
  IngestOptions o;
  o.data_dir = absl::StrCat(c.work, "/ingest-", streams);
  o.streams = streams;
  o.measure = window;
  o.warmup = c.quick ? absl::Seconds(1) : absl::Seconds(2);
  o.durability = c.durability;
  if (streams > 64) {
    // Hundreds of agents in one process: small queues (batches then leave on the batch delay
    // with what the window lets through).
    o.queue_capacity = 1 << 14;
    o.window_events = 1 << 13;
  }
  Log(absl::StrCat("ingest: ", streams, " streams for ", absl::FormatDuration(window),
                   " (durability ", collector::DurabilityName(c.durability), ")"));
  absl::StatusOr<IngestResult> r = RunIngest(o, templates);
  if (r.ok()) {
    Log(absl::StrCat("ingest: ", streams, " streams: ", Fmt(r->events_per_second),
                     " events/s, stored ", r->events_stored, " of ", r->events_recorded, ", lost ",
                     r->events_lost, ", drain ", Fmt(r->drain_seconds), " s"));
  }
  return r;
}

absl::Status IngestSection(const Config& c, const std::vector<EventTemplate>& templates,
                           Results* r) {
  for (int streams : {8, 64}) {
    absl::StatusOr<IngestResult> in = Ingest(c, templates, streams, c.ingest_window);
    if (!in.ok()) return in.status();
    r->ingest_by_streams[streams] = in->events_per_second;
    const std::string dir = absl::StrCat(c.work, "/ingest-", streams);
    absl::StatusOr<BlockShape> shape = ShapeOf(dir, in->events_stored);
    if (!shape.ok()) return shape.status();
    std::filesystem::remove_all(dir);
    if (!absl::GetFlag(FLAGS_db_bench)) {
      Figure f;
      f.section = "ingest";
      f.name = absl::StrCat(streams, " Transport streams -> 1 collector (db_bench skipped)");
      f.value = in->events_per_second;
      f.unit = "events/s";
      f.target = 1e6;
      f.note = absl::StrCat(Fmt(in->cpu_seconds / (in->events_in_window / 1e6)),
                            " CPU-s per M events (", CpuSplit(*in), ")");
      r->figures.push_back(f);
      continue;
    }

    // The same bytes the store writes: values of a stored block's size, already compressed
    // (the store LZ4s each block itself and RocksDB adds no compression to the family).
    DbBenchOptions block;
    block.dir = c.work + "/db_bench";
    block.value_size = static_cast<int>(shape->value_bytes);
    block.batch_size = 1;
    block.threads = streams;
    block.sync = c.durability == collector::Durability::kSync;
    block.compression = "none";
    block.compression_ratio = 1.0;
    block.seconds = c.db_bench_seconds;
    block.expected_ops_per_second = in->events_per_second / shape->events_per_block;
    Log(absl::StrCat("db_bench: one block per write, ", block.value_size, " B values, ", streams,
                     " threads"));
    absl::StatusOr<DbBenchResult> b = RunDbBench(block);
    if (!b.ok()) return b.status();
    const double block_rate = b->ops_per_second * shape->events_per_block;
    r->db_bench_by_streams[streams] = block_rate;

    // The design the store does not use: one key per event, its encoded bytes as the value,
    // RocksDB's LZ4 with the ratio LZ4 gets on these events.
    DbBenchOptions per_event = block;
    per_event.value_size =
        std::max(1, static_cast<int>(shape->batch_bytes / shape->events_per_block + 0.5));
    per_event.batch_size = static_cast<int>(shape->events_per_block + 0.5);
    per_event.compression = "lz4";
    per_event.compression_ratio =
        std::clamp(shape->value_bytes / std::max(shape->batch_bytes, 1.0), 0.05, 1.0);
    per_event.expected_ops_per_second = in->events_per_second;
    Log(absl::StrCat("db_bench: one key per event, ", per_event.value_size, " B values, batch ",
                     per_event.batch_size));
    absl::StatusOr<DbBenchResult> e = RunDbBench(per_event);
    if (!e.ok()) return e.status();
    std::filesystem::remove_all(block.dir);

    const std::string what = absl::StrCat(
        streams, " Transport streams -> 1 collector, ack after durable (",
        collector::DurabilityName(c.durability), "), ", absl::FormatDuration(c.ingest_window));
    Figure f;
    f.section = "ingest";
    f.name = what;
    f.value = in->events_per_second;
    f.unit = "events/s";
    f.baseline = absl::StrCat("db_bench fillseq key 20 B, value ", block.value_size,
                              " B (one block), batch 1, ", streams, " threads, x ",
                              Fmt(shape->events_per_block), " events/block");
    f.baseline_value = block_rate;
    f.target = 1e6;
    f.ratio_target = 0.5;
    f.note = absl::StrCat(Fmt(in->cpu_seconds / (in->events_in_window / 1e6)),
                          " CPU-s per M events, all on the same 2 cores (", CpuSplit(*in),
                          "); lost ", in->events_lost, "; stored ", in->events_stored, "/",
                          in->events_recorded, "; db_bench ", Fmt(b->ops_per_second), " blocks/s, ",
                          Fmt(b->mb_per_second), " MB/s");
    r->figures.push_back(f);
    f.name = absl::StrCat("  same run vs one key per event");
    f.baseline =
        absl::StrCat("db_bench fillseq key 20 B, value ", per_event.value_size,
                     " B (one event), batch ", per_event.batch_size, ", ", streams, " threads");
    f.baseline_value = e->ops_per_second;
    f.note = absl::StrCat("db_bench ", Fmt(e->mb_per_second), " MB/s");
    r->figures.push_back(f);
    r->notes.push_back(absl::StrCat("db_bench (", streams, " streams, block): ", b->command,
                                    "\n    -> ", b->line));
    r->notes.push_back(absl::StrCat("db_bench (", streams, " streams, per event): ", e->command,
                                    "\n    -> ", e->line));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Data sets for storage and queries.

struct Job {
  std::string name;  // "8 ranks x 2000 steps"
  std::string id;
  std::string dir;
  sim::WorkloadOptions workload;
  LoadedJob loaded;
  uint32_t leak_rank = 5;
};

sim::WorkloadOptions Workload(int ranks, int64_t steps, int64_t events_per_rank) {
  sim::WorkloadOptions w;
  w.ranks = ranks;
  w.steps = steps;
  w.events_per_rank = static_cast<uint64_t>(events_per_rank);
  w.leak_rank = 5;
  w.leak_from_step = steps / 4;
  // A slow leak that stays below the device size over the whole run: 1.5 GiB per 100 steps.
  w.leak_bytes_per_step = steps >= 1000 ? 16ull << 20 : 64ull << 20;
  return w;
}

absl::StatusOr<Job> MakeJob(const Config& c, const std::string& id, int ranks, int64_t steps,
                            int64_t events_per_rank) {
  Job j;
  j.id = id;
  j.name =
      absl::StrCat(ranks, " ranks x ", steps, " steps, ", Fmt(events_per_rank), " events/rank");
  j.dir = absl::StrCat(c.work, "/", id);
  j.workload = Workload(ranks, steps, events_per_rank);
  std::filesystem::remove_all(j.dir);
  collector::EventStoreOptions o;
  o.dir = j.dir;
  absl::StatusOr<std::unique_ptr<collector::EventStore>> store = collector::EventStore::Open(o);
  if (!store.ok()) return store.status();
  Log(absl::StrCat("load: ", j.name));
  absl::StatusOr<LoadedJob> loaded = LoadSimulatedJob(**store, id, j.workload);
  if (!loaded.ok()) return loaded.status();
  j.loaded = *loaded;
  j.name = absl::StrCat(ranks, " ranks x ", steps, " steps, ", Fmt(j.loaded.events / ranks),
                        " events/rank");
  Log(absl::StrCat("load: ", j.loaded.events, " events in ", Fmt(j.loaded.seconds), " s (",
                   Fmt(j.loaded.events / j.loaded.seconds), " events/s, store only)"));
  return j;
}

// ---------------------------------------------------------------------------------------------
// Storage.

absl::Status StorageSection(const Config& c, const Job& job, const CsvExport& csv, Results* r) {
  Log("storage: compacting " + job.name);
  absl::StatusOr<StoreFootprint> lz4 = MeasureStore(job.dir);
  if (!lz4.ok()) return lz4.status();
  const std::string copy = job.dir + "-zstd";
  if (absl::Status s = CopyDirectory(job.dir, copy); !s.ok()) return s;
  FootprintOptions z;
  z.codec = Codec::kZstd;
  absl::StatusOr<StoreFootprint> zstd = MeasureStore(copy, z);
  std::filesystem::remove_all(copy);
  if (!zstd.ok()) return zstd.status();
  const double events = static_cast<double>(job.loaded.events);
  const double rank_steps = static_cast<double>(job.workload.ranks) * job.workload.steps;
  const FamilyFootprint blocks = lz4->Family("blocks"), rollups = lz4->Family("rollups");
  Figure f;
  f.section = "storage";
  f.name = absl::StrCat("event blocks on disk after compaction (LZ4, as shipped), ", job.name);
  f.value = blocks.sst_bytes / events;
  f.unit = "B/event";
  f.better = Better::kLower;
  f.baseline = "the same events as CSV (export below)";
  f.baseline_value = static_cast<double>(csv.bytes) / csv.rows;
  f.target = 8;
  f.note = absl::StrCat("blocks are LZ4-compressed by the store, one value each (", blocks.entries,
                        " blocks, ", blocks.files, " SST files); in-memory Event 72 B");
  r->figures.push_back(f);
  Figure all = f;
  all.name = "whole data directory after compaction (all column families)";
  all.value = lz4->sst_bytes / events;
  all.target.reset();
  std::vector<std::string> parts;
  for (const FamilyFootprint& fam : lz4->families) {
    parts.push_back(absl::StrCat(fam.name, " ", Fmt(fam.sst_bytes / kMiB), " MiB"));
  }
  all.note = absl::StrJoin(parts, ", ");
  r->figures.push_back(all);
  Figure z3 = f;
  z3.name = "what-if: RocksDB ZSTD level 3 on the blocks family, over the store's LZ4";
  z3.value = zstd->Family("blocks").sst_bytes / events;
  z3.baseline = "LZ4 blocks (row above)";
  z3.baseline_value = f.value;
  z3.note = "a collector option (e.g. bottommost-level compression for old data), not shipped";
  r->figures.push_back(z3);
  Figure roll;
  roll.section = "storage";
  roll.name = "rollups per rank-step (step and time-bucket rows together)";
  roll.value = rollups.sst_bytes / rank_steps;
  roll.unit = "B";
  roll.better = Better::kLower;
  roll.baseline = "the same rows uncompressed";
  roll.baseline_value = (rollups.raw_key_bytes + rollups.raw_value_bytes) / rank_steps;
  roll.note = absl::StrCat(
      rollups.entries, " rows for ", static_cast<int64_t>(rank_steps),
      " rank-steps; ZSTD: ", Fmt(zstd->Family("rollups").sst_bytes / rank_steps), " B");
  r->figures.push_back(roll);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Queries.

struct QueryRun {
  std::vector<QuestionTiming> memtrace;
  std::optional<SqlRun> sql;
  std::string sql_error;
};

// Every rank but the leaking one: `memtrace live` compares the rank with all others.
std::vector<uint32_t> OtherRanks(const Job& job) {
  std::vector<uint32_t> out;
  for (uint32_t r = 0; r < static_cast<uint32_t>(job.workload.ranks); ++r) {
    if (r != job.leak_rank) out.push_back(r);
  }
  return out;
}

// `sql_only`: the SQL questions to ask (empty: all of them); scaling points need only diverged.
absl::StatusOr<QueryRun> AskBoth(const Config& c, const Job& job, const CsvExport* csv,
                                 const std::string& duckdb_dir,
                                 const std::vector<std::string>& sql_only = {}) {
  QueryRun run;
  absl::StatusOr<int64_t> at =
      StepStartNs(job.dir, job.id, job.leak_rank, job.workload.steps * 3 / 4);
  if (!at.ok()) return at.status();
  QueryPlan plan;
  plan.data_dir = job.dir;
  plan.job_id = job.id;
  plan.live_rank = job.leak_rank;
  plan.live_at_ns = *at;
  plan.warm_repeats = c.warm_repeats;
  Log("query: memtrace on " + job.name);
  absl::StatusOr<std::vector<QuestionTiming>> t = TimeQuestions(plan);
  if (!t.ok()) return t.status();
  run.memtrace = *t;
  if (csv == nullptr) return run;
  SqlParams p;
  p.live_rank = plan.live_rank;
  p.live_at_ns = plan.live_at_ns;
  p.other_ranks = OtherRanks(job);
  auto only = [&](std::vector<SqlQuestion> qs) {
    if (sql_only.empty()) return qs;
    std::vector<SqlQuestion> out;
    for (SqlQuestion& q : qs) {
      if (std::find(sql_only.begin(), sql_only.end(), q.name) != sql_only.end()) {
        out.push_back(std::move(q));
      }
    }
    return out;
  };
  if (!duckdb_dir.empty()) {
    Log("query: DuckDB on " + job.name);
    absl::StatusOr<SqlRun> d = RunDuckDb(duckdb_dir, *csv, only(DuckDbQuestions(p)),
                                         c.quick ? 1 : 3, 2, absl::Minutes(10));
    if (d.ok()) {
      run.sql = *d;
      return run;
    }
    run.sql_error = std::string(d.status().message());
    Log("query: DuckDB failed: " + run.sql_error.substr(0, 500));
  }
  Log("query: sqlite3 on " + job.name);
  absl::StatusOr<SqlRun> s = RunSqlite(*csv, only(SqliteQuestions(p)), 1, absl::Minutes(10));
  if (s.ok()) {
    run.sql = *s;
  } else {
    run.sql_error += std::string(s.status().message());
  }
  return run;
}

const SqlTiming* SqlFor(const QueryRun& run, const std::string& name) {
  if (!run.sql) return nullptr;
  for (const SqlTiming& t : run.sql->questions) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

void QueryFigures(const Job& job, const CsvExport& csv, const QueryRun& run, Results* r) {
  for (const QuestionTiming& q : run.memtrace) {
    const std::string name = QuestionName(q.question);
    const SqlTiming* s = SqlFor(run, name);
    for (bool warm : {true, false}) {
      Figure f;
      f.section = "query";
      f.name = absl::StrCat(name, ", ", job.name, warm ? ", warm" : ", cold (fresh store open)");
      f.value = warm ? q.warm_ms : q.cold_ms;
      f.unit = "ms";
      f.better = Better::kLower;
      if (s != nullptr) {
        f.baseline = absl::StrCat(run.sql->engine, warm ? ", table in memory" : ", over the CSV");
        f.baseline_value = warm ? s->warm_ms : s->cold_ms;
        f.ratio_target = 1.0;
      } else {
        f.baseline = "no SQL baseline: " + run.sql_error.substr(0, 80);
      }
      if (q.question == Question::kDiverged) f.target = 100;
      f.note = warm
                   ? absl::StrCat(
                         "memtrace: ", q.answer, " (", Fmt(q.response_bytes / kMiB), " MiB report",
                         q.question == Question::kLive
                             ? ")"
                             : absl::StrCat("; in-process without the cache: load ", Fmt(q.load_ms),
                                            " ms, analysis ", Fmt(q.analysis_ms), " ms)"))
                   : absl::StrCat("store open ", Fmt(q.open_ms), " ms before it");
      r->figures.push_back(f);
    }
    if (s != nullptr) {
      r->notes.push_back(absl::StrCat(job.name, " ", name, ": memtrace: ", q.answer, " | ",
                                      run.sql->engine, ": ", s->answer.substr(0, 240)));
    }
  }
  if (run.sql) {
    r->notes.push_back(absl::StrCat(job.name, ": CSV export ", csv.rows, " rows, ",
                                    Fmt(csv.bytes / kMiB), " MiB in ", Fmt(csv.seconds), " s; ",
                                    run.sql->engine, " load ", Fmt(run.sql->load_ms), " ms"));
  }
}

// ---------------------------------------------------------------------------------------------
// Plot.

void WritePlot(const Results& r, const std::string& path) {
  Panel ingest;
  ingest.title = "Ingest: events/s acknowledged durable";
  ingest.x_label = "concurrent agent streams (ranks)";
  ingest.y_label = "events/s";
  ingest.log_y = false;
  Series mt{"memtrace collector (2 cores, in-process agents)", {}};
  for (const auto& [n, v] : r.ingest_by_streams) mt.points.emplace_back(n, v);
  Series db{"db_bench fillseq, same block writes", {}};
  for (const auto& [n, v] : r.db_bench_by_streams) db.points.emplace_back(n, v);
  ingest.series = {mt, db};
  Panel ranks;
  ranks.title = "Query (warm) vs ranks, 200 steps";
  ranks.x_label = "ranks";
  ranks.y_label = "ms";
  for (const auto& [name, points] : r.query_by_ranks) {
    Series s{name, {}};
    for (const auto& [n, v] : points) s.points.emplace_back(n, v);
    ranks.series.push_back(s);
  }
  Panel events;
  events.title = "Query (warm) vs events per rank, 8 ranks x 2000 steps";
  events.x_label = "events per rank";
  events.y_label = "ms";
  for (const auto& [name, points] : r.query_by_events) {
    Series s{name, {}};
    for (const auto& [n, v] : points) s.points.emplace_back(static_cast<double>(n), v);
    events.series.push_back(s);
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::ofstream out(path);
  out << RenderSvg(absl::StrCat("memtrace scaling, measured by bazel run -c opt //tools/bench:all "
                                "on ",
                                MachineDescription()),
                   {ingest, ranks, events});
  Log("wrote " + path);
}

void AddQueryPoints(const QueryRun& run, int ranks, int64_t events_per_rank, bool by_ranks,
                    Results* r) {
  for (const QuestionTiming& q : run.memtrace) {
    const std::string name = absl::StrCat("memtrace ", QuestionName(q.question));
    if (by_ranks) r->query_by_ranks[name][ranks] = q.warm_ms;
    if (!by_ranks) r->query_by_events[name][events_per_rank] = q.warm_ms;
  }
  if (const SqlTiming* s = SqlFor(run, "diverged")) {
    const std::string name =
        absl::StrCat(run.sql->engine.substr(0, run.sql->engine.find(' ')), " diverged");
    if (by_ranks) r->query_by_ranks[name][ranks] = s->warm_ms;
    if (!by_ranks) r->query_by_events[name][events_per_rank] = s->warm_ms;
  }
}

// ---------------------------------------------------------------------------------------------

// The run's sizes: --quick's or the full run's, each overridable by its flag.
absl::StatusOr<Config> ConfigFromFlags() {
  Config c;
  c.quick = absl::GetFlag(FLAGS_quick);
  c.work = absl::GetFlag(FLAGS_work_dir);
  auto pick = [&](int flag, int full, int quick) {
    return flag > 0 ? flag : (c.quick ? quick : full);
  };
  c.ingest_window = absl::Seconds(pick(absl::GetFlag(FLAGS_ingest_seconds), 30, 3));
  c.scaling_window = absl::Seconds(pick(absl::GetFlag(FLAGS_scaling_seconds), 10, 2));
  c.db_bench_seconds = pick(absl::GetFlag(FLAGS_db_bench_seconds), 15, 2);
  absl::StatusOr<collector::Durability> d =
      collector::ParseDurability(absl::GetFlag(FLAGS_durability));
  if (!d.ok()) return d.status();
  c.durability = *d;
  c.deep_events = absl::GetFlag(FLAGS_deep_events_per_rank) > 0
                      ? absl::GetFlag(FLAGS_deep_events_per_rank)
                      : (c.quick ? 100'000 : 1'000'000);
  c.wide_events = absl::GetFlag(FLAGS_wide_events_per_rank) > 0
                      ? absl::GetFlag(FLAGS_wide_events_per_rank)
                      : (c.quick ? 2'000 : 10'000);
  c.warm_repeats = c.quick ? 2 : 5;
  c.template_events = c.quick ? 50'000 : 200'000;
  return c;
}

// The DuckDB module's directory, installed if need be; empty when DuckDB is unavailable (the
// SQL baseline is then sqlite3).
std::string PrepareDuckDb() {
  std::string duckdb_dir = absl::GetFlag(FLAGS_duckdb_dir);
  if (duckdb_dir.empty()) {
    const char* home = getenv("HOME");
    duckdb_dir = absl::StrCat(home != nullptr ? home : "/tmp", "/.cache/memtrace-bench/duckdb");
  }
  absl::StatusOr<std::string> module = EnsureDuckDb(duckdb_dir, absl::Minutes(5));
  if (!module.ok()) {
    Log(absl::StrCat("DuckDB unavailable, falling back to sqlite3: ", module.status().message()));
    duckdb_dir.clear();
  }
  return duckdb_dir;
}

// Storage and the query questions over the deep job (8 ranks x 2000 steps) and the wide one
// (1024 ranks x 200 steps), each asked of memtrace and of the SQL baseline.
absl::Status StorageAndQuerySections(const Config& c, const std::string& duckdb_dir, Results* r) {
  absl::StatusOr<Job> deep = MakeJob(c, "deep", 8, 2000, c.deep_events);
  if (!deep.ok()) return deep.status();
  absl::StatusOr<CsvExport> deep_csv = ExportJobCsv(deep->dir, deep->id, c.work + "/csv");
  if (!deep_csv.ok()) return deep_csv.status();
  if (Enabled("storage")) {
    if (absl::Status s = StorageSection(c, *deep, *deep_csv, r); !s.ok()) return s;
  }
  if (Enabled("query") || Enabled("scaling")) {
    absl::StatusOr<QueryRun> q = AskBoth(c, *deep, &*deep_csv, duckdb_dir);
    if (!q.ok()) return q.status();
    if (Enabled("query")) QueryFigures(*deep, *deep_csv, *q, r);
    AddQueryPoints(*q, 8, deep->loaded.events / 8, false, r);
  }
  std::filesystem::remove_all(deep_csv->events_csv);

  if (Enabled("query") || Enabled("scaling")) {
    absl::StatusOr<Job> wide = MakeJob(c, "wide", 1024, 200, c.wide_events);
    if (!wide.ok()) return wide.status();
    absl::StatusOr<CsvExport> wide_csv = ExportJobCsv(wide->dir, wide->id, c.work + "/csv");
    if (!wide_csv.ok()) return wide_csv.status();
    // Quick runs ask DuckDB the two headline questions only: each takes seconds at this size.
    absl::StatusOr<QueryRun> q = AskBoth(
        c, *wide, &*wide_csv, duckdb_dir,
        c.quick ? std::vector<std::string>{"diverged", "live"} : std::vector<std::string>{});
    if (!q.ok()) return q.status();
    if (Enabled("query")) QueryFigures(*wide, *wide_csv, *q, r);
    AddQueryPoints(*q, 1024, c.wide_events, true, r);
    std::filesystem::remove_all(wide->dir);
    std::filesystem::remove_all(wide_csv->events_csv);
  }
  std::filesystem::remove_all(deep->dir);
  return absl::OkStatus();
}

// One diverged question of memtrace and the SQL baseline over a job of `ranks` x `steps`, as a
// point of the scaling plot.
absl::Status DivergedPoint(const Config& c, const std::string& name, int ranks, int steps,
                           int64_t events_per_rank, bool wide, const std::string& duckdb_dir,
                           Results* r) {
  absl::StatusOr<Job> j = MakeJob(c, name, ranks, steps, events_per_rank);
  if (!j.ok()) return j.status();
  absl::StatusOr<CsvExport> csv = ExportJobCsv(j->dir, j->id, c.work + "/csv");
  if (!csv.ok()) return csv.status();
  absl::StatusOr<QueryRun> q = AskBoth(c, *j, &*csv, duckdb_dir, {"diverged"});
  if (!q.ok()) return q.status();
  AddQueryPoints(*q, ranks, wide ? events_per_rank : j->loaded.events / ranks, wide, r);
  std::filesystem::remove_all(j->dir);
  std::filesystem::remove_all(csv->events_csv);
  return absl::OkStatus();
}

// How query and ingest cost grow with ranks and events per rank; the figures and the plot.
absl::Status ScalingSection(const Config& c, const std::vector<EventTemplate>& templates,
                            const std::string& duckdb_dir, Results* r) {
  for (int ranks : {8, 64, 512}) {
    if (absl::Status s = DivergedPoint(c, absl::StrCat("ranks", ranks), ranks, 200, c.wide_events,
                                       /*wide=*/true, duckdb_dir, r);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = DivergedPoint(c, "deep-small", 8, 2000, c.deep_events / 10,
                                     /*wide=*/false, duckdb_dir, r);
      !s.ok()) {
    return s;
  }

  for (int streams : {512, 1024}) {
    absl::StatusOr<IngestResult> in = Ingest(c, templates, streams, c.scaling_window);
    if (!in.ok()) return in.status();
    r->ingest_by_streams[streams] = in->events_per_second;
    std::filesystem::remove_all(absl::StrCat(c.work, "/ingest-", streams));
    Figure f;
    f.section = "scaling";
    f.name = absl::StrCat(streams, " Transport streams -> 1 collector, ",
                          absl::FormatDuration(c.scaling_window));
    f.value = in->events_per_second;
    f.unit = "events/s";
    if (r->ingest_by_streams.count(8)) {
      f.baseline = "8 streams (ingest above)";
      f.baseline_value = r->ingest_by_streams[8];
    }
    f.target = 1e6;
    f.note = absl::StrCat("lost ", in->events_lost, "; stored ", in->events_stored, "/",
                          in->events_recorded, "; queue ", 1 << 14, " events per agent");
    r->figures.push_back(f);
  }
  for (const auto& [name, points] : r->query_by_ranks) {
    if (name.rfind("memtrace diverged", 0) != 0) continue;
    for (const auto& [ranks, ms] : points) {
      Figure f;
      f.section = "scaling";
      f.name = absl::StrCat("diverged (warm), ", ranks, " ranks x 200 steps");
      f.value = ms;
      f.unit = "ms";
      f.better = Better::kLower;
      for (const auto& [other, op] : r->query_by_ranks) {
        if (other.rfind("memtrace", 0) == 0) continue;
        auto it = op.find(ranks);
        if (it == op.end()) continue;
        f.baseline = other;
        f.baseline_value = it->second;
      }
      r->figures.push_back(f);
    }
  }
  std::string svg = absl::GetFlag(FLAGS_svg);
  if (svg.empty()) {
    const char* ws = getenv("BUILD_WORKSPACE_DIRECTORY");
    svg = (ws != nullptr && !c.quick) ? absl::StrCat(ws, "/docs/scaling.svg")
                                      : c.work + "/scaling.svg";
  }
  WritePlot(*r, svg);
  return absl::OkStatus();
}

// The table on stdout, and as markdown with the notes (--markdown, else in the work directory).
void Report(const Config& c, const Results& r) {
  const std::string text = RenderText(r.figures);
  std::printf("\nmemtrace benchmarks (%s run, %s)\n\n%s\n", c.quick ? "quick" : "full",
              MachineDescription().c_str(), text.c_str());
  for (const std::string& n : r.notes) std::printf("  %s\n", n.c_str());
  std::string md = absl::GetFlag(FLAGS_markdown);
  if (md.empty()) md = c.work + "/table.md";
  std::ofstream(md) << RenderMarkdown(r.figures) << "\n" << absl::StrJoin(r.notes, "\n") << "\n";
  std::printf("\ntotal %.0f s; markdown table: %s\n",
              absl::ToDoubleSeconds(absl::Now() - StartTime()), md.c_str());
}

absl::Status Run() {
  absl::StatusOr<Config> config = ConfigFromFlags();
  if (!config.ok()) return config.status();
  const Config& c = *config;
  std::error_code ec;
  std::filesystem::remove_all(c.work, ec);
  std::filesystem::create_directories(c.work, ec);
  if (ec) return absl::FailedPreconditionError("cannot create " + c.work + ": " + ec.message());

  Results r;
  r.notes.push_back("machine: " + MachineDescription());
  if (Enabled("agent")) {
    if (absl::Status s = AgentSection(c, &r); !s.ok()) return s;
  }
  std::vector<EventTemplate> templates;
  if (Enabled("ingest") || Enabled("scaling")) {
    Log("ingest: playing 4 simulated FSDP ranks as templates");
    absl::StatusOr<std::vector<EventTemplate>> t = IngestTemplates(c);
    if (!t.ok()) return t.status();
    templates = std::move(*t);
  }
  if (Enabled("ingest")) {
    if (absl::Status s = IngestSection(c, templates, &r); !s.ok()) return s;
  }
  std::string duckdb_dir;
  if (Enabled("query") || Enabled("scaling")) duckdb_dir = PrepareDuckDb();
  if (Enabled("storage") || Enabled("query") || Enabled("scaling")) {
    if (absl::Status s = StorageAndQuerySections(c, duckdb_dir, &r); !s.ok()) return s;
  }
  if (Enabled("scaling")) {
    if (absl::Status s = ScalingSection(c, templates, duckdb_dir, &r); !s.ok()) return s;
  }
  Report(c, r);
  return absl::OkStatus();
}

}  // namespace
}  // namespace memtrace::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "memtrace benchmarks: bazel run -c opt //tools/bench:all [-- --quick]");
  // --help lists the flags of files whose name contains the program's ("all"), which this one's
  // does not: name it.
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "tools/bench/bench_main");
  };
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  memtrace::bench::StartTime();
  const std::string child = absl::GetFlag(FLAGS_agent_memory_child);
  if (!child.empty()) {
    absl::StatusOr<memtrace::bench::AgentMemoryResult> r = memtrace::bench::MeasureAgentMemory(
        child, memtrace::TransportOptions(), absl::Seconds(3), absl::Seconds(60));
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return 1;
    }
    std::printf("%s\n", memtrace::bench::FormatResult(*r).c_str());
    return 0;
  }
  absl::Status s = memtrace::bench::Run();
  if (!s.ok()) {
    std::fprintf(stderr, "bench failed: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
