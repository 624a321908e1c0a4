// Decides whether an agent's Hello may open its stream: bounds the ranks of a job and keeps one
// stream to one producer.
//
// Two rules, checked before the store sees the identity (so a refused Hello stores nothing):
//  - at most max_ranks_per_job distinct ranks per job (attempts of a rank count once; a worker
//    without a launcher rank counts as its host+device+pid): RESOURCE_EXHAUSTED beyond;
//  - a (job, rank, attempt) is one process's (host, pid, process start). Sequence numbers are
//    per producer: a second producer's events would be dropped as resends of the first's (the
//    store keeps one high-water mark per stream), i.e. silently lost. So another process is
//    refused with ALREADY_EXISTS while the holder, or any other process streaming the rank at
//    another attempt, is connected (two live processes claim the rank), and also after it is
//    gone unless its Hello asks for a new attempt
//    (Hello.new_attempt_if_taken, which agents set: a Ray actor restarted in a new process, a
//    job rerun under the same id). Then it is stored as the rank's next attempt (one past the
//    highest it holds), and every later Hello of that process goes on as it, also after a
//    collector restart. The same process reconnecting is admitted.
// Except a rank's subprocess: a process naming a rank one of whose ancestors
// (RankIdentity.ancestor_pids: its parent, or further up, as through a forkserver) is a process
// the job holds for that rank on the same host (or one of that rank's subprocesses), started no
// later than it, and whose (rank, attempt) another process holds (a subprocess inherits the
// attempt with the rank), is no second producer of the rank but a process of its own that inherited
// the rank's environment (a vLLM or SGLang engine, a compile worker). It is admitted as that
// rank's subprocess (AdmissionTicket::subprocess_of), which the store names like a worker
// without a launcher rank, connected parent or not, as of the rank's attempt that started it.
// The other way round too: a process that started the one streaming its (rank, attempt), and
// connected after it (an engine it started initialised CUDA first and took the rank), is
// stored beside the rank as its subprocesses are (AdmissionTicket::started_the_rank), when its
// /proc start on the same boot shows it is that process's ancestor; refused as before without.
// A rank's subprocesses are bounded per rank (max_subprocesses_per_rank, RESOURCE_EXHAUSTED
// beyond), not counted against max_ranks_per_job.
// What the store already holds is read once per job (the first Hello of that job since the
// collector started), then kept in memory; a stream stored before counts as not connected.
// Thread-safe.
#ifndef MEMTRACE_COLLECTOR_SECURITY_STREAM_ADMISSION_H_
#define MEMTRACE_COLLECTOR_SECURITY_STREAM_ADMISSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "proto/memtrace/v1/events.pb.h"
#include "proto/memtrace/v1/query.pb.h"

namespace memtrace::security {

class StreamAdmission;

// What Admit grants: the attempt the stream is stored as. While it lives the stream counts as
// connected; destroying it (when the stream ends) releases that. Movable, not copyable.
class AdmissionTicket {
 public:
  AdmissionTicket() = default;
  AdmissionTicket(AdmissionTicket&& other) noexcept;
  AdmissionTicket& operator=(AdmissionTicket&& other) noexcept;
  AdmissionTicket(const AdmissionTicket&) = delete;
  AdmissionTicket& operator=(const AdmissionTicket&) = delete;
  ~AdmissionTicket();

  uint32_t attempt() const { return attempt_; }
  // Non-empty when the attempt is not the Hello's own: why (for the collector's log).
  const std::string& reassigned() const { return reassigned_; }
  // Set when the process is a subprocess of this launcher rank (see the file comment): it is to
  // be stored without a launcher rank, as that rank's subprocess, at attempt() (the attempt of
  // the rank that started it).
  std::optional<int32_t> subprocess_of() const { return subprocess_of_; }
  // With subprocess_of: the process started the one streaming the rank, and connected after it
  // (RankIdentity.started_the_rank).
  bool started_the_rank() const { return started_the_rank_; }

 private:
  friend class StreamAdmission;
  void Release();

  StreamAdmission* owner_ = nullptr;  // null: nothing to release (a worker without a rank)
  std::string job_id_;
  int32_t rank_ = -1;
  uint32_t attempt_ = 0;
  std::string reassigned_;
  std::optional<int32_t> subprocess_of_;
  bool started_the_rank_ = false;
};

class StreamAdmission {
 public:
  // The streams stored for a job (EventStore::ListRanks); NOT_FOUND = none yet.
  using RankLister =
      std::function<absl::StatusOr<std::vector<v1::RankSummary>>(absl::string_view job_id)>;

  // max_ranks_per_job == 0 means unbounded; so does max_subprocesses_per_rank, the bound on
  // one launcher rank's subprocesses (which do not count against max_ranks_per_job).
  StreamAdmission(uint32_t max_ranks_per_job, RankLister lister,
                  uint32_t max_subprocesses_per_rank = 64);
  ~StreamAdmission();

  // A ticket for the attempt to store the stream as, or RESOURCE_EXHAUSTED / ALREADY_EXISTS (see
  // the file comment) with a message naming the job, rank and producers; an error of the lister
  // is passed on. The ticket must not outlive this object.
  absl::StatusOr<AdmissionTicket> Admit(const v1::RankIdentity& identity,
                                        bool new_attempt_if_taken = false);

 private:
  friend class AdmissionTicket;
  struct Job;
  absl::StatusOr<Job*> LoadJob(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<uint32_t> ChooseAttempt(const v1::RankIdentity& identity,
                                         bool new_attempt_if_taken, Job& job,
                                         std::string* reassigned)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Release(const std::string& job_id, int32_t rank, uint32_t attempt);

  const uint32_t max_ranks_per_job_;
  const uint32_t max_subprocesses_per_rank_;
  const RankLister lister_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace memtrace::security

#endif  // MEMTRACE_COLLECTOR_SECURITY_STREAM_ADMISSION_H_
