#include "collector/server/server_test_util.h"

#include <cstdlib>
#include <filesystem>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "proto/codec/batch_codec.h"
#include "tests/util/test_dirs.h"

namespace memtrace::collector::testing {

std::string ClearedStoreDir(const std::string& name) {
  return test_util::ClearedPath("collector/" + name);
}

std::unique_ptr<CollectorServer> StartCollector(const std::string& name, int max_message_bytes) {
  CollectorServerOptions options;
  options.listen = "127.0.0.1:0";
  options.store.dir = ClearedStoreDir(name);
  options.store.durability = Durability::kSync;
  options.max_message_bytes = max_message_bytes;
  absl::StatusOr<std::unique_ptr<CollectorServer>> server = CollectorServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

std::shared_ptr<grpc::Channel> Connect(const CollectorServer& server) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  return grpc::CreateCustomChannel(server.address(), grpc::InsecureChannelCredentials(), args);
}

v1::RankIdentity Identity(const std::string& job, int32_t rank, uint32_t attempt) {
  v1::RankIdentity id;
  id.set_job_id(job);
  id.set_rank(rank);
  id.set_attempt(attempt);
  id.set_world_size(4);
  id.set_host("node-0");
  id.set_pid(1000 + static_cast<uint32_t>(rank < 0 ? 99 : rank));
  id.set_device_index(rank < 0 ? 0 : rank);
  id.set_launcher("test");
  return id;
}

v1::IngestRequest HelloRequest(const v1::RankIdentity& identity) {
  v1::IngestRequest r;
  *r.mutable_hello()->mutable_identity() = identity;
  return r;
}

std::vector<Event> Events(uint64_t first_seq, uint64_t count) {
  std::vector<Event> out;
  for (uint64_t seq = first_seq; seq < first_seq + count; ++seq) {
    Event e;
    e.seq = seq;
    e.ts_ns = kBaseTs + static_cast<int64_t>(seq) * 1'000'000;
    if (seq % 10 == 0) {
      e.kind = EventKind::kStep;
      e.aux = seq / 10;
    } else if (seq % 10 == 5 && seq > 10) {
      e.kind = EventKind::kFree;
      e.address = 0x1000 * (seq - 4);
    } else {
      e.kind = EventKind::kAlloc;
      e.address = 0x1000 * seq;
      e.bytes = 1000;
      e.tag_id = 1;
      e.memory_kind = kMemoryDevice;
    }
    out.push_back(e);
  }
  return out;
}

v1::IngestRequest BatchRequest(uint64_t first_seq, uint64_t count) {
  v1::IngestRequest r;
  const std::vector<StringDef> strings = {{1, StringKind::kTag, "model.layers"}};
  AgentCounterValues counters;
  counters.events_recorded = first_seq + count - 1;
  EncodeBatch(Events(first_seq, count), strings, counters, r.mutable_batch());
  return r;
}

}  // namespace memtrace::collector::testing
