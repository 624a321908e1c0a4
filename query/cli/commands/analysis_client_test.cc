#include "query/cli/commands/analysis_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "query/cli/commands/fake_analysis_server.h"

namespace memtrace::cli {
namespace {

int ClosedLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(AnalysisClientTest, AcceptsReportsLargerThanGrpcsDefaultLimit) {
  FakeAnalysisServer server;
  // ~8 MiB of groups: twice gRPC's default 4 MiB receive limit.
  for (int i = 0; i < 8192; ++i) {
    v1::LiveGroup* g = server.live_report.add_groups();
    g->set_tag(std::string(1000, 'a' + i % 26));
    g->set_bytes(i);
  }
  absl::StatusOr<AnalysisClient> client =
      AnalysisClient::Create(server.address(), absl::Seconds(10));
  ASSERT_TRUE(client.ok());
  absl::StatusOr<v1::LiveReport> report = client->Live(v1::LiveRequest());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->groups_size(), 8192);
  EXPECT_GT(report->ByteSizeLong(), size_t{4} << 20);
}

TEST(AnalysisClientTest, KeepsTheCollectorsOwnMessageForNotFound) {
  FakeAnalysisServer server;
  server.SetError(grpc::Status(grpc::StatusCode::NOT_FOUND, "job \"x\" is not stored"));
  absl::StatusOr<AnalysisClient> client =
      AnalysisClient::Create(server.address(), absl::Seconds(10));
  ASSERT_TRUE(client.ok());
  absl::StatusOr<v1::DivergenceReport> report = client->Diverged(v1::DivergedRequest());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(report.status().message(), "job \"x\" is not stored");
}

TEST(AnalysisClientTest, NamesTheCollectorWhenItCannotBeReached) {
  const std::string address = absl::StrCat("127.0.0.1:", ClosedLoopbackPort());
  absl::StatusOr<AnalysisClient> client = AnalysisClient::Create(address, absl::Seconds(2));
  ASSERT_TRUE(client.ok());
  absl::StatusOr<v1::GrowthReport> report = client->Growth(v1::GrowthRequest());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(report.status().message(), address)) << report.status();
}

TEST(AnalysisClientTest, UnimplementedNamesTheAnalysisService) {
  absl::Status s = FromAnalysisStatus(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""), "h:1",
                                      "Peak", absl::Seconds(1));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(s.message(), "memtrace.v1.Analysis/Peak")) << s;
}

TEST(AnalysisClientTest, EmptyAddressIsInvalid) {
  EXPECT_EQ(AnalysisClient::Create("", absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AnalysisClientTest, AddressWithoutAValidPortIsInvalid) {
  for (const char* address : {"127.0.0.1:99999", "127.0.0.1"}) {
    EXPECT_EQ(AnalysisClient::Create(address, absl::Seconds(1)).status().code(),
              absl::StatusCode::kInvalidArgument)
        << address;
  }
  EXPECT_TRUE(AnalysisClient::Create("[::1]:7431", absl::Seconds(1)).ok());
}

}  // namespace
}  // namespace memtrace::cli
