// What every unary call of the CLI to a collector service needs: the checked address, a channel
// with TLS and the token as the environment asks (proto/connect/client_channel.h), the
// service's stub, a deadline per call, and a translation of gRPC failures into an absl::Status
// in the user's terms. QueryClient and AnalysisClient are thin layers over one each.
#ifndef MEMTRACE_QUERY_CLI_SERVICE_CALLER_H_
#define MEMTRACE_QUERY_CLI_SERVICE_CALLER_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/connect/client_channel.h"
#include "proto/connect/collector_address.h"

namespace memtrace::cli {

// Turns the failed gRPC status of `rpc` at `address` into the error the user sees.
using GrpcStatusTranslator = absl::Status (*)(const grpc::Status& status, absl::string_view address,
                                              absl::string_view rpc, absl::Duration timeout);

// `Service` is a generated gRPC service class (v1::Query, v1::Analysis). A copyable value;
// calls are thread-safe (gRPC stubs are).
template <typename Service>
class ServiceCaller {
 public:
  using Stub = typename Service::Stub;

  // Prepares a channel to `address` (host:port) with `args`; nothing is contacted until the
  // first call. INVALID_ARGUMENT for an address gRPC would misread ("host:99999", "host").
  static absl::StatusOr<ServiceCaller> Create(std::string address, absl::Duration timeout,
                                              const grpc::ChannelArguments& args,
                                              GrpcStatusTranslator translate) {
    if (absl::Status s = connect::CheckCollectorAddress("--collector", address); !s.ok()) {
      return s;
    }
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        connect::CreateCollectorChannelFromEnv(address, args);
    if (!channel.ok()) return channel.status();
    return ServiceCaller(std::move(address), timeout, *std::move(channel), translate);
  }

  // Calls `method` (e.g. &v1::Query::Stub::ListJobs), named `rpc` in errors, waiting at most
  // the timeout.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(absl::string_view rpc, const Request& request,
                                grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&,
                                                             Response*)) const {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
    Response response;
    grpc::Status status = ((*stub_).*method)(&context, request, &response);
    if (!status.ok()) return translate_(status, address_, rpc, timeout_);
    return response;
  }

  const std::string& address() const { return address_; }

 private:
  ServiceCaller(std::string address, absl::Duration timeout, std::shared_ptr<grpc::Channel> channel,
                GrpcStatusTranslator translate)
      : address_(std::move(address)),
        timeout_(timeout),
        stub_(Service::NewStub(channel)),
        translate_(translate) {}

  std::string address_;
  absl::Duration timeout_;
  std::shared_ptr<Stub> stub_;  // shared: the caller is copied into each command's client
  GrpcStatusTranslator translate_;
};

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_SERVICE_CALLER_H_
