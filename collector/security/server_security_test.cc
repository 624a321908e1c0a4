// The token check and TLS on real loopback gRPC servers, with the real client channel.
#include "collector/security/server_security.h"

#include <atomic>
#include <cstdlib>

#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "gtest/gtest.h"
#include "proto/connect/client_channel.h"
#include "proto/connect/test_certs.h"
#include "proto/memtrace/v1/query.grpc.pb.h"
#include "tests/util/test_dirs.h"

namespace memtrace::security {
namespace {

using connect::ClientSecurity;
using connect::CreateCollectorChannel;

constexpr char kToken[] = "0123456789abcdef-test-token";

// A real Query service that counts how often its handler ran.
class CountingQuery final : public v1::Query::Service {
 public:
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest*,
                        v1::ListJobsResponse* response) override {
    calls.fetch_add(1);
    response->add_jobs()->set_job_id("job-a");
    // Whether the "authorization" header reached the handler (the check consumes it).
    if (context->client_metadata().count("authorization") != 0) {
      response->add_jobs()->set_job_id("saw-authorization");
    }
    return grpc::Status::OK;
  }
  std::atomic<int> calls{0};
};

class Server {
 public:
  explicit Server(const ServerSecurityOptions& options) {
    grpc::EnableDefaultHealthCheckService(true);
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = MakeServerCredentials(options);
    EXPECT_TRUE(creds.ok()) << creds.status();
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", *creds, &port_);
    builder.RegisterService(&query_);
    server_ = builder.BuildAndStart();
    EXPECT_NE(port_, 0);
  }
  ~Server() { server_->Shutdown(); }

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int handler_calls() const { return query_.calls.load(); }

 private:
  CountingQuery query_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

grpc::Status ListJobs(const std::string& address, const ClientSecurity& security,
                      v1::ListJobsResponse* response = nullptr) {
  auto stub = v1::Query::NewStub(CreateCollectorChannel(address, security));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ListJobsResponse local;
  return stub->ListJobs(&context, v1::ListJobsRequest(), response ? response : &local);
}

// grpc.health.v1.Health/Check for the whole server, as raw bytes (no health proto is needed:
// an empty request; SERVING is field 1 = 1).
grpc::Status HealthCheck(const std::string& address, const ClientSecurity& security,
                         std::string* response_bytes) {
  grpc::GenericStub stub(CreateCollectorChannel(address, security));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::CompletionQueue cq;
  grpc::ByteBuffer request;
  grpc::Slice empty("", 0);
  request = grpc::ByteBuffer(&empty, 1);
  auto call = stub.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check", request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  EXPECT_TRUE(cq.Next(&tag, &ok));
  std::vector<grpc::Slice> slices;
  if (status.ok() && response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      response_bytes->append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return status;
}

const connect::testing::TestCerts& Certs() {
  static const connect::testing::TestCerts* certs = [] {
    absl::StatusOr<connect::testing::TestCerts> c =
        connect::testing::GenerateTestCerts(test_util::TmpPath("certs"));
    EXPECT_TRUE(c.ok()) << c.status();
    return new connect::testing::TestCerts(c.ok() ? *c : connect::testing::TestCerts());
  }();
  return *certs;
}

TEST(TokenTest, RightTokenReachesTheService) {
  Server server(ServerSecurityOptions{kToken});
  v1::ListJobsResponse response;
  grpc::Status s = ListJobs(server.address(), ClientSecurity{kToken}, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.jobs_size(), 1) << "the handler saw the token";
  EXPECT_EQ(response.jobs(0).job_id(), "job-a");
  EXPECT_EQ(server.handler_calls(), 1);
}

TEST(TokenTest, WrongTokenIsUnauthenticatedBeforeTheHandlerRuns) {
  Server server(ServerSecurityOptions{kToken});
  grpc::Status s = ListJobs(server.address(), ClientSecurity{"0123456789abcdef-test-tokeX"});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  EXPECT_NE(s.error_message().find("wrong bearer token"), std::string::npos);
  s = ListJobs(server.address(), ClientSecurity{"short"});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(server.handler_calls(), 0);
}

TEST(TokenTest, MissingTokenIsUnauthenticatedAndSaysHowToSetIt) {
  Server server(ServerSecurityOptions{kToken});
  grpc::Status s = ListJobs(server.address(), ClientSecurity{});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(s.error_message().find("MEMTRACE_TOKEN"), std::string::npos) << s.error_message();
  EXPECT_EQ(server.handler_calls(), 0);
}

TEST(TokenTest, HealthCheckStaysOpenWithoutToken) {
  Server server(ServerSecurityOptions{kToken});
  std::string bytes;
  grpc::Status s = HealthCheck(server.address(), ClientSecurity{}, &bytes);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));  // SERVING
}

TEST(TokenTest, NoTokenConfiguredLetsEveryCallThrough) {
  Server server(ServerSecurityOptions{});
  EXPECT_TRUE(ListJobs(server.address(), ClientSecurity{}).ok());
  EXPECT_TRUE(ListJobs(server.address(), ClientSecurity{"anything"}).ok());
}

ServerSecurityOptions TlsOptions(bool mutual) {
  ServerSecurityOptions o;
  o.token = kToken;
  o.tls_cert_pem = Certs().server_cert_pem;
  o.tls_key_pem = Certs().server_key_pem;
  if (mutual) o.tls_client_ca_pem = Certs().ca_pem;
  return o;
}

TEST(TlsTest, TlsClientWithTokenPasses) {
  Server server(TlsOptions(false));
  ClientSecurity client{kToken, Certs().ca_pem};
  grpc::Status s = ListJobs(server.address(), client);
  EXPECT_TRUE(s.ok()) << s.error_message();
  client.token = "wrong-token";
  EXPECT_EQ(ListJobs(server.address(), client).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(server.handler_calls(), 1);
}

TEST(TlsTest, PlaintextClientToTlsPortIsRefused) {
  Server server(TlsOptions(false));
  grpc::Status s = ListJobs(server.address(), ClientSecurity{kToken});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_EQ(server.handler_calls(), 0);
}

TEST(TlsTest, ClientTrustingAnotherCaIsRefused) {
  Server server(TlsOptions(false));
  ClientSecurity client{kToken, Certs().rogue_cert_pem};  // a self-signed cert as the only CA
  EXPECT_EQ(ListJobs(server.address(), client).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(server.handler_calls(), 0);
}

TEST(TlsTest, MutualTlsNeedsAClientCertificateFromTheConfiguredCa) {
  Server server(TlsOptions(true));
  ClientSecurity client{kToken, Certs().ca_pem};
  EXPECT_EQ(ListJobs(server.address(), client).error_code(), grpc::StatusCode::UNAVAILABLE);
  client.tls_cert_pem = Certs().rogue_cert_pem;
  client.tls_key_pem = Certs().rogue_key_pem;
  EXPECT_EQ(ListJobs(server.address(), client).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(server.handler_calls(), 0);
  client.tls_cert_pem = Certs().client_cert_pem;
  client.tls_key_pem = Certs().client_key_pem;
  grpc::Status s = ListJobs(server.address(), client);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(server.handler_calls(), 1);
}

TEST(ListenPolicyTest, LoopbackNamesAreRecognized) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "localhost", "LOCALHOST", "[::1]", "::1"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host : {"0.0.0.0", "[::]", "10.0.0.1", "128.0.0.1", "127.0.0", "host-a",
                           "127.0.0.1.example.com", "[::2]", ""}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

TEST(ListenPolicyTest, RemoteListeningNeedsTlsOrInsecure) {
  absl::Status s = CheckListenPolicy("0.0.0.0", ServerSecurityOptions{}, false);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("--tls_cert"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--insecure"), std::string::npos) << s;
  EXPECT_TRUE(CheckListenPolicy("0.0.0.0", ServerSecurityOptions{}, true).ok());
  ServerSecurityOptions tls;
  tls.tls_cert_pem = "cert";
  tls.tls_key_pem = "key";
  EXPECT_TRUE(CheckListenPolicy("0.0.0.0", tls, false).ok());
  EXPECT_TRUE(CheckListenPolicy("127.0.0.1", ServerSecurityOptions{}, false).ok());
}

TEST(ListenPolicyTest, HalfConfiguredTlsIsRefused) {
  ServerSecurityOptions cert_only;
  cert_only.tls_cert_pem = "cert";
  EXPECT_TRUE(absl::IsInvalidArgument(CheckListenPolicy("127.0.0.1", cert_only, false)));
  ServerSecurityOptions ca_only;
  ca_only.tls_client_ca_pem = "ca";
  EXPECT_TRUE(absl::IsInvalidArgument(CheckListenPolicy("127.0.0.1", ca_only, true)));
}

TEST(BearerTokenTest, MatchesOnlyTheExactBearerToken) {
  EXPECT_TRUE(BearerTokenMatches("Bearer abc", "abc"));
  EXPECT_FALSE(BearerTokenMatches("Bearer abcd", "abc"));
  EXPECT_FALSE(BearerTokenMatches("Bearer ab", "abc"));
  EXPECT_FALSE(BearerTokenMatches("bearer abc", "abc"));
  EXPECT_FALSE(BearerTokenMatches("abc", "abc"));
  EXPECT_FALSE(BearerTokenMatches("Bearer ", ""));
}

}  // namespace
}  // namespace memtrace::security
