// Valid serialized memtrace.v1.EventBatch inputs written by the real encoder: seeds for the
// batch fuzzer's corpus and the inputs of its replay test.
#ifndef MEMTRACE_PROTO_CODEC_FUZZ_SEED_BATCHES_H_
#define MEMTRACE_PROTO_CODEC_FUZZ_SEED_BATCHES_H_

#include <string>
#include <utility>
#include <vector>

namespace memtrace::fuzz {

// (name, serialized batch): a mixed batch (allocs, frees, a seq gap, a step going back in time,
// a loss marker, strings, counters), a two-event batch, and a strings-only batch.
std::vector<std::pair<std::string, std::string>> SeedBatches();

}  // namespace memtrace::fuzz

#endif  // MEMTRACE_PROTO_CODEC_FUZZ_SEED_BATCHES_H_
