// Converts between plain events and the columnar memtrace.v1.EventBatch wire form, and
// validates what arrives from the network before anything is stored.
#ifndef MEMTRACE_PROTO_CODEC_BATCH_CODEC_H_
#define MEMTRACE_PROTO_CODEC_BATCH_CODEC_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/codec/event.h"
#include "proto/memtrace/v1/events.pb.h"

namespace memtrace {

// Bounds a decoded batch must respect. Violations are INVALID_ARGUMENT (malformed) or
// RESOURCE_EXHAUSTED (too big), each with a reason naming the field and value.
struct BatchLimits {
  uint32_t max_events = 65536;
  uint32_t max_strings = 4096;
  uint32_t max_string_bytes = 4096;
};

// A batch's clock estimate may shift timestamps by at most this much (about 73 years): beyond
// it, it is not an estimate of a real clock but garbage, and ts + offset could overflow.
inline constexpr int64_t kMaxClockOffsetNs = int64_t{1} << 61;

struct DecodedBatch {
  std::vector<Event> events;
  std::vector<StringDef> strings;
  AgentCounterValues counters;
  std::optional<ClockEstimate> clock;
  // EventBatch.collector_time_horizon_ns: in a block the collector stored, the latest timestamp
  // it took as a time (RankState::SetTimeHorizon); none (unset or 0) is the largest int64.
  int64_t time_horizon_ns = kNoTimeHorizon;
};

// Encodes `events` (which must have strictly increasing seq) into `out`, replacing its contents.
// Columns whose values are all default are left empty.
void EncodeBatch(absl::Span<const Event> events, absl::Span<const StringDef> strings,
                 const AgentCounterValues& counters, v1::EventBatch* out);

// Decodes and validates a batch: column lengths, strictly increasing seq >= 1, known kinds,
// timestamps without overflow, string entries with ids >= 1 and bounded length, a clock
// estimate with a round trip >= 0 and |offset| <= kMaxClockOffsetNs.
absl::StatusOr<DecodedBatch> DecodeBatch(const v1::EventBatch& batch,
                                         const BatchLimits& limits = BatchLimits());

// The validation DecodeBatch applies to a batch's clock estimate.
absl::StatusOr<ClockEstimate> CheckClock(int64_t offset_ns, int64_t round_trip_ns);

}  // namespace memtrace

#endif  // MEMTRACE_PROTO_CODEC_BATCH_CODEC_H_
