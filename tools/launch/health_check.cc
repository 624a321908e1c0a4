#include "tools/launch/health_check.h"

#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/connect/client_channel.h"

namespace memtrace::launch {
namespace {

constexpr char kService[] = "memtrace.v1.Ingest";
constexpr char kMethod[] = "/grpc.health.v1.Health/Check";

// HealthCheckRequest{string service = 1}.
std::string EncodeRequest(const std::string& service) {
  std::string out;
  out.push_back(0x0a);                               // field 1, length-delimited
  out.push_back(static_cast<char>(service.size()));  // < 128: one varint byte
  out += service;
  return out;
}

// HealthCheckResponse{ServingStatus status = 1}: 1 = SERVING, 2 = NOT_SERVING. An absent field
// is 0 = UNKNOWN.
int DecodeStatus(const std::string& bytes) {
  for (size_t i = 0; i + 1 < bytes.size(); ++i) {
    if (bytes[i] == 0x08) return static_cast<unsigned char>(bytes[i + 1]);
  }
  return 0;
}

}  // namespace

absl::Status CheckCollector(const std::string& address, absl::Duration timeout) {
  // TLS (and the token, though health checks need none) from the environment, as the agents
  // the run starts use: a TLS collector does not answer plaintext.
  absl::StatusOr<std::shared_ptr<grpc::Channel>> made =
      connect::CreateCollectorChannelFromEnv(address);
  if (!made.ok()) return made.status();
  std::shared_ptr<grpc::Channel> channel = *std::move(made);
  const auto deadline = std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout);
  if (!channel->WaitForConnected(deadline)) {
    return absl::UnavailableError(absl::StrCat("cannot reach collector at ", address, " within ",
                                               absl::FormatDuration(timeout)));
  }
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(deadline);
  std::string request_bytes = EncodeRequest(kService);
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, kMethod, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
      status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach collector at ", address, ": ", status.error_message()));
  }
  if (!status.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the server at ", address, " does not answer health checks as a memtrace collector does (",
        status.error_message(), ")"));
  }
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  int serving = DecodeStatus(bytes);
  if (serving == 2) {
    // What the collector says when its store stopped taking writes (collector_server.cc).
    return absl::FailedPreconditionError(absl::StrCat(
        "collector at ", address, " takes no events: ", kService,
        " is NOT_SERVING (its store stopped taking writes, e.g. on a full disk, until it "
        "restarts; its stderr says why)"));
  }
  if (serving != 1) {
    return absl::FailedPreconditionError(absl::StrCat("collector at ", address, " is not serving ",
                                                      kService, " (health status ", serving, ")"));
  }
  return absl::OkStatus();
}

}  // namespace memtrace::launch
