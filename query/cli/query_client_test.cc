#include "query/cli/query_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace memtrace::cli {
namespace {

// A port on loopback that nothing listens on: bound by the OS, then closed.
int ClosedLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  close(fd);
  return ntohs(addr.sin_port);
}

// Answers ListJobs with one job and ListRanks with NOT_FOUND for any job but "j1"; GetRollups
// with kBigRollupRows rows (over gRPC's default 4 MiB answer); the other RPCs stay
// unimplemented.
class SmallQueryService : public v1::Query::Service {
 public:
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*,
                        v1::ListJobsResponse* response) override {
    v1::JobSummary* job = response->add_jobs();
    job->set_job_id("j1");
    job->set_ranks(8);
    return grpc::Status::OK;
  }
  grpc::Status ListRanks(grpc::ServerContext*, const v1::ListRanksRequest* request,
                         v1::ListRanksResponse* response) override {
    if (request->job_id() != "j1") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("job '", request->job_id(), "' not found"));
    }
    response->add_ranks()->set_rank(3);
    return grpc::Status::OK;
  }
  grpc::Status GetRollups(grpc::ServerContext*, const v1::GetRollupsRequest*,
                          v1::GetRollupsResponse* response) override {
    v1::RankRollups* rank = response->add_ranks();
    for (int i = 0; i < kBigRollupRows; ++i) {
      v1::StepRollup* row = rank->add_steps();
      row->set_step(i);
      for (int t = 0; t < 8; ++t) row->add_by_tag()->set_live_bytes(uint64_t{1} << 40);
    }
    return grpc::Status::OK;
  }
  // 16 ranks x 2000 steps of a simulated job made 7.6 MB.
  static constexpr int kBigRollupRows = 100000;
};

class QueryClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }
  void TearDown() override { server_->Shutdown(); }

  std::string Address() const { return absl::StrCat("127.0.0.1:", port_); }

  SmallQueryService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// The rollups of a job of some size (16 ranks x 2000 steps) exceed gRPC's default 4 MiB
// limit on an answer; export and plot read them in one call.
TEST_F(QueryClientTest, ReceivesRollupsLargerThanGrpcsDefaultLimit) {
  absl::StatusOr<QueryClient> client = QueryClient::Create(Address(), absl::Seconds(30));
  ASSERT_TRUE(client.ok());
  absl::StatusOr<v1::GetRollupsResponse> rollups = client->GetRollups(v1::GetRollupsRequest());
  ASSERT_TRUE(rollups.ok()) << rollups.status();
  ASSERT_EQ(rollups->ranks_size(), 1);
  EXPECT_EQ(rollups->ranks(0).steps_size(), SmallQueryService::kBigRollupRows);
  EXPECT_GT(rollups->ByteSizeLong(), size_t{4} << 20);
}

TEST_F(QueryClientTest, ReturnsTheCollectorsAnswer) {
  absl::StatusOr<QueryClient> client = QueryClient::Create(Address(), absl::Seconds(5));
  ASSERT_TRUE(client.ok());
  absl::StatusOr<v1::ListJobsResponse> jobs = client->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->jobs_size(), 1);
  EXPECT_EQ(jobs->jobs(0).ranks(), 8u);
  absl::StatusOr<v1::ListRanksResponse> ranks = client->ListRanks("j1");
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  EXPECT_EQ(ranks->ranks(0).rank(), 3u);
}

TEST_F(QueryClientTest, KeepsTheCollectorsNotFoundMessage) {
  absl::StatusOr<QueryClient> client = QueryClient::Create(Address(), absl::Seconds(5));
  absl::StatusOr<v1::ListRanksResponse> ranks = client->ListRanks("nope");
  EXPECT_EQ(ranks.status(), absl::NotFoundError("job 'nope' not found"));
}

TEST_F(QueryClientTest, NamesTheServerWhenItDoesNotImplementAnRpc) {
  absl::StatusOr<QueryClient> client = QueryClient::Create(Address(), absl::Seconds(5));
  absl::StatusOr<v1::TimelineResponse> timeline = client->Timeline(v1::TimelineRequest());
  EXPECT_EQ(timeline.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(timeline.status().message(),
            absl::StrCat("the server at ", Address(),
                         " does not implement memtrace.v1.Query/Timeline (is it a memtrace "
                         "collector?)"));
}

TEST(QueryClientDownTest, SaysItCannotReachTheCollectorWhenNothingListens) {
  const std::string address = absl::StrCat("127.0.0.1:", ClosedLoopbackPort());
  absl::StatusOr<QueryClient> client = QueryClient::Create(address, absl::Seconds(5));
  ASSERT_TRUE(client.ok());
  absl::Time start = absl::Now();
  absl::StatusOr<v1::ListJobsResponse> jobs = client->ListJobs();
  EXPECT_EQ(jobs.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StartsWith(jobs.status().message(),
                               absl::StrCat("cannot reach collector at ", address, ": ")))
      << jobs.status();
  // A refused connection fails fast rather than waiting for the deadline.
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
}

TEST(QueryClientDownTest, RejectsAnEmptyAddress) {
  EXPECT_EQ(QueryClient::Create("", absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// gRPC would dial 34463, 65535 and 0 for these instead of refusing them.
TEST(QueryClientDownTest, RejectsAnAddressWithoutAValidPortNamingIt) {
  for (const char* address : {"127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1", "localhost:0"}) {
    absl::Status s = QueryClient::Create(address, absl::Seconds(1)).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_TRUE(absl::StartsWith(s.message(), absl::StrCat("--collector='", address, "': "))) << s;
  }
  for (const char* address : {"[::1]:7431", "collector.example:7431", "unix:/tmp/c.sock"}) {
    EXPECT_TRUE(QueryClient::Create(address, absl::Seconds(1)).ok()) << address;
  }
}

TEST(FromGrpcStatusTest, MapsDeadlineToNoAnswerWithTheTimeout) {
  absl::Status s = FromGrpcStatus(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "x"), "h:1",
                                  "ListJobs", absl::Seconds(3));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message(),
            "no answer to ListJobs from the collector at h:1 within 3s (busy with a large job, or "
            "unreachable: raise --timeout?)");
}

TEST(FromGrpcStatusTest, KeepsOtherCodesAndFillsAnEmptyMessage) {
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::INTERNAL, "rocksdb: io error"), "h:1",
                           "Timeline", absl::Seconds(3)),
            absl::InternalError("rocksdb: io error"));
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::INTERNAL, ""), "h:1", "Timeline",
                           absl::Seconds(3)),
            absl::InternalError("Timeline failed at h:1"));
}

}  // namespace
}  // namespace memtrace::cli
