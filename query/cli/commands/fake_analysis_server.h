// Test-only: a memtrace.v1.Analysis server on a loopback port chosen by the OS that records the
// requests it receives and answers with the reports (or the error) a test sets, so each analysis
// command's flags, output and exit codes are tested without a collector.
#ifndef MEMTRACE_QUERY_CLI_COMMANDS_FAKE_ANALYSIS_SERVER_H_
#define MEMTRACE_QUERY_CLI_COMMANDS_FAKE_ANALYSIS_SERVER_H_

#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "proto/memtrace/v1/analysis.grpc.pb.h"

namespace memtrace::cli {

// Builds and starts a server for `service` on 127.0.0.1 with a port the OS picks, and sets
// *address to it: what every fake service of these tests needs.
std::unique_ptr<grpc::Server> StartLoopbackServer(grpc::Service* service, std::string* address);

class FakeAnalysisServer final : public v1::Analysis::Service {
 public:
  // Starts serving on 127.0.0.1:0; address() says where.
  FakeAnalysisServer();
  ~FakeAnalysisServer() override;

  std::string address() const { return address_; }

  // What the next calls answer. Set before running a command; thread-safe.
  void SetError(grpc::Status error);
  v1::DivergenceReport diverged_report;
  v1::GrowthReport growth_report;
  v1::LeakReport leak_report;
  v1::LiveReport live_report;
  v1::PeakReport peak_report;
  v1::HeadroomReport headroom_report;
  v1::CompareReport compare_report;

  // The latest request of each kind (read after the command returned).
  v1::DivergedRequest diverged_request;
  v1::GrowthRequest growth_request;
  v1::LeaksRequest leaks_request;
  v1::LiveRequest live_request;
  v1::PeakRequest peak_request;
  v1::HeadroomRequest headroom_request;
  v1::CompareRequest compare_request;
  int calls = 0;

  grpc::Status Diverged(grpc::ServerContext*, const v1::DivergedRequest* request,
                        v1::DivergenceReport* response) override;
  grpc::Status Growth(grpc::ServerContext*, const v1::GrowthRequest* request,
                      v1::GrowthReport* response) override;
  grpc::Status Leaks(grpc::ServerContext*, const v1::LeaksRequest* request,
                     v1::LeakReport* response) override;
  grpc::Status Live(grpc::ServerContext*, const v1::LiveRequest* request,
                    v1::LiveReport* response) override;
  grpc::Status Peak(grpc::ServerContext*, const v1::PeakRequest* request,
                    v1::PeakReport* response) override;
  grpc::Status Headroom(grpc::ServerContext*, const v1::HeadroomRequest* request,
                        v1::HeadroomReport* response) override;
  grpc::Status Compare(grpc::ServerContext*, const v1::CompareRequest* request,
                       v1::CompareReport* response) override;

 private:
  template <typename Request, typename Report>
  grpc::Status Answer(const Request& request, Request* recorded, const Report& report,
                      Report* response);

  absl::Mutex mu_;
  grpc::Status error_ = grpc::Status::OK;
  std::string address_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_COMMANDS_FAKE_ANALYSIS_SERVER_H_
