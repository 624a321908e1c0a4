// memtrace.v1.EventBatch straight between events and wire bytes, without protobuf's message
// objects in between. Every batch passes through this twice on the hot path (the agent seals
// it, the collector decodes it) and again whenever a stored block is read, and the profile of
// ingest showed protobuf's serialize / byte-size / parse of the packed columns as the largest
// share of CPU (docs/PERFORMANCE.md, "Profiles"): these functions write and read the same
// bytes in one pass over the events.
//
// They are exact stand-ins for batch_codec + protobuf: AppendBatchWire writes byte for byte
// what EncodeBatch + SerializeToString write, and DecodeBatchWire accepts exactly the inputs
// that ParseFromArray + DecodeBatch accept, with the same result and the same error (checked on
// every input by the batch fuzzer). Encodings protobuf accepts but no memtrace writer produces
// (unpacked or split columns, repeated singular messages, groups, wrong wire types) are handed
// to protobuf itself, so the fast path only ever sees the canonical shape.
#ifndef MEMTRACE_PROTO_CODEC_BATCH_WIRE_H_
#define MEMTRACE_PROTO_CODEC_BATCH_WIRE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/codec/batch_codec.h"
#include "proto/codec/event.h"

namespace memtrace {

// Appends to `out` the wire form of the batch of `events` (strictly increasing seq), `strings`,
// and, when not null, `counters` (field 16) and `clock` (field 17). With counters set and clock
// null, the bytes equal EncodeBatch(events, strings, *counters, &b) + b.SerializeToString.
void AppendBatchWire(absl::Span<const Event> events, absl::Span<const StringDef> strings,
                     const AgentCounterValues* counters, const ClockEstimate* clock,
                     std::string* out);

// The counters (field 16) and clock (field 17) fields alone. Appended to a batch's bytes that
// have neither, they give the batch with both: the agent seals a batch once and adds its
// latest counters and clock estimate each time it writes it.
void AppendCountersField(const AgentCounterValues& counters, std::string* out);
void AppendClockField(const ClockEstimate& clock, std::string* out);
// The collector's time horizon (field 18) for a block it stores; nothing for kNoTimeHorizon.
void AppendTimeHorizonField(int64_t horizon_ns, std::string* out);

// Decodes EventBatch wire bytes as ParseFromArray + DecodeBatch(batch, limits) would. Bytes
// that do not parse as an EventBatch are INVALID_ARGUMENT "not a valid memtrace.v1.EventBatch
// (...)"; every other error is DecodeBatch's.
absl::StatusOr<DecodedBatch> DecodeBatchWire(absl::string_view bytes,
                                             const BatchLimits& limits = BatchLimits());
// The same into `out`, reusing its vectors' memory (a collector decodes batch after batch of
// the same size); on an error `out` holds no usable batch.
absl::Status DecodeBatchWire(absl::string_view bytes, const BatchLimits& limits,
                             DecodedBatch* out);

// Where a decode may stop: before the first event whose seq is above last_seq or whose
// timestamp is above max_ts_ns, unless that timestamp is also past the batch's time horizon
// (DecodedBatch::time_horizon_ns: no time, held at the one before it). A replay up to a moment
// needs only that prefix of a block.
struct DecodeCutoff {
  uint64_t last_seq = UINT64_MAX;
  int64_t max_ts_ns = INT64_MAX;
};

// DecodeBatchWire up to `cutoff`: the events DecodeBatchWire returns, up to and not including
// the first one past the cutoff, and the batch's strings, counters and clock. The columns are
// not decoded past that event, so an error in the events from it on may go unreported; one in
// the events before it is reported as DecodeBatchWire reports it. *stopped says whether the
// batch has an event past the cutoff (then a replay need not read the batches after it).
absl::Status DecodeBatchWirePrefix(absl::string_view bytes, const BatchLimits& limits,
                                   const DecodeCutoff& cutoff, DecodedBatch* out, bool* stopped);

// Appends the events of the EventBatch bytes `batch` without re-encoding them: its fields but
// strings, counters, clock and time horizon (15, 16, 17, 18), followed by `clock` when not null.
// This is what AppendBatchWire(events, {}, nullptr, clock) writes for the same events (the same
// bytes when `batch` was written by AppendBatchWire), for the collector's store, which keeps a
// received batch whole. False, appending nothing, when `batch` is not in the canonical shape
// DecodeBatchWire reads itself (the caller then encodes the decoded events).
bool AppendEventsOnly(absl::string_view batch, const ClockEstimate* clock, std::string* out);

// Appends a protobuf varint / the tag of (field, wire type); for callers framing a batch inside
// another message (an IngestRequest is field 2, length-delimited, around the batch's bytes).
void AppendVarint(uint64_t value, std::string* out);

}  // namespace memtrace

#endif  // MEMTRACE_PROTO_CODEC_BATCH_WIRE_H_
