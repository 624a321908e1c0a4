#include "collector/server/collector_server.h"

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "collector/server/server_test_util.h"
#include "collector/server/simulated_job_store.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"

namespace memtrace::collector {
namespace {

using testing::Connect;
using testing::StartCollector;

std::string ToString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

grpc::ByteBuffer FromString(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

void* Tag(intptr_t i) { return reinterpret_cast<void*>(i); }

// Waits for the next completion; false when it failed or timed out.
bool Next(grpc::CompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  const auto status =
      cq->AsyncNext(&tag, &ok, std::chrono::system_clock::now() + std::chrono::seconds(10));
  return status == grpc::CompletionQueue::GOT_EVENT && ok;
}

TEST(CollectorServerTest, PortZeroBindsAFreePort) {
  auto a = StartCollector("port-a");
  auto b = StartCollector("port-b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_GT(a->port(), 0);
  EXPECT_NE(a->port(), b->port());
  EXPECT_EQ(a->address(), "127.0.0.1:" + std::to_string(a->port()));
}

TEST(CollectorServerTest, PortInUseIsAnError) {
  auto a = StartCollector("in-use-a");
  ASSERT_NE(a, nullptr);
  CollectorServerOptions options;
  options.listen = a->address();
  options.store.dir = testing::ClearedStoreDir("in-use-b");
  absl::StatusOr<std::unique_ptr<CollectorServer>> b = CollectorServer::Start(options);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find(a->address()), absl::string_view::npos) << b.status();
  // Refused before the store was opened: no directory left behind.
  EXPECT_FALSE(std::filesystem::exists(options.store.dir)) << options.store.dir;
}

TEST(CollectorServerTest, BadOptionsAreRejectedWithTheValue) {
  CollectorServerOptions options;
  options.store.dir = testing::ClearedStoreDir("bad");
  for (const char* listen : {"nonsense", "127.0.0.1:99999", "::1:5", ":80"}) {
    options.listen = listen;
    absl::StatusOr<std::unique_ptr<CollectorServer>> s = CollectorServer::Start(options);
    ASSERT_FALSE(s.ok()) << listen;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
    EXPECT_NE(s.status().message().find(listen), absl::string_view::npos) << s.status();
  }
  options.listen = "127.0.0.1:0";
  options.store.dir = "";
  EXPECT_FALSE(CollectorServer::Start(options).ok());
}

// grpc.health.v1.Health/Check of `service` ("" = the server): the HealthCheckResponse's bytes,
// "\x08\x01" for SERVING, "\x08\x02" for NOT_SERVING; "error: ..." when the call failed.
std::string HealthCheck(const CollectorServer& server, const std::string& service) {
  grpc::GenericStub stub(Connect(server));
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  // grpc.health.v1.HealthCheckRequest{service}: field 1, length-delimited.
  std::string request;
  if (!service.empty()) request = std::string("\x0a", 1) + char(service.size()) + service;
  auto call = stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", FromString(request), &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, Tag(1));
  if (!Next(&cq)) return "error: no answer";
  if (!status.ok()) return "error: " + status.error_message();
  return ToString(response);
}

const std::string kServing("\x08\x01", 2);
const std::string kNotServing("\x08\x02", 2);

TEST(CollectorServerTest, HealthServiceReportsServing) {
  auto server = StartCollector("health");
  ASSERT_NE(server, nullptr);
  for (const std::string& service : {std::string(), std::string("memtrace.v1.Ingest")}) {
    EXPECT_EQ(HealthCheck(*server, service), kServing) << "service '" << service << "'";
  }
}

// A file system whose files fail every append once `full` is set, as on a full disk.
class FillingFileSystem : public rocksdb::FileSystemWrapper {
 public:
  FillingFileSystem() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  const char* Name() const override { return "FillingFileSystem"; }
  rocksdb::IOStatus NewWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* file,
                                    rocksdb::IODebugContext* debug) override {
    rocksdb::IOStatus s = target()->NewWritableFile(name, options, file, debug);
    if (s.ok()) *file = std::make_unique<File>(std::move(*file), &full);
    return s;
  }

  std::atomic<bool> full{false};

 private:
  class File : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    File(std::unique_ptr<rocksdb::FSWritableFile> file, const std::atomic<bool>* full)
        : FSWritableFileOwnerWrapper(std::move(file)), full_(full) {}
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* debug) override {
      if (full_->load()) return rocksdb::IOStatus::NoSpace("no space left on device (test)");
      return target()->Append(data, options, debug);
    }
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             const rocksdb::DataVerificationInfo& info,
                             rocksdb::IODebugContext* debug) override {
      if (full_->load()) return rocksdb::IOStatus::NoSpace("no space left on device (test)");
      return target()->Append(data, options, info, debug);
    }

   private:
    const std::atomic<bool>* full_;
  };
};

// Found by an operator's test on a full tmpfs: the store refused every batch until a restart,
// and health checks (load balancers', `memtrace run`'s) still said SERVING. Queries go on.
TEST(CollectorServerTest, AStoreThatStoppedTakingWritesIsNotServingIngest) {
  auto fs = std::make_shared<FillingFileSystem>();
  std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
  CollectorServerOptions options;
  options.listen = "127.0.0.1:0";
  options.store.dir = testing::ClearedStoreDir("filling");
  options.store.durability = Durability::kAsync;
  options.store.env = env.get();
  absl::StatusOr<std::unique_ptr<CollectorServer>> server = CollectorServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  sim::WorkloadOptions job;
  job.ranks = 1;
  job.steps = 10;
  job.events_per_rank = 1000;
  ASSERT_TRUE(StoreSimulatedJob((*server)->store(), "before", job).ok());
  EXPECT_EQ(HealthCheck(**server, ""), kServing);
  EXPECT_EQ(HealthCheck(**server, "memtrace.v1.Ingest"), kServing);

  fs->full = true;
  absl::StatusOr<StoredJobStats> refused = StoreSimulatedJob((*server)->store(), "after", job);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_FALSE((*server)->store().TakesWrites());
  EXPECT_EQ(HealthCheck(**server, ""), kNotServing);
  EXPECT_EQ(HealthCheck(**server, "memtrace.v1.Ingest"), kNotServing);
  EXPECT_EQ(HealthCheck(**server, "memtrace.v1.Query"), kServing);
  EXPECT_EQ(HealthCheck(**server, "memtrace.v1.Analysis"), kServing);
  fs->full = false;
  server->reset();  // before the environment it writes through
}

TEST(CollectorServerTest, ReflectionListsTheMemtraceServices) {
  auto server = StartCollector("reflection");
  ASSERT_NE(server, nullptr);
  grpc::GenericStub stub(Connect(*server));
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  auto call =
      stub.PrepareCall(&ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  call->StartCall(Tag(1));
  ASSERT_TRUE(Next(&cq));
  // ServerReflectionRequest{list_services: ""} is field 7, length-delimited, empty.
  call->Write(FromString(std::string("\x3a\x00", 2)), Tag(2));
  ASSERT_TRUE(Next(&cq));
  grpc::ByteBuffer response;
  call->Read(&response, Tag(3));
  ASSERT_TRUE(Next(&cq));
  const std::string bytes = ToString(response);
  EXPECT_NE(bytes.find("memtrace.v1.Ingest"), std::string::npos);
  EXPECT_NE(bytes.find("memtrace.v1.Query"), std::string::npos);
  EXPECT_NE(bytes.find("grpc.health.v1.Health"), std::string::npos);
  call->WritesDone(Tag(4));
  ASSERT_TRUE(Next(&cq));
  grpc::Status status;
  call->Finish(&status, Tag(5));
  ASSERT_TRUE(Next(&cq));
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST(CollectorServerTest, ShutdownEndsOpenAgentStreamsPromptly) {
  auto server = StartCollector("shutdown");
  ASSERT_NE(server, nullptr);
  auto stub = v1::Ingest::NewStub(Connect(*server));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto stream = stub->Stream(&ctx);
  v1::IngestAck ack;
  ASSERT_TRUE(stream->Write(testing::HelloRequest(testing::Identity("job", 0))));
  ASSERT_TRUE(stream->Read(&ack));
  ASSERT_TRUE(stream->Write(testing::BatchRequest(1, 10)) && stream->Read(&ack));
  const absl::Time start = absl::Now();
  server->Shutdown(absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_FALSE(stream->Read(&ack));
  EXPECT_FALSE(stream->Finish().ok());
  // The rank vanished with the collector: stored, not complete.
  absl::StatusOr<std::vector<v1::RankSummary>> ranks = server->store().ListRanks("job");
  ASSERT_TRUE(ranks.ok());
  ASSERT_EQ(ranks->size(), 1u);
  EXPECT_EQ((*ranks)[0].events_stored(), 10u);
  EXPECT_FALSE((*ranks)[0].complete());
  server->Shutdown();  // idempotent
}

}  // namespace
}  // namespace memtrace::collector
