// The collector as an embeddable object: the store, the Ingest, Query and Analysis services,
// standard health checking and server reflection on one gRPC server. memtrace-collector is a thin
// main() around it; integration tests start it in-process on port 0.
#ifndef MEMTRACE_COLLECTOR_SERVER_COLLECTOR_SERVER_H_
#define MEMTRACE_COLLECTOR_SERVER_COLLECTOR_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collector/security/ingest_limits.h"
#include "collector/security/server_security.h"
#include "collector/store/event_store.h"
#include "proto/codec/batch_codec.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace memtrace::collector {

class AnalysisService;
class IngestService;
class QueryService;

struct CollectorServerOptions {
  // HOST:PORT ("[::1]:PORT" for IPv6); port 0 lets the OS pick one (see port()).
  std::string listen = "127.0.0.1:7431";
  EventStoreOptions store;
  // Largest gRPC message accepted; a bigger one ends its stream with RESOURCE_EXHAUSTED.
  int max_message_bytes = 16 << 20;
  BatchLimits limits;
  // Ranks per job and string-table size per stream (collector/security/ingest_limits.h).
  security::IngestLimits ingest_limits;
  // TLS and the bearer token checked on every call (collector/security/server_security.h).
  // Default: plaintext, no token.
  security::ServerSecurityOptions security;
  // Plaintext on a non-loopback address; without it (and without TLS) Start() refuses one.
  bool allow_insecure = false;
  // Threads one Live or Leaks call uses to rebuild the ranks' live sets (analysis_service.h);
  // 0 = DefaultQueryThreads() (parallel_for.h).
  int query_threads = 0;
};

class CollectorServer {
 public:
  // Opens the store and starts serving. Fails (naming the address or directory) when the store
  // cannot be opened or the address cannot be bound, and with INVALID_ARGUMENT when the listen
  // policy refuses the address (non-loopback without TLS or allow_insecure).
  static absl::StatusOr<std::unique_ptr<CollectorServer>> Start(
      const CollectorServerOptions& options);
  // Shuts down (if not yet) and closes the store.
  ~CollectorServer();
  CollectorServer(const CollectorServer&) = delete;
  CollectorServer& operator=(const CollectorServer&) = delete;

  // The bound port, and "HOST:PORT" with it.
  int port() const { return port_; }
  std::string address() const;

  // Stops accepting calls, gives running ones `grace` to finish and then cancels them (agent
  // streams never finish by themselves: they see CANCELLED, reconnect elsewhere or later, and
  // resend what was not acked). Idempotent; thread-safe.
  void Shutdown(absl::Duration grace = absl::Seconds(1));

  // The store, for in-process readers (tests, tools). Thread-safe (see EventStore).
  EventStore& store() { return *store_; }

 private:
  CollectorServer() = default;

  std::string host_;
  int port_ = 0;
  // Destroyed in reverse order: the server before the services before the store.
  std::unique_ptr<EventStore> store_;
  std::unique_ptr<IngestService> ingest_;
  std::unique_ptr<QueryService> query_;
  std::unique_ptr<AnalysisService> analysis_;
  std::unique_ptr<grpc::Server> server_;
  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_SERVER_COLLECTOR_SERVER_H_
