#include "collector/server/simulated_job_store.h"

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "proto/codec/batch_codec.h"

namespace memtrace::collector {
namespace {

// An EventSink that appends to one store stream in batches; each string entry travels with the
// batch that first uses it, as an agent sends it.
class StoreSink : public EventSink {
 public:
  StoreSink(EventStore& store, StreamKey key, size_t batch_events,
            std::optional<ClockEstimate> clock)
      : store_(store), key_(key), batch_events_(batch_events), clock_(clock) {}

  void Record(const Event& event) override {
    if (!status_.ok()) return;
    Event e = event;
    e.seq = ++seq_;
    batch_.events.push_back(e);
    if (batch_.events.size() >= batch_events_) Flush();
  }

  uint32_t Intern(StringKind kind, std::string_view value) override {
    auto [it, inserted] = ids_.try_emplace(std::make_pair(kind, std::string(value)),
                                           static_cast<uint32_t>(ids_.size() + 1));
    if (inserted) batch_.strings.push_back(StringDef{it->second, kind, std::string(value)});
    return it->second;
  }

  // Appends what is buffered; the first error sticks.
  void Flush() {
    if (!status_.ok() || (batch_.events.empty() && batch_.strings.empty())) return;
    batch_.clock = clock_;
    absl::StatusOr<AppendResult> r = store_.Append(key_, batch_);
    if (!r.ok()) status_ = r.status();
    ++batches_;
    batch_ = DecodedBatch();
  }

  const absl::Status& status() const { return status_; }
  uint64_t events() const { return seq_; }
  uint64_t batches() const { return batches_; }

 private:
  EventStore& store_;
  const StreamKey key_;
  const size_t batch_events_;
  const std::optional<ClockEstimate> clock_;
  DecodedBatch batch_;
  std::map<std::pair<StringKind, std::string>, uint32_t> ids_;
  uint64_t seq_ = 0;
  uint64_t batches_ = 0;
  absl::Status status_;
};

}  // namespace

v1::RankIdentity SimulatedRankIdentity(const std::string& job_id,
                                       const sim::WorkloadOptions& workload, int rank,
                                       uint32_t attempt) {
  const sim::RankPlacement placement = sim::PlaceRank(workload, rank);
  v1::RankIdentity identity;
  identity.set_job_id(job_id);
  identity.set_rank(rank);
  identity.set_local_rank(placement.local_rank);
  identity.set_world_size(workload.ranks);
  identity.set_local_world_size(placement.local_world_size);
  identity.set_group_rank(placement.group_rank);
  identity.set_host(placement.host);
  identity.set_device_index(placement.local_rank);
  identity.set_launcher("simulator");
  identity.set_attempt(attempt);
  return identity;
}

absl::StatusOr<StoredJobStats> StoreSimulatedJob(EventStore& store, const std::string& job_id,
                                                 const sim::WorkloadOptions& workload,
                                                 size_t batch_events, uint32_t attempt) {
  if (absl::Status s = sim::ValidateWorkload(workload); !s.ok()) return s;
  StoredJobStats stats;
  for (int rank = 0; rank < workload.ranks; ++rank) {
    absl::StatusOr<OpenedStream> opened =
        store.OpenStream(SimulatedRankIdentity(job_id, workload, rank, attempt));
    if (!opened.ok()) return opened.status();
    // Collector clock minus the host's: exact, as from a round trip of no time.
    std::optional<ClockEstimate> clock;
    if (workload.clock_skew_per_node_ns != 0) {
      clock = ClockEstimate{-sim::ClockSkewNs(workload, rank), 0};
    }
    StoreSink sink(store, opened->key, batch_events > 0 ? batch_events : 1, clock);
    absl::Status played = sim::PlayRank(workload, rank, sink);
    sink.Flush();
    absl::Status closed = store.CloseStream(opened->key, played.ok() && sink.status().ok());
    if (!played.ok()) return played;
    if (!sink.status().ok()) return sink.status();
    if (!closed.ok()) return closed;
    stats.events += sink.events();
    stats.batches += sink.batches();
  }
  return stats;
}

}  // namespace memtrace::collector
