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
  // Its start from /proc and the machine's boot (RankIdentity.start_ticks, boot_id), and the
  // run that started it (run_id): what tells it from another run's process with its pid.
  uint64_t start_ticks = 0;
  std::string boot_id;
  std::string run_id;
  // The same process: host and pid, and the start when both sides know it (a restarted
  // container can give a new process the old one's pid under the same hostname).
  bool operator==(const Producer& o) const {
    return pid == o.pid && host == o.host &&
           (start_ns == 0 || o.start_ns == 0 || start_ns == o.start_ns);
  }
};

Producer ProducerOf(const v1::RankIdentity& id) {
  return Producer{id.host(),        id.pid(),     id.process_start_ns(),
                  id.start_ticks(), id.boot_id(), id.run_id()};
}

// A rank as counted against the limit: the launcher rank, or host+device+pid(+start) without
// one (as the store names such workers, EventStore::ResolveRank).
std::string RankName(const v1::RankIdentity& id) {
  if (id.rank() >= 0) return absl::StrCat(id.rank());
  return absl::StrCat(id.host(), "/", id.device_index(), "/", id.pid(),
                      id.process_start_ns() != 0 ? absl::StrCat("/", id.process_start_ns()) : "");
}

// Whether `ancestor` is a process that started `child` (directly or through others) on its
// host: one of the child's ancestor pids, and that process, not another with its pid (a rerun's
// containers under one hostname number their processes alike). Told by its start from /proc on
// the same boot where both agents sent it; else by the run (memtrace run's run_id, which a
// child inherits) and by the agents' first looks, the ancestor's no later than the child's.
bool IsAncestorOf(const Producer& ancestor, const v1::RankIdentity& child) {
  if (ancestor.host != child.host()) return false;
  if (!ancestor.run_id.empty() && !child.run_id().empty() && ancestor.run_id != child.run_id()) {
    return false;
  }
  const auto& pids = child.ancestor_pids();
  for (int i = 0; i < pids.size(); ++i) {
    if (pids[i] != ancestor.pid) continue;
    const uint64_t ticks =
        i < child.ancestor_start_ticks_size() ? child.ancestor_start_ticks(i) : 0;
    if (ticks != 0 && ancestor.start_ticks != 0 && !ancestor.boot_id.empty() &&
        ancestor.boot_id == child.boot_id()) {
      return ticks == ancestor.start_ticks;
    }
    return ancestor.start_ns == 0 || child.process_start_ns() == 0 ||
           ancestor.start_ns <= child.process_start_ns();
  }
  return false;
}

// Whether `holder`, a process streaming a rank, was started (directly or through others) by
// `parent`: one of the holder's ancestors, told by its start from /proc on the same boot alone.
// The agents' first looks say nothing here: the parent's came after its child's.
bool WasStartedBy(const v1::RankIdentity& holder, const Producer& parent) {
  if (parent.host != holder.host() || parent.start_ticks == 0 || parent.boot_id.empty() ||
      parent.boot_id != holder.boot_id()) {
    return false;
  }
  if (!parent.run_id.empty() && !holder.run_id().empty() && parent.run_id != holder.run_id()) {
    return false;
  }
  for (int i = 0; i < holder.ancestor_pids_size() && i < holder.ancestor_start_ticks_size(); ++i) {
    if (holder.ancestor_pids(i) == parent.pid) {
      return holder.ancestor_start_ticks(i) == parent.start_ticks;
    }
  }
  return false;
}

// What WasStartedBy reads of a rank's process, kept while the job is.
v1::RankIdentity LineageOf(const v1::RankIdentity& id) {
  v1::RankIdentity lineage;
  lineage.set_host(id.host());
  lineage.set_run_id(id.run_id());
  lineage.set_boot_id(id.boot_id());
  *lineage.mutable_ancestor_pids() = id.ancestor_pids();
  *lineage.mutable_ancestor_start_ticks() = id.ancestor_start_ticks();
  return lineage;
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
    v1::RankIdentity lineage;  // LineageOf the producer's identity
    int connections = 0;       // tickets alive
  };
  absl::flat_hash_map<std::pair<int32_t, uint32_t>, Stream> streams;  // (rank, attempt)
  // Each launcher rank's subprocesses (stored without a launcher rank), which can start
  // subprocesses of the rank in turn, with the attempt of the rank each belongs to.
  struct Subprocess {
    Producer producer;
    uint32_t attempt = 0;
    bool started_the_rank = false;  // RankIdentity.started_the_rank
  };
  absl::flat_hash_map<int32_t, std::vector<Subprocess>> subprocesses;

  // Which rank's subprocess a process is, and as of which of its attempts.
  struct Relation {
    int32_t rank = 0;
    uint32_t attempt = 0;
    bool started_the_rank = false;
  };

  // The launcher rank and attempt `identity` is a subprocess of, if it is one (see the header):
  // a known subprocess reconnecting, or a process naming a rank whose process (or one of whose
  // subprocesses) is its ancestor, that is not itself a process streaming the rank. Of the
  // ancestor's attempt: a rerun moved to attempt 1 has children whose Hello inherits 0.
  // Failing those, the process that started the one holding its (rank, attempt), connected
  // after it (started_the_rank).
  std::optional<Relation> SubprocessOf(const v1::RankIdentity& identity) const {
    const int32_t rank = identity.rank();
    // Neither ancestors nor a /proc start (an older agent, an import): related to no process.
    if (rank < 0 || (identity.ancestor_pids().empty() && identity.start_ticks() == 0)) {
      return std::nullopt;
    }
    const Producer self = ProducerOf(identity);
    // Only a process whose (rank, attempt) another process holds is looked at further: a
    // subprocess inherits its attempt with its rank. The walk below is over the job's streams,
    // which every Hello of a 16 k-rank job would otherwise pay.
    auto own = streams.find({rank, identity.attempt()});
    if (own == streams.end() || own->second.producer == self) return std::nullopt;
    if (const Subprocess* known = FindSubprocess(rank, self)) {
      return Relation{rank, known->attempt, known->started_the_rank};
    }
    std::optional<Relation> found;
    for (const auto& [key, stream] : streams) {
      if (key.first != rank) continue;
      if (stream.producer == self) return std::nullopt;
      if (IsAncestorOf(stream.producer, identity) && (!found || key.second > found->attempt)) {
        found = Relation{rank, key.second, false};
      }
    }
    if (auto it = subprocesses.find(rank); !found && it != subprocesses.end()) {
      for (const Subprocess& s : it->second) {
        if (IsAncestorOf(s.producer, identity)) return Relation{rank, s.attempt, false};
      }
    }
    if (found) return found;
    // The process that started a holder of the rank, of any attempt, as above: a rerun under the
    // job id has its child moved to attempt 1 while this process's Hello still names 0, which
    // the first run's process holds.
    for (const auto& [key, stream] : streams) {
      if (key.first == rank && WasStartedBy(stream.lineage, self) &&
          (!found || key.second > found->attempt)) {
        found = Relation{rank, key.second, true};
      }
    }
    return found;
  }
  const Subprocess* FindSubprocess(int32_t rank, const Producer& producer) const {
    auto it = subprocesses.find(rank);
    if (it == subprocesses.end()) return nullptr;
    for (const Subprocess& s : it->second) {
      if (s.producer == producer) return &s;
    }
    return nullptr;
  }
  void AddSubprocess(int32_t rank, uint32_t attempt, const Producer& producer,
                     bool started_the_rank) {
    if (FindSubprocess(rank, producer) == nullptr)
      subprocesses[rank].push_back({producer, attempt, started_the_rank});
  }
  size_t SubprocessCount(int32_t rank) const {
    auto it = subprocesses.find(rank);
    return it == subprocesses.end() ? 0 : it->second.size();
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
    started_the_rank_ = other.started_the_rank_;
  }
  return *this;
}

AdmissionTicket::~AdmissionTicket() { Release(); }

void AdmissionTicket::Release() {
  if (owner_ != nullptr) owner_->Release(job_id_, rank_, attempt_);
  owner_ = nullptr;
}

StreamAdmission::StreamAdmission(uint32_t max_ranks_per_job, RankLister lister,
                                 uint32_t max_subprocesses_per_rank)
    : max_ranks_per_job_(max_ranks_per_job),
      max_subprocesses_per_rank_(max_subprocesses_per_rank),
      lister_(std::move(lister)) {}

StreamAdmission::~StreamAdmission() = default;

absl::StatusOr<StreamAdmission::Job*> StreamAdmission::LoadJob(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it != jobs_.end()) return it->second.get();
  auto job = std::make_unique<Job>();
  absl::StatusOr<std::vector<v1::RankSummary>> stored = lister_(job_id);
  if (!stored.ok() && !absl::IsNotFound(stored.status())) return stored.status();
  if (stored.ok()) {
    for (const v1::RankSummary& r : *stored) {
      if (r.identity().has_subprocess_of_rank()) {
        job->AddSubprocess(r.identity().subprocess_of_rank(), r.identity().attempt(),
                           ProducerOf(r.identity()), r.identity().started_the_rank());
        continue;  // counted per rank, not against max_ranks_per_job
      }
      job->ranks.insert(RankName(r.identity()));
      if (r.identity().rank() >= 0) {
        job->streams.emplace(std::make_pair(r.identity().rank(), r.identity().attempt()),
                             Job::Stream{ProducerOf(r.identity()), LineageOf(r.identity()), 0});
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
  AdmissionTicket ticket;
  ticket.attempt_ = identity.attempt();
  // A subprocess counts against its rank's bound, not the job's ranks: an RL job's every rank
  // may start an engine or two.
  if (const auto subprocess_of = (*job)->SubprocessOf(identity)) {
    const auto [rank, attempt, started_the_rank] = *subprocess_of;
    const Producer producer = ProducerOf(identity);
    if ((*job)->FindSubprocess(rank, producer) == nullptr && max_subprocesses_per_rank_ > 0 &&
        (*job)->SubprocessCount(rank) >= max_subprocesses_per_rank_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("job \"", identity.job_id(), "\" rank ", rank, " already has ",
                       (*job)->SubprocessCount(rank),
                       " subprocesses, the collector's --max_subprocesses_per_rank limit; pid ",
                       identity.pid(), " refused"));
    }
    (*job)->AddSubprocess(rank, attempt, producer, started_the_rank);
    ticket.subprocess_of_ = rank;
    ticket.started_the_rank_ = started_the_rank;
    ticket.attempt_ = attempt;
    return ticket;
  }
  const std::string name = RankName(identity);
  if (!(*job)->ranks.contains(name)) {
    if (max_ranks_per_job_ > 0 && (*job)->ranks.size() >= max_ranks_per_job_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "job \"", identity.job_id(), "\" already has ", (*job)->ranks.size(),
          " ranks, the collector's --max_ranks_per_job limit; rank ", name, " refused"));
    }
  }
  if (identity.rank() >= 0) {
    absl::StatusOr<uint32_t> attempt =
        ChooseAttempt(identity, new_attempt_if_taken, **job, &ticket.reassigned_);
    if (!attempt.ok()) return attempt.status();
    Job::Stream& stream = (*job)->streams[{identity.rank(), *attempt}];
    if (stream.connections == 0) {
      stream.producer = ProducerOf(identity);
      stream.lineage = LineageOf(identity);
    }
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
