#include "collector/server/collector_server.h"

#include "absl/strings/str_cat.h"
#include "collector/server/analysis_service.h"
#include "collector/server/ingest_service.h"
#include "collector/server/listen_probe.h"
#include "collector/server/parallel_for.h"
#include "collector/server/query_service.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "proto/connect/collector_address.h"

namespace memtrace::collector {

absl::StatusOr<std::unique_ptr<CollectorServer>> CollectorServer::Start(
    const CollectorServerOptions& options) {
  absl::StatusOr<std::pair<std::string, int>> host_port =
      connect::SplitHostPort("--listen", options.listen);
  if (!host_port.ok()) return host_port.status();
  if (absl::Status s = security::CheckListenPolicy(host_port->first, options.security,
                                                   options.allow_insecure);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      security::MakeServerCredentials(options.security);
  if (!credentials.ok()) return credentials.status();
  if (options.max_message_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_message_bytes ", options.max_message_bytes, " is not > 0"));
  }
  if (absl::Status s = ProbeListenAddress(options.listen, host_port->first, host_port->second);
      !s.ok()) {
    return s;
  }
  std::unique_ptr<CollectorServer> server(new CollectorServer());
  server->host_ = host_port->first;
  absl::StatusOr<std::unique_ptr<EventStore>> store = EventStore::Open(options.store);
  if (!store.ok()) return store.status();
  server->store_ = std::move(*store);
  server->ingest_ = std::make_unique<IngestService>(server->store_.get(), options.limits,
                                                   options.ingest_limits);
  server->query_ = std::make_unique<QueryService>(server->store_.get());
  server->analysis_ = std::make_unique<AnalysisService>(
      server->store_.get(),
      options.query_threads > 0 ? options.query_threads : DefaultQueryThreads());

  // Both are process-wide switches read by every ServerBuilder built afterwards.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, *credentials, &server->port_);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  // gRPC sets SO_REUSEPORT by default, which would let a second collector bind the same port and
  // silently split the agents between two stores.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Ping every connection each minute and drop one that does not answer within 20 s: an agent's
  // connection that died on the way (a NAT or load balancer dropping it) otherwise holds its
  // stream's state in memory, and its handler, until TCP gives up, about two hours by default.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20'000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  builder.RegisterService(server->ingest_.get());
  builder.RegisterService(server->query_.get());
  builder.RegisterService(server->analysis_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options.listen,
        options.security.tls() ? " (address in use or not local, or the TLS certificate and key "
                                 "are invalid or do not match?)"
                               : " (address in use or not local?)"));
  }
  grpc::HealthCheckServiceInterface* health = server->server_->GetHealthCheckService();
  if (health != nullptr) {
    health->SetServingStatus("memtrace.v1.Ingest", true);
    health->SetServingStatus("memtrace.v1.Query", true);
    health->SetServingStatus("memtrace.v1.Analysis", true);
    // A store that stopped taking writes (a full or failing disk) refuses every batch until a
    // restart: Ingest, and the server as a whole, are then not serving; queries still are.
    server->store_->OnWritesStopped([health] {
      health->SetServingStatus("memtrace.v1.Ingest", false);
      health->SetServingStatus("", false);
    });
  }
  return server;
}

CollectorServer::~CollectorServer() { Shutdown(absl::ZeroDuration()); }

std::string CollectorServer::address() const { return absl::StrCat(host_, ":", port_); }

void CollectorServer::Shutdown(absl::Duration grace) {
  absl::MutexLock lock(&mu_);
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  // The listener names the health service, which goes with server_: no write may reach it.
  store_->OnWritesStopped(nullptr);
  if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
    health->Shutdown();
  }
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
}

}  // namespace memtrace::collector
