// Decides whether an agent's Hello may open its stream: bounds the ranks of a job and keeps one
// stream to one producer.
//
// Two rules, checked before the store sees the identity (so a refused Hello stores nothing):
//  - at most max_ranks_per_job distinct ranks per job (attempts of a rank count once; a worker
//    without a launcher rank counts as its host+device+pid): RESOURCE_EXHAUSTED beyond;
//  - a (job, rank, attempt) that some process (host, pid) has streamed is refused to another
//    process with ALREADY_EXISTS. Sequence numbers are per producer: a second producer's events
//    would be dropped as resends of the first's (the store keeps one high-water mark per
//    stream), i.e. silently lost. The same process reconnecting is admitted.
// What the store already holds is read once per job (the first Hello of that job since the
// collector started), then kept in memory. Thread-safe.
#ifndef MEMTRACE_COLLECTOR_SECURITY_STREAM_ADMISSION_H_
#define MEMTRACE_COLLECTOR_SECURITY_STREAM_ADMISSION_H_

#include <cstdint>
#include <functional>
#include <memory>
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

class StreamAdmission {
 public:
  // The streams stored for a job (EventStore::ListRanks); NOT_FOUND = none yet.
  using RankLister =
      std::function<absl::StatusOr<std::vector<v1::RankSummary>>(absl::string_view job_id)>;

  // max_ranks_per_job == 0 means unbounded.
  StreamAdmission(uint32_t max_ranks_per_job, RankLister lister);
  ~StreamAdmission();

  // OK and remembered, or RESOURCE_EXHAUSTED / ALREADY_EXISTS (see the file comment) with a
  // message naming the job, rank and producers; an error of the lister is passed on.
  absl::Status Admit(const v1::RankIdentity& identity);

 private:
  struct Job;
  absl::StatusOr<Job*> LoadJob(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint32_t max_ranks_per_job_;
  const RankLister lister_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace memtrace::security

#endif  // MEMTRACE_COLLECTOR_SECURITY_STREAM_ADMISSION_H_
