#include "tools/bench/agent_memory.h"

#include <atomic>
#include <algorithm>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "agent/stream/transport.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/server_context.h"
#include "grpcpp/security/server_credentials.h"
#include "proto/memtrace/v1/ingest.grpc.pb.h"
#include "tools/bench/proc_stats.h"

namespace memtrace::bench {
namespace {

class SilentIngest final : public v1::Ingest::Service {
 public:
  grpc::Status Stream(grpc::ServerContext*,
                      grpc::ServerReaderWriter<v1::IngestAck, v1::IngestRequest>* stream) override {
    v1::IngestRequest req;
    if (!stream->Read(&req)) return grpc::Status::OK;
    v1::IngestAck ack;
    ack.set_durable_seq(0);
    stream->Write(ack);
    while (stream->Read(&req)) batches_.fetch_add(1, std::memory_order_relaxed);
    return grpc::Status::OK;
  }
  uint64_t batches() const { return batches_.load(); }

 private:
  std::atomic<uint64_t> batches_{0};
};

}  // namespace

struct SilentCollector::Impl {
  SilentIngest service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

SilentCollector::SilentCollector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SilentCollector::~SilentCollector() {
  if (impl_->server) impl_->server->Shutdown(std::chrono::system_clock::now());
}

absl::StatusOr<std::unique_ptr<SilentCollector>> SilentCollector::Start() {
  auto impl = std::make_unique<Impl>();
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &impl->port);
  builder.RegisterService(&impl->service);
  builder.SetMaxReceiveMessageSize(64 << 20);
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->port == 0) {
    return absl::UnavailableError("cannot start the silent collector on 127.0.0.1:0");
  }
  return std::unique_ptr<SilentCollector>(new SilentCollector(std::move(impl)));
}

std::string SilentCollector::address() const { return absl::StrCat("127.0.0.1:", impl_->port); }
uint64_t SilentCollector::batches_received() const { return impl_->service.batches(); }

absl::StatusOr<AgentMemoryResult> MeasureAgentMemory(const std::string& collector_address,
                                                     TransportOptions options,
                                                     absl::Duration at_least,
                                                     absl::Duration limit) {
  options.collector_address = collector_address;
  if (options.identity.job_id().empty()) options.identity.set_job_id("agent-memory");
  options.log_failures = false;
  // The collector never acks: keep the stream instead of abandoning it after ack_timeout.
  options.ack_timeout = absl::Hours(1);
  AgentMemoryResult r;
  r.queue_capacity = options.queue_capacity;
  r.event_bytes = sizeof(Event);
  r.max_unacked_bytes = options.max_unacked_bytes;
  // Events shaped like CUPTI's (distinct addresses and sizes), made before the baseline reading.
  std::vector<Event> pattern(4096);
  for (size_t i = 0; i < pattern.size(); ++i) {
    Event& e = pattern[i];
    e.kind = i % 2 == 0 ? EventKind::kAlloc : EventKind::kFree;
    e.address = 0x7f0000000000ull + (i / 2) * (2 << 20);
    e.bytes = (1 + i % 37) << 20;
    e.tag_id = static_cast<uint32_t>(1 + i % 50);
    e.memory_kind = kMemoryDevice;
  }
  r.rss_before = ResidentBytes();
  r.anon_before = AnonResidentBytes();
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<Transport>> t = Transport::Start(options);
  if (!t.ok()) return t.status();
  r.rss_started = ResidentBytes();
  int64_t ts = 1'700'000'000'000'000'000;
  while (absl::Now() - start < limit) {
    for (int round = 0; round < 64; ++round) {
      for (Event e : pattern) {
        e.ts_ns = ts += 500;
        (*t)->Record(e);
      }
    }
    r.anon_peak = std::max(r.anon_peak, AnonResidentBytes());
    const TransportStats s = (*t)->stats();
    if (s.events_lost_spool_full > 0 && absl::Now() - start >= at_least) break;
  }
  r.anon_peak = std::max(r.anon_peak, AnonResidentBytes());
  const TransportStats s = (*t)->stats();
  r.rss_peak = PeakResidentBytes();
  r.unacked_bytes = s.unacked_bytes;
  r.lost_queue_full = s.events_lost_queue_full;
  r.lost_spool_full = s.events_lost_spool_full;
  r.events_recorded = s.events_recorded;
  r.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  (void)(*t)->Shutdown(absl::Milliseconds(100));
  return r;
}

std::string FormatResult(const AgentMemoryResult& r) {
  return absl::StrCat("AGENT_MEMORY queue_capacity=", r.queue_capacity,
                      " event_bytes=", r.event_bytes, " max_unacked_bytes=", r.max_unacked_bytes,
                      " rss_before=", r.rss_before, " rss_started=", r.rss_started,
                      " rss_peak=", r.rss_peak, " anon_before=", r.anon_before,
                      " anon_peak=", r.anon_peak, " unacked_bytes=", r.unacked_bytes,
                      " lost_queue_full=", r.lost_queue_full,
                      " lost_spool_full=", r.lost_spool_full,
                      " events_recorded=", r.events_recorded, " seconds=", r.seconds);
}

absl::StatusOr<AgentMemoryResult> ParseResult(absl::string_view output) {
  const size_t at = output.find("AGENT_MEMORY ");
  if (at == absl::string_view::npos) {
    return absl::NotFoundError("no AGENT_MEMORY line in the child's output");
  }
  absl::string_view line = output.substr(at + 13);
  line = line.substr(0, line.find('\n'));
  std::map<std::string, std::string> kv;
  for (absl::string_view part : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    std::pair<std::string, std::string> p = absl::StrSplit(part, absl::MaxSplits('=', 1));
    kv[p.first] = p.second;
  }
  AgentMemoryResult r;
  bool ok = true;
  auto u = [&](const char* k, uint64_t* v) { ok = ok && absl::SimpleAtoi(kv[k], v); };
  u("queue_capacity", &r.queue_capacity);
  u("event_bytes", &r.event_bytes);
  u("max_unacked_bytes", &r.max_unacked_bytes);
  u("rss_before", &r.rss_before);
  u("rss_started", &r.rss_started);
  u("rss_peak", &r.rss_peak);
  u("anon_before", &r.anon_before);
  u("anon_peak", &r.anon_peak);
  u("unacked_bytes", &r.unacked_bytes);
  u("lost_queue_full", &r.lost_queue_full);
  u("lost_spool_full", &r.lost_spool_full);
  u("events_recorded", &r.events_recorded);
  ok = ok && absl::SimpleAtod(kv["seconds"], &r.seconds);
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad AGENT_MEMORY line: ", line));
  return r;
}

}  // namespace memtrace::bench
