#include "proto/connect/client_channel.h"

#include <cstdlib>
#include <fstream>
#include <map>

#include "gtest/gtest.h"
#include "proto/connect/test_certs.h"
#include "tests/util/test_dirs.h"

namespace memtrace::connect {
namespace {

class FakeEnv {
 public:
  FakeEnv& Set(const std::string& name, const std::string& value) {
    vars_[name] = value;
    return *this;
  }
  EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars_.find(name);
      return it == vars_.end() ? nullptr : it->second.c_str();
    };
  }

 private:
  std::map<std::string, std::string> vars_;
};

std::string TmpFile(const std::string& name, const std::string& contents) {
  const std::string path = test_util::TmpPath(name);
  std::ofstream(path, std::ios::trunc) << contents;
  return path;
}

TEST(ClientSecurityFromEnvTest, NothingSetMeansPlaintextWithoutToken) {
  FakeEnv env;
  absl::StatusOr<ClientSecurity> s = ClientSecurityFromEnv(env.lookup());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->token.empty());
  EXPECT_FALSE(s->tls());
}

TEST(ClientSecurityFromEnvTest, TokenFromVariableWinsOverFile) {
  FakeEnv env;
  env.Set("MEMTRACE_TOKEN", "from-env").Set("MEMTRACE_TOKEN_FILE", TmpFile("tok", "from-file\n"));
  EXPECT_EQ(ClientSecurityFromEnv(env.lookup())->token, "from-env");
  FakeEnv file_only;
  file_only.Set("MEMTRACE_TOKEN_FILE", TmpFile("tok2", "from-file\n"));
  EXPECT_EQ(ClientSecurityFromEnv(file_only.lookup())->token, "from-file");
}

TEST(ClientSecurityFromEnvTest, UnreadableTokenFileNamesTheVariable) {
  FakeEnv env;
  env.Set("MEMTRACE_TOKEN_FILE", "/nonexistent/tok");
  absl::StatusOr<ClientSecurity> s = ClientSecurityFromEnv(env.lookup());
  EXPECT_TRUE(absl::IsNotFound(s.status())) << s.status();
  EXPECT_NE(s.status().message().find("MEMTRACE_TOKEN_FILE"), std::string::npos);
}

TEST(ClientSecurityFromEnvTest, TlsFilesAreRead) {
  absl::StatusOr<testing::TestCerts> certs =
      testing::GenerateTestCerts(test_util::TmpPath("certs"));
  ASSERT_TRUE(certs.ok()) << certs.status();
  FakeEnv env;
  env.Set("MEMTRACE_TLS_CA", certs->ca_path)
      .Set("MEMTRACE_TLS_CERT", certs->client_cert_path)
      .Set("MEMTRACE_TLS_KEY", certs->client_key_path)
      .Set("MEMTRACE_TLS_SERVER_NAME", "localhost");
  absl::StatusOr<ClientSecurity> s = ClientSecurityFromEnv(env.lookup());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->tls());
  EXPECT_EQ(s->tls_ca_pem, certs->ca_pem);
  EXPECT_EQ(s->tls_cert_pem, certs->client_cert_pem);
  EXPECT_EQ(s->tls_key_pem, certs->client_key_pem);
  EXPECT_EQ(s->tls_server_name, "localhost");
}

TEST(ClientSecurityFromEnvTest, HalfConfiguredTlsIsRefused) {
  const std::string pem = TmpFile("x.pem", "-----BEGIN CERTIFICATE-----\n");
  FakeEnv cert_without_ca;
  cert_without_ca.Set("MEMTRACE_TLS_CERT", pem).Set("MEMTRACE_TLS_KEY", pem);
  EXPECT_TRUE(absl::IsInvalidArgument(ClientSecurityFromEnv(cert_without_ca.lookup()).status()));
  FakeEnv cert_without_key;
  cert_without_key.Set("MEMTRACE_TLS_CA", pem).Set("MEMTRACE_TLS_CERT", pem);
  EXPECT_TRUE(absl::IsInvalidArgument(ClientSecurityFromEnv(cert_without_key.lookup()).status()));
  FakeEnv not_pem;
  not_pem.Set("MEMTRACE_TLS_CA", TmpFile("der", "\x30\x82"));
  absl::StatusOr<ClientSecurity> s = ClientSecurityFromEnv(not_pem.lookup());
  EXPECT_TRUE(absl::IsInvalidArgument(s.status()));
  EXPECT_NE(s.status().message().find("MEMTRACE_TLS_CA"), std::string::npos) << s.status();
}

TEST(CreateCollectorChannelTest, ChannelIsCreatedLazilyForEveryConfiguration) {
  // Nothing listens here; creating the channel must not contact anything or fail.
  for (const ClientSecurity& s :
       {ClientSecurity{}, ClientSecurity{"tok"}, ClientSecurity{"tok", "-----BEGIN X-----"}}) {
    std::shared_ptr<grpc::Channel> channel = CreateCollectorChannel("127.0.0.1:1", s);
    ASSERT_NE(channel, nullptr);
    EXPECT_EQ(channel->GetState(false), GRPC_CHANNEL_IDLE);
  }
}

}  // namespace
}  // namespace memtrace::connect
