#include "tools/sim/runner.h"

#include <unistd.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/codec/event.h"
#include "proto/connect/collector_address.h"
#include "tools/sim/paced_sink.h"

namespace memtrace::sim {
namespace {

// The transport's stats once its stream is answered (connected, or refused: a refusal is final,
// the transport would retry it forever) or at `deadline`, whichever comes first.
TransportStats AwaitHelloAnswer(const Transport& transport, absl::Time deadline) {
  TransportStats stats = transport.stats();
  while (!stats.connected && !stats.last_stream_refused && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
    stats = transport.stats();
  }
  return stats;
}

// Why a rank's stream was not answered within connect_timeout. The transports run with
// log_failures off, so this is the only place the collector's own refusal (a job with more
// ranks than its --max_ranks_per_job, a rank another process already streams) reaches the user.
// `admitted`: the other ranks whose streams the collector had answered. It keeps them under the
// job id, where they count against the same limit, so a second try under the same --job is
// refused too.
absl::Status NotConnected(const SimulationOptions& options, int rank, const TransportStats& stats,
                          int admitted) {
  const std::string after =
      admitted == 0 ? ""
                    : absl::StrCat("; ", admitted, " other rank", admitted == 1 ? " was" : "s were",
                                   " admitted first and stay", admitted == 1 ? "s" : "",
                                   " in job '", options.job_id,
                                   "' without events: run again under another --job");
  if (stats.last_stream_refused) {
    return absl::FailedPreconditionError(absl::StrCat(
        "collector at ", options.collector_address, " refused the stream of rank ", rank,
        " of job '", options.job_id, "': ", stats.last_stream_error, after));
  }
  // gRPC's words for a connection that was never made. Any other error is said as it came:
  // most often the collector's answer (UNAVAILABLE: its store takes no writes on a full disk),
  // which "cannot reach" hid; a name that did not resolve says so itself.
  if (!stats.last_stream_error.empty() &&
      !absl::StrContains(stats.last_stream_error, "failed to connect")) {
    return absl::UnavailableError(absl::StrCat(
        "collector at ", options.collector_address, " did not take the stream of rank ", rank,
        " within ", absl::FormatDuration(options.connect_timeout), ": ", stats.last_stream_error,
        after));
  }
  return absl::UnavailableError(absl::StrCat("cannot reach collector at ",
                                             options.collector_address, " within ",
                                             absl::FormatDuration(options.connect_timeout), after));
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
  id.set_attempt(options.attempt);
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
  const size_t queue_capacity = SimulatedQueueCapacity(ranks);
  std::vector<std::unique_ptr<Transport>> transports;
  for (int rank = 0; rank < ranks; ++rank) {
    TransportOptions t;
    t.collector_address = options.collector_address;
    t.channel_factory = options.channel_factory;
    t.identity = SimulatedIdentity(options, rank);
    t.log_failures = false;  // the runner reports failures itself, once per rank
    t.queue_capacity = queue_capacity;
    t.max_batch_events = SimulatedBatchEvents(queue_capacity);
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
    const TransportStats stats = AwaitHelloAnswer(*transports[rank], connect_deadline);
    if (!stats.connected) {
      // The other ranks' Hellos went out together with this one: give their answers a moment
      // to arrive, so that the count of ranks admitted is the collector's.
      const absl::Time settle = std::min(connect_deadline, absl::Now() + absl::Seconds(1));
      int admitted = 0;
      for (const std::unique_ptr<Transport>& u : transports) {
        admitted += AwaitHelloAnswer(*u, settle).connected;
      }
      for (const std::unique_ptr<Transport>& u : transports)
        (void)u->Shutdown(absl::ZeroDuration());
      return NotConnected(options, rank, stats, admitted);
    }
  }
  log(absl::StrCat("all ", ranks, " rank streams connected to ", options.collector_address));

  std::vector<RankOutcome> outcomes(ranks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank) {
    threads.emplace_back([&, rank]() {
      Transport& transport = *transports[rank];
      PacedSink sink(transport, queue_capacity, options.speed, options.drain_timeout);
      RankOutcome& outcome = outcomes[rank];
      outcome.rank = rank;
      outcome.status = PlayRank(options.workload, rank, sink);
      outcome.oom_step = sink.oom_step();
      // Without step markers every event is in step 0: the step is the simulated time's (step
      // s starts near start_ns + s * step_ns), not "ran out of memory in step 0".
      if (!options.workload.step_markers && sink.oom_ts_ns().has_value() &&
          options.workload.step_ns > 0) {
        // Step starts are jittered later, never earlier; the rank's clock runs ahead by its skew.
        outcome.oom_step =
            (*sink.oom_ts_ns() - ClockSkewNs(options.workload, rank) - options.workload.start_ns) /
            options.workload.step_ns;
      }
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
      // Why the stream ended (the collector's store's full disk, a dropped connection), where
      // the transport's own words ("not connected") do not say.
      const std::string& why = outcome.stats.last_stream_error;
      if (!outcome.status.ok() && !why.empty() &&
          !absl::StrContains(outcome.status.message(), why)) {
        outcome.status = absl::Status(
            outcome.status.code(),
            absl::StrCat(outcome.status.message(), " (the stream's last error: ", why, ")"));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return outcomes;
}

}  // namespace memtrace::sim
