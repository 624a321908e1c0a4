// Ingest throughput of the collector: events/s through EventStore::Append alone (--mode=store)
// or through gRPC streams into an in-process CollectorServer (--mode=grpc), with a mix shaped
// like a training job (alloc/free pairs over a bounded live set, a STEP every --step_every
// events, device samples). Prints one line per run; not a test.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "collector/server/collector_server.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "proto/codec/batch_codec.h"
#include "proto/codec/batch_wire.h"
#include "proto/memtrace/v1/ingest.grpc.pb.h"

ABSL_FLAG(std::string, mode, "grpc", "store | grpc");
ABSL_FLAG(std::string, data, "/tmp/memtrace-ingest-bench", "store directory (emptied first)");
ABSL_FLAG(std::string, durability, "sync", "sync | async");
ABSL_FLAG(int64_t, events, 4'000'000, "events per stream");
ABSL_FLAG(int64_t, streams, 1, "concurrent streams (ranks)");
ABSL_FLAG(int64_t, batch, 4096, "events per batch");
ABSL_FLAG(int64_t, live, 20000, "live-set size the mix hovers around");
ABSL_FLAG(int64_t, step_every, 20000, "events per training step");
ABSL_FLAG(bool, recover, false,
          "store mode: leave the streams open (as a crash does), reopen the store and time the "
          "rebuild of every stream's state (checkpoint + replay)");

namespace memtrace::collector {
namespace {

std::vector<Event> MakeMix(int64_t n, int64_t live_target, int64_t step_every, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> live;
  std::vector<Event> out;
  out.reserve(n);
  uint64_t next_address = 0x7f0000000000ull;
  int64_t ts = 1'700'000'000'000'000'000;
  int64_t step = 0;
  for (int64_t i = 0; i < n; ++i) {
    Event e;
    e.seq = static_cast<uint64_t>(i) + 1;
    ts += 200 + static_cast<int64_t>(rng() % 800);
    e.ts_ns = ts;
    if (i % step_every == 0) {
      e.kind = EventKind::kStep;
      e.aux = static_cast<uint64_t>(++step);
    } else if (i % 997 == 0) {
      e.kind = EventKind::kDeviceSample;
      e.bytes = 40ull << 30;
      e.aux = 80ull << 30;
    } else if (live.size() < static_cast<size_t>(live_target / 2) ||
               (live.size() < static_cast<size_t>(live_target * 2) && rng() % 2 == 0)) {
      e.kind = EventKind::kAlloc;
      e.address = next_address;
      next_address += 512 * (1 + rng() % 64);
      e.bytes = 512 * (1 + rng() % 4096);
      e.tag_id = 1 + static_cast<uint32_t>(rng() % 200);
      e.source_id = 1 + static_cast<uint32_t>(rng() % 4);
      e.memory_kind = kMemoryDevice;
      live.push_back(e.address);
    } else {
      e.kind = EventKind::kFree;
      const size_t k = rng() % live.size();
      e.address = live[k];
      live[k] = live.back();
      live.pop_back();
    }
    out.push_back(e);
  }
  return out;
}

std::vector<v1::EventBatch> Encode(const std::vector<Event>& events, int64_t batch) {
  std::vector<v1::EventBatch> out;
  std::vector<StringDef> strings;
  for (uint32_t id = 1; id <= 204; ++id) {
    strings.push_back(
        {id, id <= 200 ? StringKind::kTag : StringKind::kSource, absl::StrCat("name-", id)});
  }
  for (size_t i = 0; i < events.size(); i += batch) {
    const size_t n = std::min<size_t>(batch, events.size() - i);
    out.emplace_back();
    EncodeBatch(absl::MakeConstSpan(events).subspan(i, n),
                i == 0 ? absl::MakeConstSpan(strings) : absl::Span<const StringDef>(),
                AgentCounterValues(), &out.back());
  }
  return out;
}

// Each stream's batches, as the agent sends them and as their bytes arrive off the network.
struct StreamBatches {
  std::vector<v1::EventBatch> batches;
  std::vector<std::string> serialized;
};

std::vector<StreamBatches> PrepareStreams(int64_t streams, uint64_t* wire_bytes) {
  std::vector<StreamBatches> out(static_cast<size_t>(streams));
  for (int64_t s = 0; s < streams; ++s) {
    StreamBatches& sb = out[static_cast<size_t>(s)];
    sb.batches = Encode(MakeMix(absl::GetFlag(FLAGS_events), absl::GetFlag(FLAGS_live),
                                absl::GetFlag(FLAGS_step_every), 17 + static_cast<uint32_t>(s)),
                        absl::GetFlag(FLAGS_batch));
    for (const v1::EventBatch& b : sb.batches) {
      *wire_bytes += b.ByteSizeLong();
      sb.serialized.push_back(b.SerializeAsString());
    }
  }
  return out;
}

v1::RankIdentity StreamIdentity(int64_t rank) {
  v1::RankIdentity id;
  id.set_job_id("bench");
  id.set_rank(static_cast<int32_t>(rank));
  return id;
}

// --mode=store: each batch's bytes decoded and appended as the Ingest service does (minus gRPC).
absl::Status AppendToStore(EventStore& store, int64_t rank, const StreamBatches& sb,
                           std::atomic<uint64_t>* acked) {
  absl::StatusOr<OpenedStream> opened = store.OpenStream(StreamIdentity(rank));
  if (!opened.ok()) return opened.status();
  DecodedBatch d;
  for (const std::string& bytes : sb.serialized) {
    if (absl::Status st = DecodeBatchWire(bytes, BatchLimits(), &d); !st.ok()) return st;
    absl::StatusOr<AppendResult> r = store.Append(opened->key, d, bytes);
    if (!r.ok()) return r.status();
    *acked += r->stored;
  }
  if (!absl::GetFlag(FLAGS_recover)) return store.CloseStream(opened->key, true);
  return absl::OkStatus();
}

// --mode=grpc: one Ingest stream, acks read on another thread so that batches stay in flight,
// as the agent does.
absl::Status StreamOverGrpc(const std::string& address, int64_t rank, const StreamBatches& sb,
                            std::atomic<uint64_t>* acked) {
  auto stub = v1::Ingest::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  auto stream = stub->Stream(&ctx);
  v1::IngestRequest hello;
  *hello.mutable_hello()->mutable_identity() = StreamIdentity(rank);
  v1::IngestAck ack;
  stream->Write(hello);
  stream->Read(&ack);
  std::thread reader([&] {
    v1::IngestAck a;
    uint64_t last = 0;
    while (stream->Read(&a)) last = a.durable_seq();
    *acked += last;
  });
  v1::IngestRequest req;
  for (const v1::EventBatch& b : sb.batches) {
    *req.mutable_batch() = b;
    if (!stream->Write(req)) break;
  }
  stream->WritesDone();
  reader.join();
  grpc::Status st = stream->Finish();
  if (!st.ok()) return absl::InternalError(st.error_message());
  return absl::OkStatus();
}

// --recover: reopens the store and times the rebuild of every stream's state.
absl::Status TimeRecovery(const EventStoreOptions& options, int64_t streams) {
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<EventStore>> store = EventStore::Open(options);
  if (!store.ok()) return store.status();
  for (int64_t s = 0; s < streams; ++s) {
    absl::StatusOr<OpenedStream> opened = (*store)->OpenStream(StreamIdentity(s));
    if (!opened.ok()) return opened.status();
    if (opened->durable_seq != uint64_t(absl::GetFlag(FLAGS_events))) {
      return absl::DataLossError(absl::StrCat("stream ", s, " recovered up to ",
                                              opened->durable_seq, ", not all of its events"));
    }
  }
  std::printf("recovery: open + rebuild of %ld streams took %.3fs\n", long(streams),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return absl::OkStatus();
}

uint64_t BytesUnder(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const uint64_t size = it->file_size(size_ec);
      if (!size_ec) total += size;
    }
  }
  return total;
}

absl::Status Run() {
  const std::string dir = absl::GetFlag(FLAGS_data);
  if (dir.empty()) return absl::InvalidArgumentError("--data: a directory is required");
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode != "store" && mode != "grpc") {
    return absl::InvalidArgumentError(absl::StrCat("--mode: '", mode, "' is not store or grpc"));
  }
  for (auto [name, value] :
       {std::pair<const char*, int64_t>{"streams", absl::GetFlag(FLAGS_streams)},
        {"events", absl::GetFlag(FLAGS_events)},
        {"batch", absl::GetFlag(FLAGS_batch)},
        {"live", absl::GetFlag(FLAGS_live)},
        {"step_every", absl::GetFlag(FLAGS_step_every)}}) {
    if (value < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", value, " is not >= 1"));
    }
  }
  absl::StatusOr<Durability> durability = ParseDurability(absl::GetFlag(FLAGS_durability));
  if (!durability.ok()) return durability.status();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot empty ", dir, ": ", ec.message()));
  const int64_t streams = absl::GetFlag(FLAGS_streams);
  uint64_t wire_bytes = 0;
  const std::vector<StreamBatches> prepared = PrepareStreams(streams, &wire_bytes);
  const uint64_t total = static_cast<uint64_t>(streams * absl::GetFlag(FLAGS_events));

  CollectorServerOptions options;
  options.listen = "127.0.0.1:0";
  options.store.dir = dir;
  options.store.durability = *durability;
  absl::StatusOr<std::unique_ptr<CollectorServer>> server = CollectorServer::Start(options);
  if (!server.ok()) return server.status();
  std::atomic<uint64_t> acked{0};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int64_t s = 0; s < streams; ++s) {
    threads.emplace_back([&, s] {
      const StreamBatches& sb = prepared[static_cast<size_t>(s)];
      absl::Status st = mode == "store" ? AppendToStore((*server)->store(), s, sb, &acked)
                                        : StreamOverGrpc((*server)->address(), s, sb, &acked);
      if (!st.ok()) std::fprintf(stderr, "stream %ld: %s\n", long(s), st.ToString().c_str());
    });
  }
  for (std::thread& t : threads) t.join();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  absl::StatusOr<std::vector<v1::RankSummary>> ranks = (*server)->store().ListRanks("bench");
  if (!ranks.ok()) return ranks.status();
  uint64_t stored = 0;
  for (const v1::RankSummary& r : *ranks) stored += r.events_stored();
  server->reset();
  if (absl::GetFlag(FLAGS_recover)) {
    if (absl::Status st = TimeRecovery(options.store, streams); !st.ok()) return st;
  }
  const uint64_t disk = BytesUnder(dir);
  std::printf(
      "mode=%s durability=%s streams=%ld batch=%ld events=%lu acked=%lu stored=%lu "
      "time=%.2fs rate=%.0f events/s wire=%.1f B/event disk=%.1f B/event\n",
      mode.c_str(), absl::GetFlag(FLAGS_durability).c_str(), long(streams),
      long(absl::GetFlag(FLAGS_batch)), (unsigned long)total, (unsigned long)acked.load(),
      (unsigned long)stored, secs, total / secs, double(wire_bytes) / total, double(disk) / total);
  if (stored != total) {
    return absl::DataLossError(absl::StrCat("stored ", stored, " of ", total, " events"));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace memtrace::collector

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Ingest throughput of the collector, through EventStore::Append (--mode=store) or gRPC "
      "streams (--mode=grpc); a benchmark, not a test.\nUsage: ingest_bench [--mode M --streams N "
      "...]");
  absl::ParseCommandLine(argc, argv);
  const absl::Status s = memtrace::collector::Run();
  if (s.ok()) return 0;
  std::fprintf(stderr, "ingest_bench: %s\n", s.ToString().c_str());
  return 1;
}
