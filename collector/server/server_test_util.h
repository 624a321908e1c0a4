// Test-only helpers for the server tests: an in-process collector on a loopback port 0 with a
// store under $TEST_TMPDIR, raw gRPC stubs to it, and event batches with known contents.
#ifndef MEMTRACE_COLLECTOR_SERVER_SERVER_TEST_UTIL_H_
#define MEMTRACE_COLLECTOR_SERVER_SERVER_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "collector/server/collector_server.h"
#include "grpcpp/channel.h"
#include "proto/memtrace/v1/ingest.grpc.pb.h"
#include "proto/memtrace/v1/query.grpc.pb.h"

namespace memtrace::collector::testing {

// $TEST_TMPDIR/collector/`name` with nothing there (not created: the collector makes it).
std::string ClearedStoreDir(const std::string& name);

// Starts a collector on 127.0.0.1:0 over a fresh store `name`; fails the test on error.
std::unique_ptr<CollectorServer> StartCollector(const std::string& name,
                                                int max_message_bytes = 16 << 20);

std::shared_ptr<grpc::Channel> Connect(const CollectorServer& server);

v1::RankIdentity Identity(const std::string& job, int32_t rank, uint32_t attempt = 0);
v1::IngestRequest HelloRequest(const v1::RankIdentity& identity);

// `count` events from `first_seq`: allocations of 1000 bytes at distinct addresses, a STEP every
// 10th event (aux = seq / 10), every third allocation freed, 1 ms apart from kBaseTs.
inline constexpr int64_t kBaseTs = 1'700'000'000'000'000'000;
std::vector<Event> Events(uint64_t first_seq, uint64_t count);
v1::IngestRequest BatchRequest(uint64_t first_seq, uint64_t count);

}  // namespace memtrace::collector::testing

#endif  // MEMTRACE_COLLECTOR_SERVER_SERVER_TEST_UTIL_H_
