// The Ingest service over a real loopback gRPC connection, with a raw client written here (the
// agent's Transport is tested against a real collector in tests/).
#include "collector/server/ingest_service.h"

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "collector/server/server_test_util.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "proto/codec/batch_codec.h"
#include "tests/util/test_dirs.h"

namespace memtrace::collector {
namespace {

using testing::BatchRequest;
using testing::Connect;
using testing::HelloRequest;
using testing::Identity;
using testing::StartCollector;

// One client stream with a deadline, so a broken server fails the test instead of hanging it.
struct Session {
  explicit Session(v1::Ingest::Stub* stub) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    stream = stub->Stream(&context);
  }
  // Sends `request` and reads the ack; false when the stream ended instead.
  bool Send(const v1::IngestRequest& request, v1::IngestAck* ack) {
    return stream->Write(request) && stream->Read(ack);
  }
  grpc::Status CloseAndFinish() {
    stream->WritesDone();
    v1::IngestAck extra;
    while (stream->Read(&extra)) {
    }
    return stream->Finish();
  }
  // The server ended the stream: drain and return its status.
  grpc::Status Finish() {
    v1::IngestAck extra;
    while (stream->Read(&extra)) {
    }
    return stream->Finish();
  }

  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::IngestRequest, v1::IngestAck>> stream;
};

class IngestServiceTest : public ::testing::Test {
 protected:
  void StartServer(const std::string& name, int max_message_bytes = 16 << 20) {
    server_ = StartCollector(name, max_message_bytes);
    ASSERT_NE(server_, nullptr);
    channel_ = Connect(*server_);
    ingest_ = v1::Ingest::NewStub(channel_);
    query_ = v1::Query::NewStub(channel_);
  }

  v1::RankSummary Rank(const std::string& job, uint32_t rank) {
    grpc::ClientContext ctx;
    v1::ListRanksRequest req;
    req.set_job_id(job);
    v1::ListRanksResponse resp;
    grpc::Status s = query_->ListRanks(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    for (const v1::RankSummary& r : resp.ranks()) {
      if (r.rank() == rank) return r;
    }
    ADD_FAILURE() << "job " << job << " has no rank " << rank;
    return {};
  }

  std::unique_ptr<CollectorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Ingest::Stub> ingest_;
  std::unique_ptr<v1::Query::Stub> query_;
};

TEST_F(IngestServiceTest, HelloIsAnsweredWithTheDurableMarkAndBatchesAreAcked) {
  StartServer("hello");
  Session s(ingest_.get());
  v1::IngestAck ack;
  ASSERT_TRUE(s.Send(HelloRequest(Identity("job", 0)), &ack));
  EXPECT_EQ(ack.durable_seq(), 0u);
  EXPECT_GT(ack.collector_time_ns(), 0);
  ASSERT_TRUE(s.Send(BatchRequest(1, 100), &ack));
  EXPECT_EQ(ack.durable_seq(), 100u);
  ASSERT_TRUE(s.Send(BatchRequest(101, 50), &ack));
  EXPECT_EQ(ack.durable_seq(), 150u);
  grpc::Status status = s.CloseAndFinish();
  ASSERT_TRUE(status.ok()) << status.error_message();

  const v1::RankSummary rank = Rank("job", 0);
  EXPECT_EQ(rank.events_stored(), 150u);
  EXPECT_EQ(rank.durable_seq(), 150u);
  EXPECT_EQ(rank.counters().events_recorded(), 150u);
  EXPECT_TRUE(rank.complete());
  EXPECT_EQ(rank.identified_by(), "env");
}

TEST_F(IngestServiceTest, ReconnectGetsTheDurableMarkAndResendIsANoOp) {
  StartServer("resend");
  {
    Session s(ingest_.get());
    v1::IngestAck ack;
    ASSERT_TRUE(s.Send(HelloRequest(Identity("job", 1)), &ack));
    ASSERT_TRUE(s.Send(BatchRequest(1, 100), &ack));
    ASSERT_TRUE(s.CloseAndFinish().ok());
  }
  Session s(ingest_.get());
  v1::IngestAck ack;
  ASSERT_TRUE(s.Send(HelloRequest(Identity("job", 1)), &ack));
  EXPECT_EQ(ack.durable_seq(), 100u);
  ASSERT_TRUE(s.Send(BatchRequest(1, 100), &ack));
  EXPECT_EQ(ack.durable_seq(), 100u);
  EXPECT_EQ(Rank("job", 1).events_stored(), 100u);
  ASSERT_TRUE(s.Send(BatchRequest(51, 100), &ack));
  EXPECT_EQ(ack.durable_seq(), 150u);
  ASSERT_TRUE(s.CloseAndFinish().ok());
  const v1::RankSummary rank = Rank("job", 1);
  EXPECT_EQ(rank.events_stored(), 150u);
  EXPECT_EQ(rank.anomalies(), 0u);

  grpc::ClientContext ctx;
  v1::ReadEventsRequest req;
  req.set_job_id("job");
  req.set_rank(1);
  v1::ReadEventsResponse resp;
  ASSERT_TRUE(query_->ReadEvents(&ctx, req, &resp).ok());
  absl::StatusOr<DecodedBatch> events = DecodeBatch(resp.batch());
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ(events->events, testing::Events(1, 150));
}

TEST_F(IngestServiceTest, AnAckedBatchSurvivesTheCollector) {
  const std::string dir = testing::ClearedStoreDir("durable");
  {
    CollectorServerOptions options;
    options.listen = "127.0.0.1:0";
    options.store.dir = dir;
    absl::StatusOr<std::unique_ptr<CollectorServer>> server = CollectorServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    auto stub = v1::Ingest::NewStub(Connect(**server));
    Session s(stub.get());
    v1::IngestAck ack;
    ASSERT_TRUE(s.Send(HelloRequest(Identity("job", 2)), &ack));
    ASSERT_TRUE(s.Send(BatchRequest(1, 70), &ack));
    ASSERT_EQ(ack.durable_seq(), 70u);
    // The agent vanishes and the collector goes down without a clean close.
    s.context.TryCancel();
    s.Finish();
  }
  EventStoreOptions options;
  options.dir = dir;
  absl::StatusOr<std::unique_ptr<EventStore>> store = EventStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<std::vector<v1::RankSummary>> ranks = (*store)->ListRanks("job");
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  ASSERT_EQ(ranks->size(), 1u);
  EXPECT_EQ((*ranks)[0].durable_seq(), 70u);
  EXPECT_EQ((*ranks)[0].events_stored(), 70u);
  EXPECT_FALSE((*ranks)[0].complete());
}

TEST_F(IngestServiceTest, MalformedBatchEndsTheStreamAndStoresNothingOfIt) {
  StartServer("malformed");
  Session s(ingest_.get());
  v1::IngestAck ack;
  ASSERT_TRUE(s.Send(HelloRequest(Identity("job", 0)), &ack));
  ASSERT_TRUE(s.Send(BatchRequest(1, 10), &ack));
  ASSERT_EQ(ack.durable_seq(), 10u);
  v1::IngestRequest bad = BatchRequest(11, 20);
  bad.mutable_batch()->mutable_bytes()->RemoveLast();  // 19 entries for 20 events
  ASSERT_TRUE(s.stream->Write(bad));
  EXPECT_FALSE(s.stream->Read(&ack));
  grpc::Status status = s.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("bytes"), std::string::npos) << status.error_message();
  const v1::RankSummary rank = Rank("job", 0);
  EXPECT_EQ(rank.durable_seq(), 10u);
  EXPECT_EQ(rank.events_stored(), 10u);
  EXPECT_FALSE(rank.complete());
}

TEST_F(IngestServiceTest, BatchOverTheEventLimitIsResourceExhausted) {
  StartServer("too-many");
  Session s(ingest_.get());
  v1::IngestAck ack;
  ASSERT_TRUE(s.Send(HelloRequest(Identity("job", 0)), &ack));
  ASSERT_TRUE(s.stream->Write(BatchRequest(1, BatchLimits().max_events + 1)));
  EXPECT_FALSE(s.stream->Read(&ack));
  grpc::Status status = s.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_EQ(Rank("job", 0).events_stored(), 0u);
}

TEST_F(IngestServiceTest, FirstMessageMustBeAHelloWithAJob) {
  StartServer("no-hello");
  {
    Session s(ingest_.get());
    ASSERT_TRUE(s.stream->Write(BatchRequest(1, 5)));
    grpc::Status status = s.Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("Hello"), std::string::npos) << status.error_message();
  }
  {
    Session s(ingest_.get());
    v1::IngestRequest hello;
    hello.mutable_hello();  // no identity
    ASSERT_TRUE(s.stream->Write(hello));
    EXPECT_EQ(s.Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    Session s(ingest_.get());
    ASSERT_TRUE(s.stream->Write(HelloRequest(Identity("", 0))));
    grpc::Status status = s.Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("job_id"), std::string::npos) << status.error_message();
  }
  {
    Session s(ingest_.get());
    EXPECT_EQ(s.CloseAndFinish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  grpc::ClientContext ctx;
  v1::ListJobsResponse jobs;
  ASSERT_TRUE(query_->ListJobs(&ctx, v1::ListJobsRequest(), &jobs).ok());
  EXPECT_EQ(jobs.jobs_size(), 0);
}

TEST(IngestAdmissionTest, AHelloTheStoreRefusesDoesNotUseUpTheJobsRanks) {
  CollectorServerOptions options;
  options.listen = "127.0.0.1:0";
  options.store.dir = test_util::TmpPath("refused-hello");
  options.ingest_limits.max_ranks_per_job = 1;
  absl::StatusOr<std::unique_ptr<CollectorServer>> server = CollectorServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  std::unique_ptr<v1::Ingest::Stub> ingest = v1::Ingest::NewStub(Connect(**server));
  // Launcher ranks in the synthetic range are refused; they used to be counted first.
  for (int32_t rank : {1'000'000, 1'000'001}) {
    Session s(ingest.get());
    ASSERT_TRUE(s.stream->Write(HelloRequest(Identity("jq", rank))));
    grpc::Status status = s.Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << rank;
    EXPECT_NE(status.error_message().find("below 1000000"), std::string::npos)
        << status.error_message();
  }
  Session s(ingest.get());
  v1::IngestAck ack;
  ASSERT_TRUE(s.Send(HelloRequest(Identity("jq", 0)), &ack)) << s.Finish().error_message();
  ASSERT_TRUE(s.Send(BatchRequest(1, 10), &ack));
  EXPECT_EQ(ack.durable_seq(), 10u);
  EXPECT_TRUE(s.CloseAndFinish().ok());
}

TEST_F(IngestServiceTest, SecondHelloOnOneStreamIsRejected) {
  StartServer("second-hello");
  Session s(ingest_.get());
  v1::IngestAck ack;
  ASSERT_TRUE(s.Send(HelloRequest(Identity("job", 0)), &ack));
  ASSERT_TRUE(s.stream->Write(HelloRequest(Identity("job", 1))));
  EXPECT_EQ(s.Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(IngestServiceTest, OversizedMessageIsRejectedAndNothingStored) {
  StartServer("oversized", /*max_message_bytes=*/64 << 10);
  Session s(ingest_.get());
  v1::IngestAck ack;
  ASSERT_TRUE(s.Send(HelloRequest(Identity("job", 0)), &ack));
  v1::IngestRequest big = BatchRequest(1, 30000);
  ASSERT_GT(big.ByteSizeLong(), 64u << 10);
  s.stream->Write(big);
  EXPECT_FALSE(s.stream->Read(&ack));
  grpc::Status status = s.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_EQ(Rank("job", 0).events_stored(), 0u);
}

TEST_F(IngestServiceTest, CancelledStreamLeavesTheRankIncomplete) {
  StartServer("cancel");
  {
    Session s(ingest_.get());
    v1::IngestAck ack;
    ASSERT_TRUE(s.Send(HelloRequest(Identity("job", 3)), &ack));
    ASSERT_TRUE(s.CloseAndFinish().ok());
  }
  ASSERT_TRUE(Rank("job", 3).complete());
  Session s(ingest_.get());
  v1::IngestAck ack;
  ASSERT_TRUE(s.Send(HelloRequest(Identity("job", 3)), &ack));
  ASSERT_TRUE(s.Send(BatchRequest(1, 20), &ack));
  s.context.TryCancel();
  EXPECT_EQ(s.Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The server notices the cancellation asynchronously; a wrong "complete" would show up here.
  for (int i = 0; i < 20; ++i) {
    const v1::RankSummary rank = Rank("job", 3);
    ASSERT_FALSE(rank.complete());
    ASSERT_EQ(rank.events_stored(), 20u);
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
}

TEST_F(IngestServiceTest, ConcurrentStreamsOfOneJobAllLand) {
  StartServer("concurrent");
  constexpr int kRanks = 6;
  std::vector<std::thread> threads;
  std::vector<uint64_t> last_ack(kRanks, 0);
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      Session s(ingest_.get());
      v1::IngestAck ack;
      if (!s.Send(HelloRequest(Identity("big", r)), &ack)) return;
      for (uint64_t first = 1; first <= 2000; first += 100) {
        if (!s.Send(BatchRequest(first, 100), &ack)) return;
      }
      last_ack[r] = ack.durable_seq();
      s.CloseAndFinish();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(last_ack[r], 2000u) << "rank " << r;
    const v1::RankSummary rank = Rank("big", r);
    EXPECT_EQ(rank.events_stored(), 2000u);
    EXPECT_TRUE(rank.complete());
  }
}

TEST_F(IngestServiceTest, WorkerWithoutLauncherRankIsNamedByHostDeviceAndPid) {
  StartServer("ray");
  Session s(ingest_.get());
  v1::IngestAck ack;
  ASSERT_TRUE(s.Send(HelloRequest(Identity("ray-job", -1)), &ack));
  ASSERT_TRUE(s.Send(BatchRequest(1, 10), &ack));
  ASSERT_TRUE(s.CloseAndFinish().ok());
  grpc::ClientContext ctx;
  v1::ListRanksRequest req;
  req.set_job_id("ray-job");
  v1::ListRanksResponse resp;
  ASSERT_TRUE(query_->ListRanks(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.ranks_size(), 1);
  EXPECT_EQ(resp.ranks(0).identified_by(), "host+device+pid");
  EXPECT_EQ(resp.ranks(0).identity().rank(), -1);
  EXPECT_EQ(resp.ranks(0).events_stored(), 10u);
}

// A process that inherited its parent's RANK (a vLLM engine under a torchrun worker) is stored
// beside the rank as its subprocess: before, refused while the parent streamed.
TEST_F(IngestServiceTest, AProcessWhoseParentStreamsTheRankIsStoredAsItsSubprocess) {
  StartServer("subprocess");
  const v1::RankIdentity parent = Identity("rl", 2);
  v1::RankIdentity engine = parent;
  engine.set_pid(parent.pid() + 50);
  engine.add_ancestor_pids(parent.pid());
  engine.set_subprocess_of_rank(7);  // the collector's to say: ignored
  Session p(ingest_.get());
  v1::IngestAck ack;
  ASSERT_TRUE(p.Send(HelloRequest(parent), &ack));
  EXPECT_FALSE(ack.has_subprocess_of_rank());
  ASSERT_TRUE(p.Send(BatchRequest(1, 10), &ack));
  {
    Session child(ingest_.get());
    ASSERT_TRUE(child.Send(HelloRequest(engine), &ack)) << child.Finish().error_message();
    EXPECT_EQ(ack.subprocess_of_rank(), 2);
    // Its own sequence numbers, the same as the parent's: no resend of the parent's.
    ASSERT_TRUE(child.Send(BatchRequest(1, 6), &ack));
    EXPECT_EQ(ack.durable_seq(), 6u);
    ASSERT_TRUE(child.CloseAndFinish().ok());
  }
  ASSERT_TRUE(p.CloseAndFinish().ok());

  grpc::ClientContext ctx;
  v1::ListRanksRequest req;
  req.set_job_id("rl");
  v1::ListRanksResponse ranks;
  ASSERT_TRUE(query_->ListRanks(&ctx, req, &ranks).ok());
  ASSERT_EQ(ranks.ranks_size(), 2);
  EXPECT_EQ(ranks.ranks(0).rank(), 2u);
  EXPECT_EQ(ranks.ranks(0).events_stored(), 10u);
  EXPECT_FALSE(ranks.ranks(0).identity().has_subprocess_of_rank());
  const v1::RankSummary& stored = ranks.ranks(1);
  EXPECT_GE(stored.rank(), 1000000u) << "numbered like a worker without a launcher rank";
  EXPECT_EQ(stored.identity().rank(), -1);
  EXPECT_EQ(stored.identity().subprocess_of_rank(), 2);
  EXPECT_EQ(stored.identified_by(), "subprocess of rank 2");
  EXPECT_EQ(stored.events_stored(), 6u);
  EXPECT_TRUE(stored.complete());

  grpc::ClientContext jobs_ctx;
  v1::ListJobsResponse jobs;
  ASSERT_TRUE(query_->ListJobs(&jobs_ctx, v1::ListJobsRequest(), &jobs).ok());
  ASSERT_EQ(jobs.jobs_size(), 1);
  EXPECT_EQ(jobs.jobs(0).ranks(), 1u);
  EXPECT_EQ(jobs.jobs(0).subprocesses(), 1u);
  EXPECT_EQ(jobs.jobs(0).parents(), 0u);
  EXPECT_EQ(jobs.jobs(0).restarts(), 0u);
  EXPECT_EQ(jobs.jobs(0).events(), 16u);

  // The job's timeline, as the analyses read it, has the rank alone; the subprocess's own when
  // asked for by its number.
  for (bool named : {false, true}) {
    grpc::ClientContext tl_ctx;
    v1::TimelineRequest tl;
    tl.set_job_id("rl");
    if (named) tl.set_rank(stored.rank());
    v1::TimelineResponse timeline;
    ASSERT_TRUE(query_->Timeline(&tl_ctx, tl, &timeline).ok());
    ASSERT_EQ(timeline.ranks_size(), 1) << named;
    EXPECT_EQ(timeline.ranks(0).rank(), named ? stored.rank() : 2u);
  }
  // The job's rollups (what an export reads) have it when asked to.
  for (bool with_subprocesses : {false, true}) {
    grpc::ClientContext r_ctx;
    v1::GetRollupsRequest r;
    r.set_job_id("rl");
    r.set_with_subprocesses(with_subprocesses);
    v1::GetRollupsResponse rollups;
    ASSERT_TRUE(query_->GetRollups(&r_ctx, r, &rollups).ok());
    ASSERT_EQ(rollups.ranks_size(), with_subprocesses ? 2 : 1);
    if (with_subprocesses) EXPECT_EQ(rollups.ranks(1).identity().subprocess_of_rank(), 2);
  }
}

// The other order: the engine connected first and holds the rank; the process that started it
// (told by its /proc start) is stored beside it, not refused, and says so in its ack.
TEST_F(IngestServiceTest, TheProcessThatStartedTheRanksProcessIsStoredBesideIt) {
  StartServer("parent-late");
  v1::RankIdentity trainer = Identity("rl", 2);
  trainer.set_start_ticks(500);
  trainer.set_boot_id("boot-1");
  trainer.set_started_the_rank(true);  // the collector's to say: ignored
  v1::RankIdentity engine = trainer;
  engine.clear_started_the_rank();
  engine.set_pid(trainer.pid() + 50);
  engine.set_start_ticks(600);
  engine.add_ancestor_pids(trainer.pid());
  engine.add_ancestor_start_ticks(500);
  Session first(ingest_.get());
  v1::IngestAck ack;
  ASSERT_TRUE(first.Send(HelloRequest(engine), &ack));
  EXPECT_FALSE(ack.has_subprocess_of_rank());
  EXPECT_FALSE(ack.started_the_rank());
  ASSERT_TRUE(first.Send(BatchRequest(1, 6), &ack));
  {
    Session late(ingest_.get());
    ASSERT_TRUE(late.Send(HelloRequest(trainer), &ack)) << late.Finish().error_message();
    EXPECT_EQ(ack.subprocess_of_rank(), 2);
    EXPECT_TRUE(ack.started_the_rank());
    ASSERT_TRUE(late.Send(BatchRequest(1, 10), &ack));
    EXPECT_EQ(ack.durable_seq(), 10u);
    ASSERT_TRUE(late.CloseAndFinish().ok());
  }
  ASSERT_TRUE(first.CloseAndFinish().ok());
  const v1::RankSummary rank = Rank("rl", 2);
  EXPECT_EQ(rank.identity().pid(), engine.pid());
  EXPECT_FALSE(rank.identity().started_the_rank());
  EXPECT_EQ(rank.events_stored(), 6u);

  grpc::ClientContext ctx;
  v1::ListRanksRequest req;
  req.set_job_id("rl");
  v1::ListRanksResponse ranks;
  ASSERT_TRUE(query_->ListRanks(&ctx, req, &ranks).ok());
  ASSERT_EQ(ranks.ranks_size(), 2);
  const v1::RankSummary& stored = ranks.ranks(1);
  EXPECT_EQ(stored.identity().pid(), trainer.pid());
  EXPECT_EQ(stored.identity().subprocess_of_rank(), 2);
  EXPECT_TRUE(stored.identity().started_the_rank());
  EXPECT_EQ(stored.identified_by(), "started rank 2's process");
  EXPECT_EQ(stored.events_stored(), 10u);

  // `memtrace jobs` counts it apart: it is neither a restart nor a process the rank started.
  grpc::ClientContext jobs_ctx;
  v1::ListJobsResponse jobs;
  ASSERT_TRUE(query_->ListJobs(&jobs_ctx, v1::ListJobsRequest(), &jobs).ok());
  ASSERT_EQ(jobs.jobs_size(), 1);
  EXPECT_EQ(jobs.jobs(0).ranks(), 1u);
  EXPECT_EQ(jobs.jobs(0).parents(), 1u);
  EXPECT_EQ(jobs.jobs(0).subprocesses(), 0u);
  EXPECT_EQ(jobs.jobs(0).restarts(), 0u);
  EXPECT_EQ(jobs.jobs(0).events(), 16u);
}

// A Hello that claims to be a subprocess, with no parent streaming the rank, is the rank.
TEST_F(IngestServiceTest, AHelloCannotMakeItselfASubprocess) {
  StartServer("self-claimed");
  v1::RankIdentity id = Identity("j", 1);
  id.set_subprocess_of_rank(1);
  id.set_started_the_rank(true);
  id.add_ancestor_pids(4);
  Session s(ingest_.get());
  v1::IngestAck ack;
  ASSERT_TRUE(s.Send(HelloRequest(id), &ack));
  EXPECT_FALSE(ack.has_subprocess_of_rank());
  ASSERT_TRUE(s.CloseAndFinish().ok());
  EXPECT_EQ(Rank("j", 1).identified_by(), "env");
  EXPECT_FALSE(Rank("j", 1).identity().has_subprocess_of_rank());
  EXPECT_FALSE(Rank("j", 1).identity().started_the_rank());
}

}  // namespace
}  // namespace memtrace::collector
