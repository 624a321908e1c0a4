#include "tools/bench/job_loader.h"

#include <atomic>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "proto/codec/batch_codec.h"

namespace memtrace::bench {
namespace {

// An EventSink for one rank played on one thread: numbers events, interns strings, and appends
// every full batch to the store. Errors stick and stop further appends.
class StoreSink : public EventSink {
 public:
  StoreSink(collector::EventStore& store, collector::StreamKey key, size_t batch_events)
      : store_(store), key_(key), batch_events_(batch_events) {
    pending_.reserve(batch_events);
  }

  void Record(const Event& event) override {
    Event e = event;
    e.seq = ++seq_;
    pending_.push_back(e);
    if (pending_.size() >= batch_events_) Flush();
  }

  uint32_t Intern(StringKind kind, std::string_view value) override {
    auto [it, inserted] = ids_.try_emplace(std::make_pair(kind, std::string(value)), 0);
    if (inserted) {
      it->second = static_cast<uint32_t>(ids_.size());
      strings_.push_back(StringDef{it->second, kind, std::string(value)});
    }
    return it->second;
  }

  void Flush() {
    if (!status_.ok() || (pending_.empty() && strings_.empty())) return;
    v1::EventBatch wire;
    EncodeBatch(pending_, strings_, AgentCounterValues(), &wire);
    absl::StatusOr<DecodedBatch> decoded = DecodeBatch(wire);
    if (!decoded.ok()) {
      status_ = decoded.status();
      return;
    }
    absl::StatusOr<collector::AppendResult> r = store_.Append(key_, *decoded);
    if (!r.ok()) status_ = r.status();
    pending_.clear();
    strings_.clear();
  }

  const absl::Status& status() const { return status_; }
  uint64_t events() const { return seq_; }

 private:
  collector::EventStore& store_;
  const collector::StreamKey key_;
  const size_t batch_events_;
  uint64_t seq_ = 0;
  std::vector<Event> pending_;
  std::vector<StringDef> strings_;
  absl::flat_hash_map<std::pair<StringKind, std::string>, uint32_t> ids_;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<LoadedJob> LoadSimulatedJob(collector::EventStore& store, const std::string& job_id,
                                           const sim::WorkloadOptions& workload, int threads,
                                           size_t batch_events) {
  if (absl::Status s = sim::ValidateWorkload(workload); !s.ok()) return s;
  const absl::Time start = absl::Now();
  std::atomic<int> next_rank{0};
  std::atomic<uint64_t> events{0};
  absl::Mutex mu;
  absl::Status first_error;
  auto fail = [&](absl::Status s) {
    absl::MutexLock lock(&mu);
    if (first_error.ok()) first_error = std::move(s);
  };
  std::vector<std::thread> workers;
  for (int t = 0; t < std::max(1, threads); ++t) {
    workers.emplace_back([&] {
      for (int rank = next_rank++; rank < workload.ranks; rank = next_rank++) {
        v1::RankIdentity id;
        id.set_job_id(job_id);
        id.set_rank(rank);
        id.set_world_size(workload.ranks);
        const sim::RankPlacement place = sim::PlaceRank(workload, rank);
        id.set_host(place.host);
        id.set_local_rank(place.local_rank);
        id.set_group_rank(place.group_rank);
        id.set_device_index(place.local_rank);
        id.set_launcher("simulator");
        absl::StatusOr<collector::OpenedStream> opened = store.OpenStream(id);
        if (!opened.ok()) return fail(opened.status());
        StoreSink sink(store, opened->key, batch_events);
        absl::Status played = sim::PlayRank(workload, rank, sink);
        sink.Flush();
        absl::Status closed = store.CloseStream(opened->key, true);
        for (const absl::Status& s : {played, sink.status(), closed}) {
          if (!s.ok()) return fail(absl::Status(s.code(), absl::StrCat("rank ", rank, ": ",
                                                                      s.message())));
        }
        events += sink.events();
      }
    });
  }
  for (std::thread& w : workers) w.join();
  if (!first_error.ok()) return first_error;
  LoadedJob job;
  job.job_id = job_id;
  job.ranks = workload.ranks;
  job.events = events.load();
  job.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return job;
}

}  // namespace memtrace::bench
