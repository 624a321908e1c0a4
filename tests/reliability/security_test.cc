// TLS and bearer tokens end to end with the real binaries: the collector (TLS, mutual TLS,
// token from a file or the environment, listen policy), reliability-agent (the real Transport
// with MEMTRACE_TOKEN / MEMTRACE_TLS_*) and the memtrace CLI. Certificates are generated with
// openssl when the test runs.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proto/connect/test_certs.h"
#include "proto/memtrace/v1/ingest.pb.h"
#include "tests/reliability/harness.h"

namespace memtrace::reliability {
namespace {

constexpr char kToken[] = "c0ffee-7e57-70k3n-5ecre7";
constexpr char kMemtraceBin[] = "query/cli/memtrace";

const connect::testing::TestCerts& Certs() {
  static const connect::testing::TestCerts* certs = [] {
    auto c = connect::testing::GenerateTestCerts(FreshDir("certs"));
    EXPECT_TRUE(c.ok()) << c.status();
    return new connect::testing::TestCerts(c.ok() ? *c : connect::testing::TestCerts());
  }();
  return *certs;
}

std::string TokenFile() {
  const std::string path = FreshDir("token") + "/token";
  std::ofstream(path) << kToken << "\n";
  return path;
}

std::string Hello(const std::string& job) {
  v1::IngestRequest r;
  r.mutable_hello()->mutable_identity()->set_job_id(job);
  return r.SerializeAsString();
}

// Runs the agent for `events` events with `extra` settings; returns its exit code.
int RunAgent(const CollectorProcess& collector, const std::string& job, const Env& extra,
             std::string* stderr_text = nullptr, uint64_t events = 10000) {
  Env env = AgentEnv(collector.address(), job, 0, 1);
  env.insert(env.end(), extra.begin(), extra.end());
  auto agent = Child::Spawn({kAgentBin, absl::StrCat("--events=", events),
                             "--flush_timeout_ms=2000",
                             "--shutdown_timeout_ms=500"},
                            env, "sec-agent-" + job);
  EXPECT_TRUE(agent.ok());
  const int code = (*agent)->Wait(absl::Seconds(30));
  if (stderr_text != nullptr) *stderr_text = (*agent)->Stderr();
  return code;
}

class TlsTokenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    collector_ = std::make_unique<CollectorProcess>(
        FreshDir("tls-db"), std::vector<std::string>{"--tls_cert", Certs().server_cert_path,
                                                     "--tls_key", Certs().server_key_path,
                                                     "--token_file", TokenFile()});
    collector_->set_client_security(tls_);
    ASSERT_TRUE(collector_->Start(0).ok());
  }

  const connect::ClientSecurity tls_{"", Certs().ca_pem};
  const connect::ClientSecurity right_{kToken, Certs().ca_pem};
  std::unique_ptr<CollectorProcess> collector_;
};

TEST_F(TlsTokenTest, AgentWithTheRightTokenOverTlsDelivers) {
  EXPECT_EQ(RunAgent(*collector_, "tls-job",
                     {{"MEMTRACE_TOKEN", kToken}, {"MEMTRACE_TLS_CA", Certs().ca_path}}),
            0);
  absl::StatusOr<v1::ListRanksResponse> ranks = ListRanks(collector_->address(), "tls-job", right_);
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  ASSERT_EQ(ranks->ranks_size(), 1);
  EXPECT_EQ(ranks->ranks(0).events_stored(), 10000u);
  // The token may come from a file too.
  EXPECT_EQ(RunAgent(*collector_, "tls-job-file",
                     {{"MEMTRACE_TOKEN_FILE", TokenFile()}, {"MEMTRACE_TLS_CA", Certs().ca_path}}),
            0);
}

TEST_F(TlsTokenTest, WrongOrMissingTokenIsRefusedAndNothingIsStored) {
  std::string err;
  EXPECT_EQ(RunAgent(*collector_, "wrong-token-job",
                     {{"MEMTRACE_TOKEN", "not-the-token"}, {"MEMTRACE_TLS_CA", Certs().ca_path}},
                     &err),
            3);
  EXPECT_TRUE(absl::StrContains(err, "wrong bearer token")) << err;
  EXPECT_EQ(RunAgent(*collector_, "no-token-job", {{"MEMTRACE_TLS_CA", Certs().ca_path}}, &err),
            3);
  EXPECT_TRUE(absl::StrContains(err, "missing bearer token")) << err;
  for (const char* job : {"wrong-token-job", "no-token-job"}) {
    EXPECT_TRUE(absl::IsNotFound(ListRanks(collector_->address(), job, right_).status())) << job;
  }
  // Queries are checked the same way.
  EXPECT_TRUE(absl::IsUnauthenticated(ListJobs(collector_->address(), tls_).status()));
  EXPECT_TRUE(absl::IsUnauthenticated(
      ListJobs(collector_->address(), connect::ClientSecurity{"wrong", Certs().ca_pem}).status()));
  EXPECT_TRUE(ListJobs(collector_->address(), right_).ok());
  grpc::Status raw = RawIngest(collector_->address(), {Hello("raw-wrong")}, nullptr,
                               connect::ClientSecurity{"wrong", Certs().ca_pem});
  EXPECT_EQ(raw.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Healthy(collector_->address(), tls_)) << "health stays open without a token";
}

TEST_F(TlsTokenTest, PlaintextToTheTlsPortIsRefused) {
  grpc::Status raw =
      RawIngest(collector_->address(), {Hello("plaintext-job")}, nullptr, {kToken});
  EXPECT_EQ(raw.error_code(), grpc::StatusCode::UNAVAILABLE) << raw.error_message();
  std::string err;
  EXPECT_EQ(RunAgent(*collector_, "plaintext-job", {{"MEMTRACE_TOKEN", kToken}}, &err), 3);
  EXPECT_TRUE(absl::IsNotFound(ListRanks(collector_->address(), "plaintext-job", right_).status()));
  EXPECT_FALSE(Healthy(collector_->address())) << "a plaintext health check reached a TLS port";
  EXPECT_TRUE(collector_->Running());
}

TEST_F(TlsTokenTest, CliSendsTokenAndUsesTls) {
  ASSERT_EQ(RunAgent(*collector_, "cli-job",
                     {{"MEMTRACE_TOKEN", kToken}, {"MEMTRACE_TLS_CA", Certs().ca_path}}),
            0);
  auto cli = Child::Spawn({kMemtraceBin, "jobs", "--collector", collector_->address()},
                          {{"MEMTRACE_TOKEN", kToken}, {"MEMTRACE_TLS_CA", Certs().ca_path}},
                          "cli-right");
  ASSERT_TRUE(cli.ok());
  EXPECT_EQ((*cli)->Wait(absl::Seconds(20)), 0) << (*cli)->Stderr();
  EXPECT_TRUE(absl::StrContains((*cli)->Stdout(), "cli-job")) << (*cli)->Stdout();
  auto no_token = Child::Spawn({kMemtraceBin, "jobs", "--collector", collector_->address()},
                               {{"MEMTRACE_TLS_CA", Certs().ca_path}}, "cli-no-token");
  ASSERT_TRUE(no_token.ok());
  EXPECT_NE((*no_token)->Wait(absl::Seconds(20)), 0);
  EXPECT_TRUE(absl::StrContains((*no_token)->Stderr(), "bearer token")) << (*no_token)->Stderr();
  auto plaintext = Child::Spawn({kMemtraceBin, "jobs", "--collector", collector_->address()},
                                {{"MEMTRACE_TOKEN", kToken}}, "cli-plaintext");
  ASSERT_TRUE(plaintext.ok());
  EXPECT_NE((*plaintext)->Wait(absl::Seconds(20)), 0);
}

// import, the raw export and run's health check used plaintext channels without the token:
// against this collector they failed (after the drain timeout, or calling it unreachable).
TEST_F(TlsTokenTest, ImportExportAndRunUseTheTokenAndTlsToo) {
  const Env secure = {{"MEMTRACE_TOKEN", kToken}, {"MEMTRACE_TLS_CA", Certs().ca_path}};
  // A Kineto trace of one CUDA allocation and its free.
  const std::string trace = FreshDir("sec-trace") + "/rank0.json";
  std::ofstream(trace)
      << R"({"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": [)"
      << R"({"ph": "i", "name": "[memory]", "pid": 7, "tid": 7, "ts": 1000, "args": )"
      << R"({"Device Type": 1, "Device Id": 0, "Addr": 4096, "Bytes": 1024,)"
      << R"( "Total Allocated": 1024, "Total Reserved": 2097152}},)"
      << R"({"ph": "i", "name": "[memory]", "pid": 7, "tid": 7, "ts": 2000, "args": )"
      << R"({"Device Type": 1, "Device Id": 0, "Addr": 4096, "Bytes": -1024,)"
      << R"( "Total Allocated": 0, "Total Reserved": 2097152}}]})";
  auto import = Child::Spawn({kMemtraceBin, "import", "--job", "sec-import", "--format",
                              "kineto", "--drain-timeout", "5s", "--collector",
                              collector_->address(), trace},
                             secure, "sec-import");
  ASSERT_TRUE(import.ok());
  EXPECT_EQ((*import)->Wait(absl::Seconds(30)), 0) << (*import)->Stderr();

  const std::string out = FreshDir("sec-export") + "/trace.json";
  auto exported = Child::Spawn({kMemtraceBin, "export", "--job", "sec-import", "--format",
                                "perfetto", "-o", out, "--collector", collector_->address()},
                               secure, "sec-export");
  ASSERT_TRUE(exported.ok());
  EXPECT_EQ((*exported)->Wait(absl::Seconds(30)), 0) << (*exported)->Stderr();
  std::ifstream written(out);
  std::string json((std::istreambuf_iterator<char>(written)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(absl::StrContains(json, "traceEvents")) << json.substr(0, 200);

  auto run = Child::Spawn({kMemtraceBin, "run", "--no_agent", "--collector",
                           collector_->address(), "--timeout", "5s", "--", "true"},
                          secure, "sec-run");
  ASSERT_TRUE(run.ok());
  EXPECT_EQ((*run)->Wait(absl::Seconds(30)), 0) << (*run)->Stderr();
  EXPECT_FALSE(absl::StrContains((*run)->Stderr(), "cannot reach")) << (*run)->Stderr();
}

TEST(MutualTlsTest, AgentsNeedAClientCertificateFromTheConfiguredCa) {
  CollectorProcess collector(FreshDir("mtls-db"),
                             {"--tls_cert", Certs().server_cert_path, "--tls_key",
                              Certs().server_key_path, "--tls_client_ca", Certs().ca_path});
  connect::ClientSecurity client{"", Certs().ca_pem, Certs().client_cert_pem,
                                 Certs().client_key_pem};
  collector.set_client_security(client);
  ASSERT_TRUE(collector.Start(0).ok());
  EXPECT_EQ(RunAgent(collector, "mtls-nocert", {{"MEMTRACE_TLS_CA", Certs().ca_path}}), 3);
  EXPECT_EQ(RunAgent(collector, "mtls-job",
                     {{"MEMTRACE_TLS_CA", Certs().ca_path},
                      {"MEMTRACE_TLS_CERT", Certs().client_cert_path},
                      {"MEMTRACE_TLS_KEY", Certs().client_key_path}}),
            0);
  absl::StatusOr<v1::ListJobsResponse> jobs = ListJobs(collector.address(), client);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->jobs_size(), 1);
  EXPECT_EQ(jobs->jobs(0).job_id(), "mtls-job");
}

TEST(TokenFromEnvironmentTest, CollectorReadsMemtraceToken) {
  CollectorProcess collector(FreshDir("env-token-db"), {}, {{"MEMTRACE_TOKEN", kToken}});
  ASSERT_TRUE(collector.Start(0).ok());
  EXPECT_TRUE(absl::IsUnauthenticated(ListJobs(collector.address()).status()));
  EXPECT_TRUE(ListJobs(collector.address(), {kToken}).ok());
  EXPECT_EQ(RunAgent(collector, "env-token-job", {{"MEMTRACE_TOKEN", kToken}}), 0);
}

int RunCollector(const std::vector<std::string>& flags, std::string* err) {
  std::vector<std::string> argv = {kCollectorBin, "--data", FreshDir("policy-db")};
  argv.insert(argv.end(), flags.begin(), flags.end());
  auto c = Child::Spawn(argv, {}, "policy");
  EXPECT_TRUE(c.ok());
  absl::SleepFor(absl::Milliseconds(700));
  const bool running = (*c)->Running();
  if (running) (*c)->Signal(SIGTERM);
  const int code = (*c)->Wait(absl::Seconds(10));
  *err = (*c)->Stderr();
  return running ? -100 - code : code;  // -100: was serving (then stopped with `code`)
}

TEST(ListenPolicyTest, NonLoopbackNeedsTlsOrInsecure) {
  std::string err;
  EXPECT_EQ(RunCollector({"--listen", "0.0.0.0:0"}, &err), 2);
  EXPECT_TRUE(absl::StrContains(err, "needs TLS")) << err;
  EXPECT_TRUE(absl::StrContains(err, "--insecure")) << err;
  EXPECT_EQ(RunCollector({"--listen", "0.0.0.0:0", "--insecure"}, &err), -100) << err;
  EXPECT_EQ(RunCollector({"--listen", "0.0.0.0:0", "--tls_cert", Certs().server_cert_path,
                          "--tls_key", Certs().server_key_path},
                         &err),
            -100)
      << err;
  EXPECT_EQ(RunCollector({"--tls_cert", Certs().server_cert_path}, &err), 2);
  EXPECT_TRUE(absl::StrContains(err, "--tls_key")) << err;
  EXPECT_EQ(RunCollector({"--token_file", "/nonexistent/token"}, &err), 2);
  EXPECT_TRUE(absl::StrContains(err, "/nonexistent/token")) << err;
  // A key that does not match the certificate: refused at startup, not at the first client.
  EXPECT_EQ(RunCollector({"--tls_cert", Certs().server_cert_path, "--tls_key",
                          Certs().client_key_path},
                         &err),
            2)
      << err;
}

}  // namespace
}  // namespace memtrace::reliability
