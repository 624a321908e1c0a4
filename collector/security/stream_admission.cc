#include "collector/security/stream_admission.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

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

// Whether `ancestor` can be a process that started `child` (directly or through others) on its
// host: the same host, one of the child's ancestor pids, and started no later (when both starts
// are known: a pid reused after the ancestor ended is some other process).
bool IsAncestorOf(const Producer& ancestor, const v1::RankIdentity& child) {
  return ancestor.host == child.host() &&
         std::find(child.ancestor_pids().begin(), child.ancestor_pids().end(), ancestor.pid) !=
             child.ancestor_pids().end() &&
         (ancestor.start_ns == 0 || child.process_start_ns() == 0 ||
          ancestor.start_ns <= child.process_start_ns());
}

std::string Describe(const Producer& p) {
  return absl::StrCat("host \"", p.host, "\" pid ", p.pid,
                      p.start_ns != 0 ? absl::StrCat(" instance ", p.start_ns) : "");
}

}  // namespace

struct StreamAdmission::Job {
  absl::flat_hash_set<std::string> ranks;
  // Launcher-ranked streams only: a rank -1 worker is named by its producer.
  struct Stream {
    Producer producer;
    int connections = 0;  // tickets alive
  };
  absl::flat_hash_map<std::pair<int32_t, uint32_t>, Stream> streams;  // (rank, attempt)
  // Each launcher rank's subprocesses (stored without a launcher rank), which can start
  // subprocesses of the rank in turn.
  absl::flat_hash_map<int32_t, std::vector<Producer>> subprocesses;

  // The launcher rank `identity` is a subprocess of, if it is one (see the header): it names a
  // rank whose process, or one of whose subprocesses, is its ancestor, and it is not itself a
  // process that streams the rank.
  std::optional<int32_t> SubprocessOf(const v1::RankIdentity& identity) const {
    const int32_t rank = identity.rank();
    if (rank < 0 || identity.ancestor_pids().empty()) return std::nullopt;
    const Producer self = ProducerOf(identity);
    // Only a process whose (rank, attempt) another process holds is looked at further: a
    // subprocess inherits its attempt with its rank. The walk below is over the job's streams,
    // which every Hello of a 16 k-rank job would otherwise pay.
    auto own = streams.find({rank, identity.attempt()});
    if (own == streams.end() || own->second.producer == self) return std::nullopt;
    bool has_ancestor = false;
    for (const auto& [key, stream] : streams) {
      if (key.first != rank) continue;
      if (stream.producer == self) return std::nullopt;
      has_ancestor = has_ancestor || IsAncestorOf(stream.producer, identity);
    }
    if (auto it = subprocesses.find(rank); it != subprocesses.end()) {
      for (const Producer& p : it->second) has_ancestor = has_ancestor || IsAncestorOf(p, identity);
    }
    return has_ancestor ? std::optional<int32_t>(rank) : std::nullopt;
  }
  void AddSubprocess(int32_t rank, const Producer& producer) {
    std::vector<Producer>& known = subprocesses[rank];
    if (std::find(known.begin(), known.end(), producer) == known.end()) {
      known.push_back(producer);
    }
  }
};

AdmissionTicket::AdmissionTicket(AdmissionTicket&& other) noexcept { *this = std::move(other); }

AdmissionTicket& AdmissionTicket::operator=(AdmissionTicket&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = std::exchange(other.owner_, nullptr);
    job_id_ = std::move(other.job_id_);
    rank_ = other.rank_;
    attempt_ = other.attempt_;
    reassigned_ = std::move(other.reassigned_);
    subprocess_of_ = other.subprocess_of_;
  }
  return *this;
}

AdmissionTicket::~AdmissionTicket() { Release(); }

void AdmissionTicket::Release() {
  if (owner_ != nullptr) owner_->Release(job_id_, rank_, attempt_);
  owner_ = nullptr;
}

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
      if (r.identity().has_subprocess_of_rank()) {
        job->AddSubprocess(r.identity().subprocess_of_rank(), ProducerOf(r.identity()));
      }
      if (r.identity().rank() >= 0) {
        job->streams.emplace(std::make_pair(r.identity().rank(), r.identity().attempt()),
                             Job::Stream{ProducerOf(r.identity()), 0});
      }
    }
  }
  Job* raw = job.get();
  jobs_.emplace(job_id, std::move(job));
  return raw;
}

absl::StatusOr<uint32_t> StreamAdmission::ChooseAttempt(const v1::RankIdentity& identity,
                                                        bool new_attempt_if_taken, Job& job,
                                                        std::string* reassigned) {
  const int32_t rank = identity.rank();
  const Producer producer = ProducerOf(identity);
  auto it = job.streams.find({rank, identity.attempt()});
  if (it == job.streams.end() || it->second.producer == producer) return identity.attempt();
  // A process the collector already moved to a later attempt, reconnecting (its Hello still
  // names the attempt it was started with).
  uint32_t highest = 0;
  const Job::Stream* live = nullptr;  // another process streaming this rank now, at any attempt
  uint32_t live_attempt = 0;
  for (const auto& [key, stream] : job.streams) {
    if (key.first != rank) continue;
    highest = std::max(highest, key.second);
    // Only for a Hello that asks for moves: an importer's second trace is refused, not routed
    // onto an attempt its producer holds from an earlier import.
    if (new_attempt_if_taken && key.second > identity.attempt() && stream.producer == producer) {
      return key.second;
    }
    if (stream.connections > 0 && (live == nullptr || key.second > live_attempt)) {
      live = &stream;
      live_attempt = key.second;
    }
  }
  const Job::Stream& holder = it->second;
  const std::string claim =
      absl::StrCat("job \"", identity.job_id(), "\" rank ", rank, " attempt ", identity.attempt());
  if (live != nullptr) {
    // Two live processes claim the rank: also when the one now is at a later attempt (a rerun
    // moved there while this one started), which a new attempt would hide from the analyses.
    return absl::AlreadyExistsError(absl::StrCat(
        claim, " is being streamed by ", Describe(live->producer),
        live_attempt != identity.attempt() ? absl::StrCat(" (as attempt ", live_attempt, ")") : "",
        "; refusing a second producer (", Describe(producer),
        ") while it is connected: give each process its own rank"));
  }
  if (!new_attempt_if_taken || highest == UINT32_MAX) {
    return absl::AlreadyExistsError(
        absl::StrCat(claim, " is already streamed by ", Describe(holder.producer),
                     "; refusing a second producer (", Describe(producer),
                     "): give each process its own rank, or a new attempt or job id"));
  }
  *reassigned =
      absl::StrCat(claim, " was streamed by ", Describe(holder.producer),
                   ", which has gone: ", Describe(producer), " is stored as attempt ", highest + 1);
  return highest + 1;
}

absl::StatusOr<AdmissionTicket> StreamAdmission::Admit(const v1::RankIdentity& identity,
                                                       bool new_attempt_if_taken) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Job*> job = LoadJob(identity.job_id());
  if (!job.ok()) return job.status();
  const std::optional<int32_t> subprocess_of = (*job)->SubprocessOf(identity);
  // A subprocess is counted, and stored, as the worker without a launcher rank it is.
  v1::RankIdentity as_counted;
  if (subprocess_of.has_value()) {
    as_counted = identity;
    as_counted.set_rank(-1);
  }
  const std::string name = RankName(subprocess_of.has_value() ? as_counted : identity);
  if (!(*job)->ranks.contains(name)) {
    if (max_ranks_per_job_ > 0 && (*job)->ranks.size() >= max_ranks_per_job_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "job \"", identity.job_id(), "\" already has ", (*job)->ranks.size(),
          " ranks, the collector's --max_ranks_per_job limit; rank ", name, " refused"));
    }
  }
  AdmissionTicket ticket;
  ticket.attempt_ = identity.attempt();
  if (subprocess_of.has_value()) {
    (*job)->AddSubprocess(*subprocess_of, ProducerOf(identity));
    ticket.subprocess_of_ = subprocess_of;
  } else if (identity.rank() >= 0) {
    absl::StatusOr<uint32_t> attempt =
        ChooseAttempt(identity, new_attempt_if_taken, **job, &ticket.reassigned_);
    if (!attempt.ok()) return attempt.status();
    Job::Stream& stream = (*job)->streams[{identity.rank(), *attempt}];
    if (stream.connections == 0) stream.producer = ProducerOf(identity);
    ++stream.connections;
    ticket.owner_ = this;
    ticket.job_id_ = identity.job_id();
    ticket.rank_ = identity.rank();
    ticket.attempt_ = *attempt;
  }
  (*job)->ranks.insert(name);
  return ticket;
}

void StreamAdmission::Release(const std::string& job_id, int32_t rank, uint32_t attempt) {
  absl::MutexLock lock(&mu_);
  auto job = jobs_.find(job_id);
  if (job == jobs_.end()) return;
  auto it = job->second->streams.find({rank, attempt});
  if (it != job->second->streams.end() && it->second.connections > 0) --it->second.connections;
}

}  // namespace memtrace::security
