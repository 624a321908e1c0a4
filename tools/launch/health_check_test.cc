#include "tools/launch/health_check.h"

#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "gtest/gtest.h"

namespace memtrace::launch {
namespace {

struct Server {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
};

Server StartServer(bool health) {
  grpc::EnableDefaultHealthCheckService(health);
  Server s;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &s.port);
  s.server = builder.BuildAndStart();
  return s;
}

TEST(CheckCollectorTest, ServingIngestIsOk) {
  Server s = StartServer(true);
  s.server->GetHealthCheckService()->SetServingStatus("memtrace.v1.Ingest", true);
  absl::Status status = CheckCollector(s.address(), absl::Seconds(5));
  EXPECT_TRUE(status.ok()) << status;
}

TEST(CheckCollectorTest, NotServingIsFailedPrecondition) {
  Server s = StartServer(true);
  s.server->GetHealthCheckService()->SetServingStatus("memtrace.v1.Ingest", false);
  absl::Status status = CheckCollector(s.address(), absl::Seconds(5));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  // What a collector whose store stopped taking writes says (collector_server.cc): why, not
  // "health status 2".
  EXPECT_NE(status.message().find(" takes no events: memtrace.v1.Ingest is NOT_SERVING (its "
                                  "store stopped taking writes"),
            std::string::npos)
      << status;
}

TEST(CheckCollectorTest, ServerWithoutHealthServiceIsNotTakenForACollector) {
  Server s = StartServer(false);
  absl::Status status = CheckCollector(s.address(), absl::Seconds(5));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find(s.address()), std::string::npos);
}

TEST(CheckCollectorTest, NothingListeningIsUnavailableWithinTheTimeout) {
  Server s = StartServer(true);
  std::string address = s.address();
  s.server->Shutdown();
  s.server.reset();
  absl::Time start = absl::Now();
  absl::Status status = CheckCollector(address, absl::Milliseconds(500));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find(address), std::string::npos);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

TEST(CheckCollectorTest, UnresolvableHostIsUnavailable) {
  absl::Status status = CheckCollector("no-such-host.invalid:7431", absl::Milliseconds(500));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
}

}  // namespace
}  // namespace memtrace::launch
