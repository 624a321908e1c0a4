// The memtrace.v1.Query service over an EventStore: jobs, ranks, timelines and rollups (read
// from the rollup rows, never from raw events), live sets and raw events. Unknown jobs are
// NOT_FOUND with the job name in the message; an empty job_id is INVALID_ARGUMENT.
#ifndef MEMTRACE_COLLECTOR_SERVER_QUERY_SERVICE_H_
#define MEMTRACE_COLLECTOR_SERVER_QUERY_SERVICE_H_

#include "collector/store/event_store.h"
#include "proto/memtrace/v1/query.grpc.pb.h"

namespace memtrace::collector {

class QueryService final : public v1::Query::Service {
 public:
  // `store` is borrowed and must outlive the service. Thread-safe.
  explicit QueryService(const EventStore* store) : store_(store) {}

  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status ListRanks(grpc::ServerContext* context, const v1::ListRanksRequest* request,
                         v1::ListRanksResponse* response) override;
  // Rollup rows overlapping [from_ns, to_ns] (0 = open end), per rank (or only `rank`).
  grpc::Status Timeline(grpc::ServerContext* context, const v1::TimelineRequest* request,
                        v1::TimelineResponse* response) override;
  grpc::Status GetRollups(grpc::ServerContext* context, const v1::GetRollupsRequest* request,
                          v1::GetRollupsResponse* response) override;
  grpc::Status LiveAt(grpc::ServerContext* context, const v1::LiveAtRequest* request,
                      v1::LiveAtResponse* response) override;
  grpc::Status ReadEvents(grpc::ServerContext* context, const v1::ReadEventsRequest* request,
                          v1::ReadEventsResponse* response) override;

 private:
  const EventStore* const store_;
};

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_SERVER_QUERY_SERVICE_H_
