// The agent's hot path on real CUpti_ActivityMemory4 records laid out in memory as CUPTI lays
// out a completed activity buffer (no GPU needed: cuptiActivityGetNextRecord walks any buffer):
//   - translation (agent/cupti RecordTranslator) into the cheapest possible sink, per core,
//     against two baselines: memcpy of the buffer's bytes and the bare record walk;
//   - batching: batch_wire's AppendBatchWire (agent side) and DecodeBatchWire (collector), against
//     protobuf's way to the same bytes: EncodeBatch + serialization, parse + DecodeBatch;
//   - Transport::Record per event while the sender streams to a real collector, against copying
//     the same events into an array;
//   - the latency one completed buffer adds to CUPTI's delivery thread: TranslateBuffer into the
//     real Transport, against memcpy of the buffer.
#ifndef MEMTRACE_TOOLS_BENCH_AGENT_HOT_PATH_H_
#define MEMTRACE_TOOLS_BENCH_AGENT_HOT_PATH_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/cupti/correlation_table.h"

namespace memtrace::bench {

// A completed activity buffer of MEMORY2 records.
struct CuptiBuffer {
  std::vector<uint64_t> storage;  // 8-byte aligned, as CUPTI requires
  size_t valid_bytes = 0;
  size_t records = 0;
  uint8_t* data() { return reinterpret_cast<uint8_t*>(storage.data()); }
};

// Fills `bytes` worth of CUpti_ActivityMemory4 records: alloc/release pairs over 512 addresses
// with caching-allocator sizes, correlation ids from 1; each allocation's id is put in `table`
// with a tag and source, as the driver API callbacks would (may be null: no tags).
CuptiBuffer BuildMemoryBuffer(size_t bytes, cupti::CorrelationTable* table);

// Adds `delta_ns` to every record's timestamp (a later buffer of the same shape).
void ShiftTimestamps(CuptiBuffer* buffer, uint64_t delta_ns);

struct HotPathOptions {
  size_t buffer_bytes = 8 << 20;
  int buffers = 32;         // buffers translated per measurement
  std::string data_dir;     // for the collector the Transport streams to (emptied)
};

struct HotPathResult {
  size_t record_bytes = 0;  // sizeof(CUpti_ActivityMemory4)
  size_t records_per_buffer = 0;
  double translate_events_per_s = 0;
  double translate_ordered_events_per_s = 0;  // through the agent's RecordOrder
  double walk_records_per_s = 0;
  double memcpy_records_per_s = 0;
  double encode_events_per_s = 0;     // EncodeBatch + SerializeToString
  double build_events_per_s = 0;      // EncodeBatch alone (the message's columns)
  double decode_events_per_s = 0;
  // The same batches through proto/codec/batch_wire (what the agent and collector use).
  double wire_encode_events_per_s = 0;  // AppendBatchWire
  double wire_decode_events_per_s = 0;  // DecodeBatchWire
  double wire_bytes_per_event = 0;
  double record_ns_per_event = 0;
  double record_many_ns_per_event = 0;  // Transport::RecordMany, 128 events a call
  double copy_ns_per_event = 0;
  double buffer_latency_ms_median = 0;
  double buffer_latency_ms_max = 0;
  // The same, through the RecordOrder the agent puts before its Transport (a step held).
  double buffer_latency_ordered_ms_median = 0;
  double buffer_memcpy_ms = 0;
  uint64_t events_lost = 0;
};

absl::StatusOr<HotPathResult> MeasureHotPath(const HotPathOptions& options);

}  // namespace memtrace::bench

#endif  // MEMTRACE_TOOLS_BENCH_AGENT_HOT_PATH_H_
