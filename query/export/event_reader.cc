#include "query/export/event_reader.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/codec/batch_codec.h"
#include "proto/connect/client_channel.h"
#include "proto/connect/collector_address.h"
#include "query/cli/query_client.h"

namespace memtrace::exporter {
namespace {

// Each event's time horizon, from the page's runs. INVALID_ARGUMENT when the runs do not cover
// the page's events exactly; none at all is a collector older than them: no horizon.
absl::StatusOr<std::vector<int64_t>> HorizonOfEach(const v1::ReadEventsResponse& page,
                                                   size_t events) {
  std::vector<int64_t> horizons;
  if (page.time_horizons_size() == 0) {
    horizons.assign(events, kNoTimeHorizon);
    return horizons;
  }
  horizons.reserve(events);
  for (const v1::TimeHorizonRun& run : page.time_horizons()) {
    if (run.events() > events - horizons.size()) break;
    horizons.insert(horizons.end(), run.events(), run.horizon_ns());
  }
  if (horizons.size() != events) {
    return absl::InvalidArgumentError(
        absl::StrCat("its time horizons do not cover its ", events, " events"));
  }
  return horizons;
}

}  // namespace

absl::StatusOr<EventReader> EventReader::Create(const std::string& address,
                                                absl::Duration timeout) {
  // gRPC would dial "host:99999" on port 34463 and "host" on port 0: refuse them here.
  if (absl::Status s = connect::CheckCollectorAddress("--collector", address); !s.ok()) return s;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  // TLS and the token from the environment, as every other command.
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      connect::CreateCollectorChannelFromEnv(address, std::move(args));
  if (!channel.ok()) return channel.status();
  return EventReader(address, timeout, *std::move(channel));
}

EventReader::EventReader(std::string address, absl::Duration timeout,
                         std::shared_ptr<grpc::Channel> channel)
    : address_(std::move(address)),
      timeout_(timeout),
      channel_(std::move(channel)),
      stub_(v1::Query::NewStub(channel_)) {}

absl::Status EventReader::ForEach(const std::string& job_id, uint32_t rank, uint32_t attempt,
                                  const std::function<void(const Event&)>& on_event) const {
  // A page carries the stream's string table as well; allow a full one.
  BatchLimits limits;
  limits.max_strings = 1 << 20;
  uint64_t from = 1;
  // Carried from page to page: an event past its horizon takes the time of the one before.
  bool has_previous = false;
  int64_t previous_ts_ns = 0;
  while (true) {
    v1::ReadEventsRequest request;
    request.set_job_id(job_id);
    request.set_rank(rank);
    request.set_attempt(attempt);
    request.set_from_seq(from);
    v1::ReadEventsResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
    grpc::Status status = stub_->ReadEvents(&context, request, &response);
    if (!status.ok()) return cli::FromGrpcStatus(status, address_, "ReadEvents", timeout_);
    absl::StatusOr<DecodedBatch> batch = DecodeBatch(response.batch(), limits);
    if (!batch.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("events of rank ", rank, " from seq ", from,
                                                     " do not decode: ", batch.status().message()));
    }
    absl::StatusOr<std::vector<int64_t>> horizons = HorizonOfEach(response, batch->events.size());
    if (!horizons.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("events of rank ", rank, " from seq ", from,
                                                     ": ", horizons.status().message()));
    }
    for (size_t i = 0; i < batch->events.size(); ++i) {
      Event e = batch->events[i];
      e.ts_ns = TimeWithinHorizon(e.ts_ns, (*horizons)[i], has_previous, previous_ts_ns);
      has_previous = true;
      previous_ts_ns = e.ts_ns;
      on_event(e);
    }
    if (response.next_seq() == 0) return absl::OkStatus();
    if (response.next_seq() <= from) {
      return absl::InternalError(absl::StrCat("ReadEvents of rank ", rank, " did not advance past seq ",
                                              from));
    }
    from = response.next_seq();
  }
}

}  // namespace memtrace::exporter
