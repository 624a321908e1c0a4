#include "proto/connect/client_channel.h"

#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/client_interceptor.h"
#include "proto/connect/secret_file.h"

namespace memtrace::connect {

namespace {

// Adds the authorization header before a call's initial metadata goes out.
class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* header) : header_(header) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;  // owned by the factory, which the channel keeps alive
};

class TokenInterceptorFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(const std::string& token) : header_("Bearer " + token) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    // gRPC takes ownership of the interceptor and deletes it when the call ends.
    return new TokenInterceptor(&header_);  // NOLINT: ownership passes to gRPC
  }

 private:
  const std::string header_;
};

const char* Lookup(const EnvLookup& env, const char* name) {
  const char* v = env ? env(name) : std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

absl::Status Prefix(const absl::Status& s, absl::string_view variable) {
  return absl::Status(s.code(), absl::StrCat(variable, ": ", s.message()));
}

}  // namespace

absl::StatusOr<ClientSecurity> ClientSecurityFromEnv(const EnvLookup& env) {
  ClientSecurity out;
  if (const char* token = Lookup(env, "MEMTRACE_TOKEN")) {
    if (absl::Status s = CheckToken("MEMTRACE_TOKEN", token); !s.ok()) return s;
    out.token = token;
  } else if (const char* file = Lookup(env, "MEMTRACE_TOKEN_FILE")) {
    absl::StatusOr<std::string> token = ReadTokenFile(file);
    if (!token.ok()) return Prefix(token.status(), "MEMTRACE_TOKEN_FILE");
    out.token = *std::move(token);
  }
  const char* ca = Lookup(env, "MEMTRACE_TLS_CA");
  const char* cert = Lookup(env, "MEMTRACE_TLS_CERT");
  const char* key = Lookup(env, "MEMTRACE_TLS_KEY");
  if (ca == nullptr && (cert != nullptr || key != nullptr)) {
    return absl::InvalidArgumentError(
        "MEMTRACE_TLS_CERT/MEMTRACE_TLS_KEY need MEMTRACE_TLS_CA (the CA of the collector's "
        "certificate) to turn TLS on");
  }
  if ((cert == nullptr) != (key == nullptr)) {
    return absl::InvalidArgumentError(
        "mutual TLS needs both MEMTRACE_TLS_CERT and MEMTRACE_TLS_KEY (only one is set)");
  }
  if (ca != nullptr) {
    absl::StatusOr<std::string> pem = ReadPemFile("MEMTRACE_TLS_CA", ca);
    if (!pem.ok()) return pem.status();
    out.tls_ca_pem = *std::move(pem);
  }
  if (cert != nullptr) {
    absl::StatusOr<std::string> cert_pem = ReadPemFile("MEMTRACE_TLS_CERT", cert);
    if (!cert_pem.ok()) return cert_pem.status();
    absl::StatusOr<std::string> key_pem = ReadPemFile("MEMTRACE_TLS_KEY", key);
    if (!key_pem.ok()) return key_pem.status();
    out.tls_cert_pem = *std::move(cert_pem);
    out.tls_key_pem = *std::move(key_pem);
  }
  if (const char* name = Lookup(env, "MEMTRACE_TLS_SERVER_NAME")) out.tls_server_name = name;
  return out;
}

std::shared_ptr<grpc::Channel> CreateCollectorChannel(const std::string& target,
                                                      const ClientSecurity& security,
                                                      grpc::ChannelArguments args) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (security.tls()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = security.tls_ca_pem;
    ssl.pem_private_key = security.tls_key_pem;
    ssl.pem_cert_chain = security.tls_cert_pem;
    credentials = grpc::SslCredentials(ssl);
    if (!security.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(security.tls_server_name);
    }
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  if (security.token.empty()) return grpc::CreateCustomChannel(target, credentials, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  factories.push_back(std::make_unique<TokenInterceptorFactory>(security.token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, credentials, args,
                                                                 std::move(factories));
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateCollectorChannelFromEnv(
    const std::string& target, grpc::ChannelArguments args) {
  absl::StatusOr<ClientSecurity> security = ClientSecurityFromEnv();
  if (!security.ok()) return security.status();
  return CreateCollectorChannel(target, *security, std::move(args));
}

CollectorChannelFactory ChannelFactoryFor(ClientSecurity security) {
  return [security = std::move(security)](const std::string& target,
                                          const grpc::ChannelArguments& args) {
    return CreateCollectorChannel(target, security, args);
  };
}

}  // namespace memtrace::connect
