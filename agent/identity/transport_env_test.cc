#include "agent/identity/transport_env.h"

#include <map>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace memtrace {
namespace {

absl::StatusOr<TransportOptions> FromMap(std::map<std::string, std::string> vars) {
  vars.emplace("MEMTRACE_JOB_ID", "job-1");
  return TransportOptionsFromEnvironment(MapEnvironment(std::move(vars)), ProcessFacts{"h", 7});
}

TEST(TransportEnvTest, DefaultsWhenOnlyAJobIdIsSet) {
  absl::StatusOr<TransportOptions> options = FromMap({});
  ASSERT_TRUE(options.ok()) << options.status();
  TransportOptions defaults;
  EXPECT_EQ(options->collector_address, "127.0.0.1:7431");
  EXPECT_EQ(options->queue_capacity, defaults.queue_capacity);
  EXPECT_EQ(options->max_batch_events, defaults.max_batch_events);
  EXPECT_EQ(options->max_unacked_bytes, defaults.max_unacked_bytes);
  EXPECT_EQ(options->identity.job_id(), "job-1");
  EXPECT_EQ(options->identity.host(), "h");
  EXPECT_EQ(options->identity.pid(), 7u);
  EXPECT_TRUE(options->spool_dir.empty());
}

TEST(TransportEnvTest, ReadsEveryMemtraceSetting) {
  absl::StatusOr<TransportOptions> options = FromMap({{"MEMTRACE_COLLECTOR", "collector:9000"},
                                                      {"MEMTRACE_QUEUE_EVENTS", "1000"},
                                                      {"MEMTRACE_BATCH_EVENTS", "512"},
                                                      {"MEMTRACE_BATCH_DELAY_MS", "20"},
                                                      {"MEMTRACE_UNACKED_MAX_BYTES", "1048576"},
                                                      {"MEMTRACE_SPOOL_DIR", "/tmp/spool"},
                                                      {"MEMTRACE_SPOOL_MAX_BYTES", "99"}});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->collector_address, "collector:9000");
  EXPECT_EQ(options->queue_capacity, 1000u);
  EXPECT_EQ(options->max_batch_events, 512u);
  EXPECT_EQ(options->max_batch_delay, absl::Milliseconds(20));
  EXPECT_EQ(options->max_unacked_bytes, 1048576u);
  EXPECT_EQ(options->spool_dir, "/tmp/spool");
  EXPECT_EQ(options->spool_max_bytes, 99u);
}

TEST(TransportEnvTest, AcceptsIpv6AndSchemedTargets) {
  for (const char* address : {"[::1]:7431", "unix:/tmp/memtrace.sock", "dns:///c.example:1"}) {
    absl::StatusOr<TransportOptions> options = FromMap({{"MEMTRACE_COLLECTOR", address}});
    ASSERT_TRUE(options.ok()) << address << ": " << options.status();
    EXPECT_EQ(options->collector_address, address);
  }
}

TEST(TransportEnvTest, RejectsBadAddressesNamingTheValue) {
  for (const char* address : {"collector", "collector:0", "collector:70000", "host:12x", "a b:1"}) {
    absl::StatusOr<TransportOptions> options = FromMap({{"MEMTRACE_COLLECTOR", address}});
    ASSERT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_NE(options.status().message().find(std::string("MEMTRACE_COLLECTOR='") + address),
              std::string::npos)
        << options.status();
  }
}

TEST(TransportEnvTest, RejectsBadCounts) {
  for (const auto& [name, value] : std::map<std::string, std::string>{
           {"MEMTRACE_QUEUE_EVENTS", "0"},
           {"MEMTRACE_BATCH_EVENTS", "65537"},
           {"MEMTRACE_BATCH_DELAY_MS", "soon"},
           {"MEMTRACE_UNACKED_MAX_BYTES", "-5"}}) {
    absl::StatusOr<TransportOptions> options = FromMap({{name, value}});
    ASSERT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(options.status().message().find(name + "='" + value + "'"), std::string::npos)
        << options.status();
  }
}

TEST(TransportEnvTest, NoSecurityVariablesMeansAPlaintextChannel) {
  absl::StatusOr<TransportOptions> options = FromMap({});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_FALSE(options->channel_factory);
}

TEST(TransportEnvTest, ATokenSetsAChannelFactory) {
  absl::StatusOr<TransportOptions> options = FromMap({{"MEMTRACE_TOKEN", "s3cret"}});
  ASSERT_TRUE(options.ok()) << options.status();
  ASSERT_TRUE(options->channel_factory);
  EXPECT_NE(options->channel_factory("127.0.0.1:1", grpc::ChannelArguments()), nullptr);
}

TEST(TransportEnvTest, BadSecuritySettingsAreErrorsNamingTheVariable) {
  absl::StatusOr<TransportOptions> cert_only = FromMap({{"MEMTRACE_TLS_CERT", "/x.pem"}});
  ASSERT_EQ(cert_only.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cert_only.status().message().find("MEMTRACE_TLS_CA"), std::string::npos);
  absl::StatusOr<TransportOptions> no_file =
      FromMap({{"MEMTRACE_TOKEN_FILE", "/nonexistent/memtrace-token"}});
  ASSERT_FALSE(no_file.ok());
  EXPECT_NE(no_file.status().message().find("MEMTRACE_TOKEN_FILE"), std::string::npos)
      << no_file.status();
}

TEST(TransportEnvTest, IdentityErrorsPassThrough) {
  absl::StatusOr<TransportOptions> options = FromMap({{"RANK", "abc"}});
  ASSERT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(options.status().message().find("RANK='abc'"), std::string::npos);
}

}  // namespace
}  // namespace memtrace
