#include "tools/bench/ingest_run.h"

#include <pthread.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/stream/transport.h"
#include "collector/server/collector_server.h"
#include "tools/bench/proc_stats.h"

namespace memtrace::bench {
namespace {

constexpr size_t kChunk = 1024;

struct Stream {
  std::unique_ptr<Transport> transport;
  std::unique_ptr<LapReplayer> replayer;
  uint64_t recorded = 0;
};

// The role of a thread, from its name (see IngestResult::cpu_seconds_by_role).
std::string RoleOfThread(const std::string& name) {
  if (name == "bench-producer") return "producers";
  if (name == "memtrace-send") return "agent senders";
  if (absl::StartsWith(name, "grpcpp_sync_ser")) return "collector handlers";
  if (absl::StartsWith(name, "rocksdb:")) return "rocksdb background";
  if (absl::StartsWith(name, "grpc") || name == "default-executo" || name == "nexting_thread" ||
      absl::StartsWith(name, "resolver-execut") || absl::StartsWith(name, "event_engine")) {
    return "gRPC internals";
  }
  return "other";
}

uint64_t SumDurable(const std::vector<Stream>& streams) {
  uint64_t total = 0;
  for (const Stream& s : streams) total += s.transport->stats().durable_seq;
  return total;
}

}  // namespace

absl::StatusOr<IngestResult> RunIngest(const IngestOptions& options,
                                       absl::Span<const EventTemplate> templates) {
  if (templates.empty() || options.streams < 1 || options.producers < 1) {
    return absl::InvalidArgumentError("RunIngest needs a template, >= 1 stream and >= 1 producer");
  }
  std::error_code ec;
  std::filesystem::remove_all(options.data_dir, ec);
  collector::CollectorServerOptions server_options;
  server_options.listen = "127.0.0.1:0";
  server_options.store.dir = options.data_dir;
  server_options.store.durability = options.durability;
  absl::StatusOr<std::unique_ptr<collector::CollectorServer>> server =
      collector::CollectorServer::Start(server_options);
  if (!server.ok()) return server.status();

  std::vector<Stream> streams(options.streams);
  for (int s = 0; s < options.streams; ++s) {
    TransportOptions t;
    t.collector_address = (*server)->address();
    t.identity.set_job_id(options.job_id);
    t.identity.set_rank(s);
    t.identity.set_world_size(options.streams);
    t.identity.set_local_rank(s % 8);
    t.identity.set_host(absl::StrCat("bench-node-", s / 8));
    t.identity.set_launcher("bench");
    t.queue_capacity = options.queue_capacity;
    t.max_batch_events = options.batch_events;
    absl::StatusOr<std::unique_ptr<Transport>> transport = Transport::Start(t);
    if (!transport.ok()) return transport.status();
    const EventTemplate& tmpl = templates[s % templates.size()];
    for (const StringDef& d : tmpl.strings) {
      const uint32_t id = (*transport)->Intern(d.kind, d.value);
      if (id != d.id) {
        return absl::InternalError(absl::StrCat("stream ", s, " interned \"", d.value, "\" as ",
                                                id, ", the template has ", d.id));
      }
    }
    streams[s].transport = std::move(*transport);
    streams[s].replayer = std::make_unique<LapReplayer>(&tmpl);
  }

  std::atomic<bool> stop{false};
  std::vector<std::thread> producers;
  for (int p = 0; p < options.producers; ++p) {
    producers.emplace_back([&, p] {
      pthread_setname_np(pthread_self(), "bench-producer");
      std::vector<Event> chunk(kChunk);
      while (!stop.load(std::memory_order_relaxed)) {
        bool progress = false;
        for (size_t s = p; s < streams.size(); s += options.producers) {
          Stream& st = streams[s];
          const uint64_t durable = st.transport->stats().durable_seq;
          if (st.recorded - durable >= options.window_events) continue;
          st.replayer->Fill(absl::MakeSpan(chunk));
          // As the agent's CUPTI translator hands over a buffer's events (RecordMany).
          st.transport->RecordMany(chunk);
          st.recorded += chunk.size();
          progress = true;
        }
        if (!progress) absl::SleepFor(absl::Microseconds(200));
      }
    });
  }

  absl::SleepFor(options.warmup);
  const uint64_t a0 = SumDurable(streams);
  const double cpu0 = ProcessCpuSeconds();
  const std::map<std::string, double> by_thread0 = CpuSecondsByThreadName();
  const absl::Time t0 = absl::Now();
  absl::SleepFor(options.measure);
  const uint64_t a1 = SumDurable(streams);
  const double cpu1 = ProcessCpuSeconds();
  const std::map<std::string, double> by_thread1 = CpuSecondsByThreadName();
  const absl::Time t1 = absl::Now();
  stop = true;
  for (std::thread& t : producers) t.join();

  IngestResult result;
  result.streams = options.streams;
  result.events_in_window = a1 - a0;
  result.window_seconds = absl::ToDoubleSeconds(t1 - t0);
  result.events_per_second = result.events_in_window / result.window_seconds;
  result.cpu_seconds = cpu1 - cpu0;
  for (const auto& [name, seconds] : by_thread1) {
    auto before = by_thread0.find(name);
    const double used = seconds - (before != by_thread0.end() ? before->second : 0.0);
    result.cpu_seconds_by_role[RoleOfThread(name)] += used;
  }
  const absl::Time drain_start = absl::Now();
  absl::Status drained = absl::OkStatus();
  for (Stream& s : streams) {
    const absl::Duration left = options.drain_timeout - (absl::Now() - drain_start);
    if (absl::Status f = s.transport->Flush(left); !f.ok() && drained.ok()) drained = f;
  }
  result.drain_seconds = absl::ToDoubleSeconds(absl::Now() - drain_start);
  for (Stream& s : streams) {
    (void)s.transport->Shutdown(absl::Seconds(10));
    const TransportStats st = s.transport->stats();
    result.events_recorded += st.events_recorded;
    result.events_lost += st.events_lost;
    result.batches_sent += st.batches_sent;
  }
  streams.clear();
  absl::StatusOr<std::vector<v1::RankSummary>> ranks = (*server)->store().ListRanks(options.job_id);
  if (ranks.ok()) {
    for (const v1::RankSummary& r : *ranks) result.events_stored += r.events_stored();
  }
  (*server)->Shutdown();
  server->reset();
  result.disk_bytes = DirectoryBytes(options.data_dir);
  if (!drained.ok()) {
    return absl::DeadlineExceededError(absl::StrCat(
        options.streams, " streams did not drain within ",
        absl::FormatDuration(options.drain_timeout), ": ", drained.message()));
  }
  return result;
}

}  // namespace memtrace::bench
