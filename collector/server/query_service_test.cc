// The Query service over a real loopback gRPC connection, on data sent through Ingest.
#include "collector/server/query_service.h"

#include <chrono>

#include "collector/server/server_test_util.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "proto/codec/batch_codec.h"

namespace memtrace::collector {
namespace {

using testing::BatchRequest;
using testing::Connect;
using testing::HelloRequest;
using testing::Identity;
using testing::kBaseTs;

int64_t Ts(uint64_t seq) { return kBaseTs + static_cast<int64_t>(seq) * 1'000'000; }

class QueryServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = testing::StartCollector(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_NE(server_, nullptr);
    auto channel = Connect(*server_);
    ingest_ = v1::Ingest::NewStub(channel);
    query_ = v1::Query::NewStub(channel);
  }

  // Sends events 1..count of testing::Events for (job, rank) and closes cleanly.
  void Ingest(const std::string& job, int32_t rank, uint64_t count,
              const v1::IngestRequest* extra = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto stream = ingest_->Stream(&ctx);
    v1::IngestAck ack;
    ASSERT_TRUE(stream->Write(HelloRequest(Identity(job, rank))) && stream->Read(&ack));
    for (uint64_t first = 1; first <= count; first += 50) {
      ASSERT_TRUE(stream->Write(BatchRequest(first, std::min<uint64_t>(50, count - first + 1))));
      ASSERT_TRUE(stream->Read(&ack));
    }
    if (extra != nullptr) {
      ASSERT_TRUE(stream->Write(*extra) && stream->Read(&ack));
    }
    stream->WritesDone();
    ASSERT_TRUE(stream->Finish().ok());
  }

  std::unique_ptr<CollectorServer> server_;
  std::unique_ptr<v1::Ingest::Stub> ingest_;
  std::unique_ptr<v1::Query::Stub> query_;
};

TEST_F(QueryServiceTest, UnknownJobIsNotFoundNamingTheJob) {
  const std::string job = "no-such-job";
  std::vector<grpc::Status> statuses;
  {
    grpc::ClientContext ctx;
    v1::ListRanksRequest req;
    req.set_job_id(job);
    v1::ListRanksResponse resp;
    statuses.push_back(query_->ListRanks(&ctx, req, &resp));
  }
  {
    grpc::ClientContext ctx;
    v1::TimelineRequest req;
    req.set_job_id(job);
    v1::TimelineResponse resp;
    statuses.push_back(query_->Timeline(&ctx, req, &resp));
  }
  {
    grpc::ClientContext ctx;
    v1::GetRollupsRequest req;
    req.set_job_id(job);
    v1::GetRollupsResponse resp;
    statuses.push_back(query_->GetRollups(&ctx, req, &resp));
  }
  {
    grpc::ClientContext ctx;
    v1::LiveAtRequest req;
    req.set_job_id(job);
    v1::LiveAtResponse resp;
    statuses.push_back(query_->LiveAt(&ctx, req, &resp));
  }
  {
    grpc::ClientContext ctx;
    v1::ReadEventsRequest req;
    req.set_job_id(job);
    v1::ReadEventsResponse resp;
    statuses.push_back(query_->ReadEvents(&ctx, req, &resp));
  }
  for (const grpc::Status& s : statuses) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
    EXPECT_NE(s.error_message().find(job), std::string::npos) << s.error_message();
  }
}

TEST_F(QueryServiceTest, EmptyJobIdIsInvalid) {
  grpc::ClientContext ctx;
  v1::ListRanksResponse resp;
  EXPECT_EQ(query_->ListRanks(&ctx, v1::ListRanksRequest(), &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(QueryServiceTest, ListJobsAndRanksSummarizeWhatWasIngested) {
  Ingest("job-b", 0, 100);
  Ingest("job-b", 1, 40);
  Ingest("job-a", 0, 10);
  grpc::ClientContext ctx;
  v1::ListJobsResponse jobs;
  ASSERT_TRUE(query_->ListJobs(&ctx, v1::ListJobsRequest(), &jobs).ok());
  ASSERT_EQ(jobs.jobs_size(), 2);
  EXPECT_EQ(jobs.jobs(0).job_id(), "job-a");
  EXPECT_EQ(jobs.jobs(1).job_id(), "job-b");
  EXPECT_EQ(jobs.jobs(1).ranks(), 2u);
  EXPECT_EQ(jobs.jobs(1).events(), 140u);
  EXPECT_EQ(jobs.jobs(1).first_ts_ns(), Ts(1));
  EXPECT_EQ(jobs.jobs(1).last_ts_ns(), Ts(100));

  grpc::ClientContext ctx2;
  v1::ListRanksRequest req;
  req.set_job_id("job-b");
  v1::ListRanksResponse ranks;
  ASSERT_TRUE(query_->ListRanks(&ctx2, req, &ranks).ok());
  ASSERT_EQ(ranks.ranks_size(), 2);
  EXPECT_EQ(ranks.ranks(0).rank(), 0u);
  EXPECT_EQ(ranks.ranks(0).current_step(), 10);
  EXPECT_EQ(ranks.ranks(1).events_stored(), 40u);
  EXPECT_TRUE(ranks.ranks(1).complete());
  EXPECT_GT(ranks.ranks(1).last_ack_unix_ns(), 0);
}

TEST_F(QueryServiceTest, TimelineByStepFiltersByTimeWindow) {
  Ingest("job", 0, 100);
  Ingest("job", 1, 100);
  grpc::ClientContext ctx;
  v1::TimelineRequest req;
  req.set_job_id("job");
  v1::TimelineResponse all;
  ASSERT_TRUE(query_->Timeline(&ctx, req, &all).ok());
  ASSERT_EQ(all.ranks_size(), 2);
  ASSERT_EQ(all.ranks(0).points_size(), 11);  // steps 0..10
  for (int k = 0; k <= 10; ++k) EXPECT_EQ(all.ranks(0).points(k).key(), k);
  // Step 1 (events 10-19): allocations of 1000 bytes at 11-14 and 16-19, one free at 15.
  const v1::TimelinePoint& p1 = all.ranks(0).points(1);
  EXPECT_EQ(p1.start_ns(), Ts(10));
  EXPECT_EQ(p1.end_ns(), Ts(20));
  EXPECT_EQ(p1.floor_bytes(), 9000u);
  EXPECT_EQ(p1.end_bytes(), 16000u);
  EXPECT_EQ(p1.peak_bytes(), 16000u);

  grpc::ClientContext ctx2;
  req.set_rank(1);
  req.set_from_ns(Ts(35));
  req.set_to_ns(Ts(52));
  v1::TimelineResponse window;
  ASSERT_TRUE(query_->Timeline(&ctx2, req, &window).ok());
  ASSERT_EQ(window.ranks_size(), 1);
  EXPECT_EQ(window.ranks(0).rank(), 1u);
  ASSERT_EQ(window.ranks(0).points_size(), 3);
  EXPECT_EQ(window.ranks(0).points(0).key(), 3);
  EXPECT_EQ(window.ranks(0).points(2).key(), 5);

  // Steps end where the next begins: a window from step 4's start holds neither step 3, which
  // ends there, nor step 6, which starts after it.
  grpc::ClientContext ctx4;
  req.set_from_ns(Ts(40));
  req.set_to_ns(Ts(59));
  v1::TimelineResponse boundary;
  ASSERT_TRUE(query_->Timeline(&ctx4, req, &boundary).ok());
  ASSERT_EQ(boundary.ranks_size(), 1);
  ASSERT_EQ(boundary.ranks(0).points_size(), 2);
  EXPECT_EQ(boundary.ranks(0).points(0).key(), 4);
  EXPECT_EQ(boundary.ranks(0).points(1).key(), 5);

  grpc::ClientContext ctx3;
  req.set_rank(7);
  v1::TimelineResponse none;
  grpc::Status s = query_->Timeline(&ctx3, req, &none);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_EQ(s.error_message(), "job \"job\" has no rank 7");

  // A list of ranks: those, each named that the job does not have.
  v1::TimelineRequest list;
  list.set_job_id("job");
  list.add_ranks(1);
  list.add_ranks(0);
  grpc::ClientContext ctx5;
  v1::TimelineResponse both;
  ASSERT_TRUE(query_->Timeline(&ctx5, list, &both).ok());
  ASSERT_EQ(both.ranks_size(), 2);
  EXPECT_EQ(both.ranks(0).rank(), 0u);
  EXPECT_EQ(both.ranks(1).rank(), 1u);
  list.add_ranks(9);
  list.set_rank(7);
  grpc::ClientContext ctx6;
  s = query_->Timeline(&ctx6, list, &none);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_EQ(s.error_message(), "job \"job\" has no ranks 7,9");
}

// A rank's last step is still open: its end is its latest event, which is inside the row. A
// window from exactly that event keeps the step; a closed step ending there stays out.
TEST_F(QueryServiceTest, AWindowFromAnOpenStepsLastEventHoldsThatStep) {
  Ingest("job", 0, 105);  // step 10 opens at event 100 and is still open at event 105
  for (const auto& [from, keys] : std::vector<std::pair<int64_t, std::vector<int64_t>>>{
           {Ts(105), {10}}, {Ts(100), {10}}, {Ts(99), {9, 10}}}) {
    grpc::ClientContext ctx;
    v1::TimelineRequest req;
    req.set_job_id("job");
    req.set_from_ns(from);
    v1::TimelineResponse resp;
    ASSERT_TRUE(query_->Timeline(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.ranks_size(), 1);
    std::vector<int64_t> got;
    for (const v1::TimelinePoint& p : resp.ranks(0).points()) got.push_back(p.key());
    EXPECT_EQ(got, keys) << "from event " << (from - kBaseTs) / 1'000'000;
  }
  // Time buckets end where the next begins, open or not: from a bucket's end, it is left out.
  grpc::ClientContext ctx;
  v1::TimelineRequest req;
  req.set_job_id("job");
  req.set_axis(v1::TIMELINE_AXIS_TIME);
  req.set_from_ns(kBaseTs + 1'000'000'000);
  v1::TimelineResponse resp;
  ASSERT_TRUE(query_->Timeline(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.ranks_size(), 1);
  EXPECT_EQ(resp.ranks(0).points_size(), 0);
}

// While a rank's agent is connected, its last row is still being filled: the timeline and the
// rollups say so, of that row only, until the stream closes.
TEST_F(QueryServiceTest, ARunningRanksLastRowIsMarkedInProgress) {
  grpc::ClientContext stream_ctx;
  stream_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto stream = ingest_->Stream(&stream_ctx);
  v1::IngestAck ack;
  ASSERT_TRUE(stream->Write(HelloRequest(Identity("running", 0))) && stream->Read(&ack));
  ASSERT_TRUE(stream->Write(BatchRequest(1, 45)) && stream->Read(&ack));  // steps 0..4
  const auto timeline = [&](int64_t to_ns) {
    grpc::ClientContext ctx;
    v1::TimelineRequest req;
    req.set_job_id("running");
    req.set_to_ns(to_ns);
    v1::TimelineResponse resp;
    EXPECT_TRUE(query_->Timeline(&ctx, req, &resp).ok());
    return resp;
  };
  const auto rollups_say_in_progress = [&] {
    grpc::ClientContext ctx;
    v1::GetRollupsRequest req;
    req.set_job_id("running");
    v1::GetRollupsResponse resp;
    EXPECT_TRUE(query_->GetRollups(&ctx, req, &resp).ok());
    return resp.ranks_size() == 1 && resp.ranks(0).last_row_in_progress();
  };
  v1::TimelineResponse all = timeline(0);
  ASSERT_EQ(all.ranks_size(), 1);
  EXPECT_EQ(all.ranks(0).points_size(), 5);
  EXPECT_TRUE(all.ranks(0).last_point_in_progress());
  EXPECT_TRUE(rollups_say_in_progress());
  // A window that ends before the last row holds no row in progress.
  v1::TimelineResponse early = timeline(Ts(25));
  ASSERT_EQ(early.ranks_size(), 1);
  EXPECT_EQ(early.ranks(0).points_size(), 3);
  EXPECT_FALSE(early.ranks(0).last_point_in_progress());

  stream->WritesDone();
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_FALSE(timeline(0).ranks(0).last_point_in_progress());
  EXPECT_FALSE(rollups_say_in_progress());
  EXPECT_FALSE(timeline(0).ranks(0).last_point_cut_short()) << "5 ms of a 10 ms step";
}

// A job that an OOM ended stops every rank mid-step: an ended stream's last row that it stopped
// well inside is marked cut short, its end being where the process stopped, not a step's end.
TEST_F(QueryServiceTest, AnEndedRanksLastRowItStoppedWellInsideIsMarkedCutShort) {
  // Steps 10 ms long (a marker every 10 events, 1 ms apart); rank 0 stops 2 ms into step 4,
  // rank 1 8 ms into it.
  Ingest("stopped", 0, 42);
  Ingest("stopped", 1, 48);
  grpc::ClientContext ctx;
  v1::TimelineRequest req;
  req.set_job_id("stopped");
  v1::TimelineResponse steps;
  ASSERT_TRUE(query_->Timeline(&ctx, req, &steps).ok());
  ASSERT_EQ(steps.ranks_size(), 2);
  EXPECT_EQ(steps.ranks(0).points_size(), 5);
  EXPECT_TRUE(steps.ranks(0).last_point_cut_short());
  EXPECT_FALSE(steps.ranks(0).last_point_in_progress());
  EXPECT_FALSE(steps.ranks(1).last_point_cut_short()) << "most of a step is taken as whole";
}

TEST_F(QueryServiceTest, TimelineByTimeUsesBuckets) {
  Ingest("job", 0, 100);
  grpc::ClientContext ctx;
  v1::TimelineRequest req;
  req.set_job_id("job");
  req.set_axis(v1::TIMELINE_AXIS_TIME);
  v1::TimelineResponse resp;
  ASSERT_TRUE(query_->Timeline(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.bucket_ns(), 1'000'000'000);
  ASSERT_EQ(resp.ranks_size(), 1);
  // 100 events 1 ms apart from a whole second: one bucket.
  ASSERT_EQ(resp.ranks(0).points_size(), 1);
  EXPECT_EQ(resp.ranks(0).points(0).key(), kBaseTs / 1'000'000'000);
  EXPECT_EQ(resp.ranks(0).points(0).start_ns(), kBaseTs);
}

TEST_F(QueryServiceTest, GetRollupsCarriesIdentityAndStrings) {
  Ingest("job", 2, 30);
  grpc::ClientContext ctx;
  v1::GetRollupsRequest req;
  req.set_job_id("job");
  v1::GetRollupsResponse resp;
  ASSERT_TRUE(query_->GetRollups(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.ranks_size(), 1);
  const v1::RankRollups& r = resp.ranks(0);
  EXPECT_EQ(r.rank(), 2u);
  EXPECT_EQ(r.identity().host(), "node-0");
  ASSERT_EQ(r.strings_size(), 1);
  EXPECT_EQ(r.strings(0).value(), "model.layers");
  ASSERT_EQ(r.steps_size(), 4);  // 0, 1, 2 closed; 3 open
  ASSERT_EQ(r.steps(1).by_tag_size(), 1);
  EXPECT_EQ(r.steps(1).by_tag(0).id(), 1u);
  EXPECT_EQ(r.steps(1).by_tag(0).live_bytes(), r.steps(1).end_bytes());

  // Scalars only (what `memtrace plot` asks for): the same rows, without their tag lists and the
  // string table.
  grpc::ClientContext scalar_ctx;
  req.set_scalars_only(true);
  v1::GetRollupsResponse scalars;
  ASSERT_TRUE(query_->GetRollups(&scalar_ctx, req, &scalars).ok());
  ASSERT_EQ(scalars.ranks_size(), 1);
  EXPECT_EQ(scalars.ranks(0).strings_size(), 0);
  ASSERT_EQ(scalars.ranks(0).steps_size(), r.steps_size());
  for (int i = 0; i < r.steps_size(); ++i) {
    v1::StepRollup without_lists = r.steps(i);
    without_lists.clear_by_tag();
    without_lists.clear_by_source();
    without_lists.clear_by_phase();
    EXPECT_EQ(scalars.ranks(0).steps(i).SerializeAsString(), without_lists.SerializeAsString())
        << "row " << i;
  }
}

TEST_F(QueryServiceTest, LiveAtReturnsTheLiveSetLargestFirst) {
  // One extra 1 MiB allocation at seq 51 (after events 1..50) at a known time.
  v1::IngestRequest extra;
  Event big;
  big.seq = 51;
  big.ts_ns = Ts(51);
  big.kind = EventKind::kAlloc;
  big.address = 0xdead0000;
  big.bytes = 1 << 20;
  big.tag_id = 1;
  big.memory_kind = kMemoryDevice;
  Event oom;
  oom.seq = 52;
  oom.ts_ns = Ts(52);
  oom.kind = EventKind::kOom;
  oom.bytes = 1 << 30;
  EncodeBatch({big, oom}, {}, AgentCounterValues(), extra.mutable_batch());
  Ingest("job", 0, 50, &extra);

  grpc::ClientContext ctx;
  v1::LiveAtRequest req;
  req.set_job_id("job");
  req.set_rank(0);
  req.set_max_allocations(3);
  v1::LiveAtResponse now;
  ASSERT_TRUE(query_->LiveAt(&ctx, req, &now).ok());
  EXPECT_EQ(now.seq(), 52u);
  ASSERT_EQ(now.allocations_size(), 3);
  EXPECT_EQ(now.allocations(0).address(), 0xdead0000u);
  EXPECT_EQ(now.allocations(0).bytes(), 1u << 20);
  EXPECT_EQ(now.allocations(0).step(), 5);
  EXPECT_EQ(now.allocations(0).seq(), 51u);
  EXPECT_GT(now.allocation_count(), 3u);
  EXPECT_EQ(now.strings_size(), 1);

  grpc::ClientContext ctx2;
  req.set_at_ns(Ts(50));
  req.set_max_allocations(0);
  v1::LiveAtResponse before;
  ASSERT_TRUE(query_->LiveAt(&ctx2, req, &before).ok());
  EXPECT_EQ(before.seq(), 50u);
  EXPECT_EQ(before.allocation_count(), now.allocation_count() - 1);
  EXPECT_EQ(before.live_bytes(), now.live_bytes() - (1 << 20));
  uint64_t sum = 0;
  for (const v1::LiveAllocation& a : before.allocations()) sum += a.bytes();
  EXPECT_EQ(sum, before.live_bytes());

  grpc::ClientContext ctx3;
  req.set_first_oom(true);
  v1::LiveAtResponse at_oom;
  ASSERT_TRUE(query_->LiveAt(&ctx3, req, &at_oom).ok());
  EXPECT_EQ(at_oom.seq(), 52u);
  EXPECT_EQ(at_oom.oom_requested_bytes(), 1u << 30);
  EXPECT_EQ(at_oom.live_bytes(), now.live_bytes());

  grpc::ClientContext ctx4;
  req.set_rank(3);
  v1::LiveAtResponse missing;
  EXPECT_EQ(query_->LiveAt(&ctx4, req, &missing).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(QueryServiceTest, ReadEventsRoundTripsAndPages) {
  Ingest("job", 0, 120);
  grpc::ClientContext ctx;
  v1::ReadEventsRequest req;
  req.set_job_id("job");
  req.set_from_seq(30);
  req.set_limit(40);
  v1::ReadEventsResponse resp;
  ASSERT_TRUE(query_->ReadEvents(&ctx, req, &resp).ok());
  absl::StatusOr<DecodedBatch> batch = DecodeBatch(resp.batch());
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->events, testing::Events(30, 40));
  ASSERT_EQ(batch->strings.size(), 1u);
  EXPECT_EQ(resp.next_seq(), 70u);
}

}  // namespace
}  // namespace memtrace::collector
