// Reads a stream's stored events back from the collector (Query.ReadEvents), page by page, so
// an exporter can walk millions of events without holding them.
#ifndef MEMTRACE_QUERY_EXPORT_EVENT_READER_H_
#define MEMTRACE_QUERY_EXPORT_EVENT_READER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/codec/event.h"
#include "proto/memtrace/v1/query.grpc.pb.h"

namespace memtrace::exporter {

class EventReader {
 public:
  // A channel to `address`; nothing is contacted until ForEach. Each page request waits at most
  // `timeout`. INVALID_ARGUMENT for an empty address.
  static absl::StatusOr<EventReader> Create(const std::string& address, absl::Duration timeout);

  // Calls `on_event` for every stored event of (job, rank, attempt) in sequence order, at the
  // time the collector takes it at: one stamped past the time horizon it was stored with (a
  // clock gone wrong, counted as anomaly time_future) at the time of the event before it, as
  // the rollups place it (TimeWithinHorizon).
  // Errors are the collector's, in the CLI's words (cli::FromGrpcStatus), or INVALID_ARGUMENT
  // for a page that does not decode. Thread-safe.
  absl::Status ForEach(const std::string& job_id, uint32_t rank, uint32_t attempt,
                       const std::function<void(const Event&)>& on_event) const;

 private:
  EventReader(std::string address, absl::Duration timeout, std::shared_ptr<grpc::Channel> channel);

  std::string address_;
  absl::Duration timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::shared_ptr<v1::Query::Stub> stub_;
};

}  // namespace memtrace::exporter

#endif  // MEMTRACE_QUERY_EXPORT_EVENT_READER_H_
