#include "collector/security/stream_admission.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace memtrace::security {

namespace {

// The process that produces a stream.
struct Producer {
  std::string host;
  uint32_t pid = 0;
  uint64_t start_ns = 0;  // 0: an agent too old to send it
  // The same process: host and pid, and the start when both sides know it (a restarted
  // container can give a new process the old one's pid under the same hostname).
  bool operator==(const Producer& o) const {
    return pid == o.pid && host == o.host &&
           (start_ns == 0 || o.start_ns == 0 || start_ns == o.start_ns);
  }
};

Producer ProducerOf(const v1::RankIdentity& id) {
  return Producer{id.host(), id.pid(), id.process_start_ns()};
}

// A rank as counted against the limit: the launcher rank, or host+device+pid(+start) without
// one (as the store names such workers, EventStore::ResolveRank).
std::string RankName(const v1::RankIdentity& id) {
  if (id.rank() >= 0) return absl::StrCat(id.rank());
  return absl::StrCat(id.host(), "/", id.device_index(), "/", id.pid(),
                      id.process_start_ns() != 0 ? absl::StrCat("/", id.process_start_ns()) : "");
}

std::string Describe(const Producer& p) {
  return absl::StrCat("host \"", p.host, "\" pid ", p.pid,
                      p.start_ns != 0 ? absl::StrCat(" instance ", p.start_ns) : "");
}

}  // namespace

struct StreamAdmission::Job {
  absl::flat_hash_set<std::string> ranks;
  // Launcher-ranked streams only (rank, attempt): a rank -1 worker is named by its producer.
  absl::flat_hash_map<std::pair<int32_t, uint32_t>, Producer> producers;
};

StreamAdmission::StreamAdmission(uint32_t max_ranks_per_job, RankLister lister)
    : max_ranks_per_job_(max_ranks_per_job), lister_(std::move(lister)) {}

StreamAdmission::~StreamAdmission() = default;

absl::StatusOr<StreamAdmission::Job*> StreamAdmission::LoadJob(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it != jobs_.end()) return it->second.get();
  auto job = std::make_unique<Job>();
  absl::StatusOr<std::vector<v1::RankSummary>> stored = lister_(job_id);
  if (!stored.ok() && !absl::IsNotFound(stored.status())) return stored.status();
  if (stored.ok()) {
    for (const v1::RankSummary& r : *stored) {
      job->ranks.insert(RankName(r.identity()));
      if (r.identity().rank() >= 0) {
        job->producers.emplace(std::make_pair(r.identity().rank(), r.identity().attempt()),
                               ProducerOf(r.identity()));
      }
    }
  }
  Job* raw = job.get();
  jobs_.emplace(job_id, std::move(job));
  return raw;
}

absl::Status StreamAdmission::Admit(const v1::RankIdentity& identity) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Job*> job = LoadJob(identity.job_id());
  if (!job.ok()) return job.status();
  const std::string name = RankName(identity);
  if (!(*job)->ranks.contains(name)) {
    if (max_ranks_per_job_ > 0 && (*job)->ranks.size() >= max_ranks_per_job_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "job \"", identity.job_id(), "\" already has ", (*job)->ranks.size(),
          " ranks, the collector's --max_ranks_per_job limit; rank ", name, " refused"));
    }
  }
  if (identity.rank() >= 0) {
    const auto key = std::make_pair(identity.rank(), identity.attempt());
    const Producer producer = ProducerOf(identity);
    auto it = (*job)->producers.find(key);
    if (it != (*job)->producers.end() && !(it->second == producer)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "job \"", identity.job_id(), "\" rank ", identity.rank(), " attempt ",
          identity.attempt(), " is already streamed by ", Describe(it->second),
          "; refusing a second producer (", Describe(producer),
          "): give each process its own rank, or a new attempt or job id"));
    }
    (*job)->producers.emplace(key, producer);
  }
  (*job)->ranks.insert(name);
  return absl::OkStatus();
}

}  // namespace memtrace::security
