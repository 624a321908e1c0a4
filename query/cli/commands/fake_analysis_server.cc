#include "query/cli/commands/fake_analysis_server.h"

#include "absl/strings/str_cat.h"

namespace memtrace::cli {

std::unique_ptr<grpc::Server> StartLoopbackServer(grpc::Service* service, std::string* address) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  *address = absl::StrCat("127.0.0.1:", port);
  return server;
}

FakeAnalysisServer::FakeAnalysisServer() { server_ = StartLoopbackServer(this, &address_); }

FakeAnalysisServer::~FakeAnalysisServer() {
  if (server_ != nullptr) server_->Shutdown();
}

void FakeAnalysisServer::SetError(grpc::Status error) {
  absl::MutexLock lock(&mu_);
  error_ = std::move(error);
}

template <typename Request, typename Report>
grpc::Status FakeAnalysisServer::Answer(const Request& request, Request* recorded,
                                        const Report& report, Report* response) {
  absl::MutexLock lock(&mu_);
  *recorded = request;
  ++calls;
  if (!error_.ok()) return error_;
  *response = report;
  return grpc::Status::OK;
}

grpc::Status FakeAnalysisServer::Diverged(grpc::ServerContext*, const v1::DivergedRequest* r,
                                          v1::DivergenceReport* out) {
  return Answer(*r, &diverged_request, diverged_report, out);
}
grpc::Status FakeAnalysisServer::Growth(grpc::ServerContext*, const v1::GrowthRequest* r,
                                        v1::GrowthReport* out) {
  return Answer(*r, &growth_request, growth_report, out);
}
grpc::Status FakeAnalysisServer::Leaks(grpc::ServerContext*, const v1::LeaksRequest* r,
                                       v1::LeakReport* out) {
  return Answer(*r, &leaks_request, leak_report, out);
}
grpc::Status FakeAnalysisServer::Live(grpc::ServerContext*, const v1::LiveRequest* r,
                                      v1::LiveReport* out) {
  return Answer(*r, &live_request, live_report, out);
}
grpc::Status FakeAnalysisServer::Peak(grpc::ServerContext*, const v1::PeakRequest* r,
                                      v1::PeakReport* out) {
  return Answer(*r, &peak_request, peak_report, out);
}
grpc::Status FakeAnalysisServer::Headroom(grpc::ServerContext*, const v1::HeadroomRequest* r,
                                          v1::HeadroomReport* out) {
  return Answer(*r, &headroom_request, headroom_report, out);
}
grpc::Status FakeAnalysisServer::Compare(grpc::ServerContext*, const v1::CompareRequest* r,
                                         v1::CompareReport* out) {
  return Answer(*r, &compare_request, compare_report, out);
}

}  // namespace memtrace::cli
