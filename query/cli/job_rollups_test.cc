// QueryClient::GetJobRollups against a real collector over loopback: a job too big for one answer
// comes back whole, a few ranks at a time, equal to the one answer that fits.
#include <chrono>
#include <memory>

#include "absl/strings/match.h"
#include "collector/server/server_test_util.h"
#include "gtest/gtest.h"
#include "query/cli/query_client.h"

namespace memtrace::cli {
namespace {

using collector::testing::BatchRequest;
using collector::testing::HelloRequest;
using collector::testing::Identity;

class JobRollupsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = collector::testing::StartCollector("job_rollups");
    ASSERT_NE(server_, nullptr);
    auto ingest = v1::Ingest::NewStub(collector::testing::Connect(*server_));
    for (int32_t rank = 0; rank < 5; ++rank) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
      auto stream = ingest->Stream(&ctx);
      v1::IngestAck ack;
      ASSERT_TRUE(stream->Write(HelloRequest(Identity("big", rank))) && stream->Read(&ack));
      ASSERT_TRUE(stream->Write(BatchRequest(1, 200)) && stream->Read(&ack));
      stream->WritesDone();
      ASSERT_TRUE(stream->Finish().ok());
    }
    absl::StatusOr<QueryClient> client = QueryClient::Create(server_->address(), absl::Seconds(10));
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::make_unique<QueryClient>(*std::move(client));
  }

  std::unique_ptr<collector::CollectorServer> server_;
  std::unique_ptr<QueryClient> client_;
};

TEST_F(JobRollupsTest, AJobTooBigForOneAnswerComesInPartsEqualToTheWhole) {
  absl::StatusOr<v1::GetRollupsResponse> whole =
      client_->GetJobRollups("big", v1::TIMELINE_AXIS_STEP);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->ranks_size(), 5);
  // A bound that takes a rank or two per answer: the collector refuses the whole job.
  const uint64_t bound = whole->ByteSizeLong() / 3;
  v1::GetRollupsRequest request;
  request.set_job_id("big");
  request.set_max_response_bytes(bound);
  EXPECT_EQ(client_->GetRollups(request).status().code(), absl::StatusCode::kResourceExhausted);
  absl::StatusOr<v1::GetRollupsResponse> parts =
      client_->GetJobRollups("big", v1::TIMELINE_AXIS_STEP, bound);
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(parts->SerializeAsString(), whole->SerializeAsString());
}

TEST_F(JobRollupsTest, ARankTooBigAloneIsReportedByName) {
  absl::StatusOr<v1::GetRollupsResponse> parts =
      client_->GetJobRollups("big", v1::TIMELINE_AXIS_STEP, 100);
  EXPECT_EQ(parts.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(parts.status().message(),
                                "the rollups of rank 0 of job \"big\" alone exceed "
                                "max_response_bytes (100 bytes)"))
      << parts.status();
}

}  // namespace
}  // namespace memtrace::cli
