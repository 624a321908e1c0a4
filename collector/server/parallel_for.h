// Runs independent pieces of one query on a few threads: a whole-job `live` or `leaks` rebuilds
// one live set per rank (checkpoint + replay of that rank's blocks), and each rank's is
// independent of the others.
#ifndef MEMTRACE_COLLECTOR_SERVER_PARALLEL_FOR_H_
#define MEMTRACE_COLLECTOR_SERVER_PARALLEL_FOR_H_

#include <cstddef>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace memtrace::collector {

// Calls `work(i)` once for every i in [0, n), on up to `threads` threads (the calling thread is
// one of them; threads <= 1 runs everything on it, in order). Returns OK, or the error of the
// lowest i that failed: items are handed out in order, so every item below a failed one has run
// and the error does not depend on the scheduling. After a failure, the threads stop taking new
// items.
// `work` must be safe to call concurrently for different i.
absl::Status ParallelFor(size_t n, int threads, absl::FunctionRef<absl::Status(size_t)> work);

// The threads a query uses by default: the machine's cores, at most 8 (beyond that, ranks are
// read faster than the store's block cache and the disk serve them).
int DefaultQueryThreads();

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_SERVER_PARALLEL_FOR_H_
