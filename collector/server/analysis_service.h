// The memtrace.v1.Analysis service over an EventStore: each RPC reads the job's per-step rollups
// (analysis_loader.h), runs the pure analysis of query/analysis/ with the request's parameters
// (unset = that analysis's defaults) and returns its report (query/analysis/report_proto.h).
// Live and Leaks also read live sets: the rank asked about at its moment and, for Live, every
// other rank at the same moment. A job without step markers is analysed on its time buckets.
// Converted timelines are cached while the job does not change (timeline_cache.h).
//
// Errors: empty job id INVALID_ARGUMENT; unknown job, rank or step NOT_FOUND naming it; a rank
// without an OOM asked --at-oom NOT_FOUND. Reads never block ingest (store snapshots).
#ifndef MEMTRACE_COLLECTOR_SERVER_ANALYSIS_SERVICE_H_
#define MEMTRACE_COLLECTOR_SERVER_ANALYSIS_SERVICE_H_

#include "collector/server/timeline_cache.h"
#include "collector/store/event_store.h"
#include "proto/memtrace/v1/analysis.grpc.pb.h"

namespace memtrace::collector {

class AnalysisService final : public v1::Analysis::Service {
 public:
  // `store` is borrowed and must outlive the service. Thread-safe: the only state besides the
  // store is the cache of converted timelines (timeline_cache.h), checked against the store on
  // every call. Live and Leaks rebuild the ranks' live sets on up to `query_threads` threads
  // per call (parallel_for.h); <= 1 reads them one after another.
  explicit AnalysisService(const EventStore* store, int query_threads = 1)
      : store_(store), query_threads_(query_threads) {}

  grpc::Status Diverged(grpc::ServerContext* context, const v1::DivergedRequest* request,
                        v1::DivergenceReport* response) override;
  grpc::Status Growth(grpc::ServerContext* context, const v1::GrowthRequest* request,
                      v1::GrowthReport* response) override;
  // Curves for every rank (or request.rank); candidates and phase survivors from the live sets
  // of those ranks at request.at_ns (default: everything stored).
  grpc::Status Leaks(grpc::ServerContext* context, const v1::LeaksRequest* request,
                     v1::LeakReport* response) override;
  // The moment: at_ns on every rank; at_step = the end of that step on each rank (ranks
  // without that step are left out of the comparison); at_oom = the rank's first OOM event,
  // and that event's time on the other ranks; none = everything stored.
  grpc::Status Live(grpc::ServerContext* context, const v1::LiveRequest* request,
                    v1::LiveReport* response) override;
  grpc::Status Peak(grpc::ServerContext* context, const v1::PeakRequest* request,
                    v1::PeakReport* response) override;
  grpc::Status Headroom(grpc::ServerContext* context, const v1::HeadroomRequest* request,
                        v1::HeadroomReport* response) override;
  grpc::Status Compare(grpc::ServerContext* context, const v1::CompareRequest* request,
                       v1::CompareReport* response) override;

 private:
  const EventStore* const store_;
  const int query_threads_;
  TimelineCache cache_;
};

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_SERVER_ANALYSIS_SERVICE_H_
