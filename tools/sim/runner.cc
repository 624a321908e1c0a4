#include "tools/sim/runner.h"

#include <unistd.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/codec/event.h"
#include "proto/connect/collector_address.h"

namespace memtrace::sim {
namespace {

// Forwards to a Transport, holding the player back instead of letting the transport's bounded
// queue overflow (a simulator can produce events far faster than any application), and pacing
// events to wall time when speed > 0.
class PacedSink : public EventSink {
 public:
  PacedSink(Transport& transport, size_t queue_capacity, double speed, absl::Duration max_wait)
      : transport_(transport),
        backlog_limit_(std::max<size_t>(queue_capacity / 2, 1)),
        speed_(speed),
        max_wait_(max_wait) {}

  void Record(const Event& event) override {
    if (event.kind == EventKind::kStep) {
      step_ = static_cast<int64_t>(event.aux);
    } else if (event.kind == EventKind::kOom && !oom_step_.has_value()) {
      oom_step_ = step_;
    }
    if (speed_ > 0) Pace(event.ts_ns);
    if (++since_check_ >= 1024) {
      since_check_ = 0;
      HoldBackWhileBacklogged();
    }
    transport_.Record(event);
  }

  uint32_t Intern(StringKind kind, std::string_view value) override {
    return transport_.Intern(kind, value);
  }

  // The step (its latest STEP marker) in which the rank recorded its first OOM event, if any.
  std::optional<int64_t> oom_step() const { return oom_step_; }

 private:
  void Pace(int64_t ts_ns) {
    if (first_ts_ns_ == 0) {
      first_ts_ns_ = ts_ns;
      wall_start_ = absl::Now();
    }
    const absl::Time due =
        wall_start_ + absl::Nanoseconds(static_cast<double>(ts_ns - first_ts_ns_) / speed_);
    if (absl::Now() < due) absl::SleepFor(due - absl::Now());
  }

  void HoldBackWhileBacklogged() {
    const absl::Time give_up = absl::Now() + max_wait_;
    while (absl::Now() < give_up) {
      TransportStats s = transport_.stats();
      if (s.last_seq - std::min(s.last_seq, s.durable_seq) < backlog_limit_) return;
      absl::SleepFor(absl::Milliseconds(1));
    }
  }

  Transport& transport_;
  const size_t backlog_limit_;
  const double speed_;
  const absl::Duration max_wait_;
  size_t since_check_ = 0;
  int64_t step_ = 0;
  std::optional<int64_t> oom_step_;
  int64_t first_ts_ns_ = 0;
  absl::Time wall_start_;
};

// Why a rank's stream was not answered within connect_timeout. The transports run with
// log_failures off, so this is the only place the collector's own refusal (a job with more
// ranks than its --max_ranks_per_job, a rank another process already streams) reaches the user.
absl::Status NotConnected(const SimulationOptions& options, int rank, const TransportStats& stats) {
  if (stats.last_stream_refused) {
    return absl::FailedPreconditionError(
        absl::StrCat("collector at ", options.collector_address, " refused the stream of rank ",
                     rank, " of job '", options.job_id, "': ", stats.last_stream_error));
  }
  return absl::UnavailableError(absl::StrCat("cannot reach collector at ",
                                             options.collector_address, " within ",
                                             absl::FormatDuration(options.connect_timeout)));
}

}  // namespace

v1::RankIdentity SimulatedIdentity(const SimulationOptions& options, int rank) {
  const RankPlacement placement = PlaceRank(options.workload, rank);
  v1::RankIdentity id;
  id.set_job_id(options.job_id);
  id.set_rank(rank);
  id.set_local_rank(placement.local_rank);
  id.set_world_size(options.workload.ranks);
  id.set_local_world_size(placement.local_world_size);
  id.set_group_rank(placement.group_rank);
  id.set_attempt(0);
  id.set_host(placement.host);
  id.set_pid(static_cast<uint32_t>(getpid()));
  id.set_device_index(placement.local_rank);
  id.set_device_uuid(
      absl::StrCat("GPU-SIMULATED-", placement.group_rank, "-", placement.local_rank));
  id.set_launcher("simulator");
  id.set_agent_version("memtrace-sim");
  return id;
}

absl::StatusOr<std::vector<RankOutcome>> RunSimulation(
    const SimulationOptions& options, const std::function<void(const std::string&)>& log) {
  if (absl::Status s = ValidateWorkload(options.workload); !s.ok()) return s;
  if (options.job_id.empty()) return absl::InvalidArgumentError("--job: empty job id");
  if (options.speed < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--speed ", options.speed, ": must be >= 0"));
  }
  // A Transport would dial "host:99999" on port 34463 and report it unreachable.
  if (absl::Status s = connect::CheckCollectorAddress("--collector", options.collector_address);
      !s.ok()) {
    return s;
  }
  const int ranks = options.workload.ranks;
  std::vector<std::unique_ptr<Transport>> transports;
  for (int rank = 0; rank < ranks; ++rank) {
    TransportOptions t;
    t.collector_address = options.collector_address;
    t.identity = SimulatedIdentity(options, rank);
    t.log_failures = false;  // the runner reports failures itself, once per rank
    // The rank's host clock, as its events have it: the transport measures the collector's
    // clock against this one.
    const int64_t skew = ClockSkewNs(options.workload, rank);
    if (skew != 0) t.clock = [skew] { return RealtimeNanos() + skew; };
    absl::StatusOr<std::unique_ptr<Transport>> transport = Transport::Start(std::move(t));
    if (!transport.ok()) return transport.status();
    transports.push_back(std::move(*transport));
  }
  // Every rank's stream must be answered before anything is played, so that a collector that
  // is down is one clear error rather than 8 ranks of silent losses.
  const absl::Time connect_deadline = absl::Now() + options.connect_timeout;
  for (int rank = 0; rank < ranks; ++rank) {
    TransportStats stats = transports[rank]->stats();
    // A refusal is final (the transport would retry it forever): no need to wait it out.
    while (!stats.connected && !stats.last_stream_refused && absl::Now() < connect_deadline) {
      absl::SleepFor(absl::Milliseconds(5));
      stats = transports[rank]->stats();
    }
    if (!stats.connected) {
      for (const std::unique_ptr<Transport>& u : transports)
        (void)u->Shutdown(absl::ZeroDuration());
      return NotConnected(options, rank, stats);
    }
  }
  log(absl::StrCat("all ", ranks, " rank streams connected to ", options.collector_address));

  std::vector<RankOutcome> outcomes(ranks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank) {
    threads.emplace_back([&, rank]() {
      Transport& transport = *transports[rank];
      PacedSink sink(transport, TransportOptions().queue_capacity, options.speed,
                     options.drain_timeout);
      RankOutcome& outcome = outcomes[rank];
      outcome.rank = rank;
      outcome.status = PlayRank(options.workload, rank, sink);
      outcome.oom_step = sink.oom_step();
      absl::Status shutdown = transport.Shutdown(options.drain_timeout);
      outcome.stats = transport.stats();
      if (outcome.status.ok()) outcome.status = shutdown;
      if (outcome.status.ok() && outcome.stats.events_lost > 0) {
        outcome.status = absl::DataLossError(
            absl::StrCat(outcome.stats.events_lost, " events lost in the transport"));
      }
      if (outcome.status.ok() && outcome.stats.durable_seq < outcome.stats.last_seq) {
        outcome.status = absl::DeadlineExceededError(
            absl::StrCat("only ", outcome.stats.durable_seq, " of ", outcome.stats.last_seq,
                         " events acknowledged as durable"));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return outcomes;
}

}  // namespace memtrace::sim
