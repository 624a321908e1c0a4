// The collector's bounds on what one stream may send, beyond what DecodeBatch checks per batch
// (BatchLimits: events per batch, string entries per batch, bytes per string).
#ifndef MEMTRACE_COLLECTOR_SECURITY_INGEST_LIMITS_H_
#define MEMTRACE_COLLECTOR_SECURITY_INGEST_LIMITS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "proto/codec/batch_codec.h"

namespace memtrace::security {

struct IngestLimits {
  // Distinct ranks per job (StreamAdmission); 0 = unbounded.
  uint32_t max_ranks_per_job = 16384;
  // Subprocesses of one launcher rank (StreamAdmission; not counted in max_ranks_per_job);
  // 0 = unbounded.
  uint32_t max_subprocesses_per_rank = 64;
  // Size of a stream's string table: string ids above it are refused. The agent interns at most
  // 65536 strings (TransportOptions::max_strings); importers may define more.
  uint32_t max_string_table = 1 << 18;
};

// RESOURCE_EXHAUSTED naming the id when a string entry of `batch` has an id above
// limits.max_string_table, or an event refers to one (its tag or source). Ids are dense from 1
// per stream, so the id bounds the table, and with it the per-tag and per-source counters the
// collector keeps for the stream (collector/rollup/id_table.h). INVALID_ARGUMENT when an
// allocation or mapping has a memory kind outside memtrace.v1.MemoryKind's range (below 128):
// the kinds are counted per stream too.
absl::Status CheckIds(const DecodedBatch& batch, const IngestLimits& limits);

}  // namespace memtrace::security

#endif  // MEMTRACE_COLLECTOR_SECURITY_INGEST_LIMITS_H_
