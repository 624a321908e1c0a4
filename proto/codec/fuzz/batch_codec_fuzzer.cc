// libFuzzer target over what the collector does with each batch off the network: parse a
// memtrace.v1.EventBatch from arbitrary bytes, DecodeBatch (validation) under the default and
// under tight limits. Whatever is accepted must respect the validator's promises (count,
// strictly increasing seq >= 1, known kinds, string ids >= 1 within the length bound) and must
// survive EncodeBatch -> DecodeBatch unchanged. The collector's fast path, DecodeBatchWire,
// must agree with protobuf + DecodeBatch on every input (same events, strings, counters and
// clock, or the same error), and AppendBatchWire must write the bytes protobuf writes. A
// violated promise aborts (a finding).
//   bazel build --config=fuzz //proto/codec/fuzz:batch_codec_fuzzer
//   tools/fuzz.sh runs it for a bounded time.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "proto/codec/batch_codec.h"
#include "proto/codec/batch_wire.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/memtrace/v1/events.pb.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "batch_codec_fuzzer: violated: %s\n", what);
    std::abort();
  }
}

void CheckAccepted(const memtrace::v1::EventBatch& batch, const memtrace::DecodedBatch& d,
                   const memtrace::BatchLimits& limits) {
  using memtrace::Event;
  Check(d.events.size() == batch.count(), "decoded event count equals batch.count");
  Check(d.events.size() <= limits.max_events, "event count within limit");
  Check(d.strings.size() <= limits.max_strings, "string entries within limit");
  for (size_t i = 0; i < d.events.size(); ++i) {
    const Event& e = d.events[i];
    Check(e.seq >= 1, "seq >= 1");
    Check(i == 0 || e.seq > d.events[i - 1].seq, "seq strictly increasing");
    const uint32_t kind = static_cast<uint32_t>(e.kind);
    Check(kind >= 1 && kind <= memtrace::kMaxEventKind, "known kind");
  }
  for (const memtrace::StringDef& s : d.strings) {
    Check(s.id >= 1, "string id >= 1");
    Check(s.value.size() <= limits.max_string_bytes, "string length within limit");
  }
  // Round trip: what the collector stores (re-encoded blocks) must decode to the same events.
  memtrace::v1::EventBatch again;
  memtrace::EncodeBatch(d.events, d.strings, d.counters, &again);
  absl::StatusOr<memtrace::DecodedBatch> d2 = memtrace::DecodeBatch(again, limits);
  Check(d2.ok(), "re-encoded batch decodes");
  Check(d2->events == d.events, "re-encoded events equal");
  Check(d2->strings == d.strings, "re-encoded strings equal");
  // The fast writer writes what protobuf writes.
  std::string wire;
  memtrace::AppendBatchWire(d.events, d.strings, &d.counters, nullptr, &wire);
  Check(wire == again.SerializeAsString(), "AppendBatchWire bytes equal protobuf's");
  // And the wire form itself round-trips through serialization.
  std::string bytes;
  Check(again.SerializeToString(&bytes), "serialize");
  memtrace::v1::EventBatch parsed;
  Check(parsed.ParseFromString(bytes), "re-parse");
  absl::StatusOr<memtrace::DecodedBatch> d3 = memtrace::DecodeBatch(parsed, limits);
  Check(d3.ok() && d3->events == d.events, "re-parsed events equal");
}

}  // namespace

// Protobuf logs every invalid UTF-8 string it refuses; at 100 k inputs/s that buries findings.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int,
                                     const std::string&) {});
  return 0;
}

// DecodeBatchWire against ParseFromArray + DecodeBatch on the same bytes and limits.
void CheckWireAgrees(const uint8_t* data, size_t size, const memtrace::BatchLimits& limits) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<memtrace::DecodedBatch> fast = memtrace::DecodeBatchWire(bytes, limits);
  memtrace::v1::EventBatch batch;
  if (!batch.ParseFromArray(data, static_cast<int>(size))) {
    Check(!fast.ok() && fast.status().code() == absl::StatusCode::kInvalidArgument,
          "bytes protobuf refuses are refused by DecodeBatchWire");
    return;
  }
  absl::StatusOr<memtrace::DecodedBatch> slow = memtrace::DecodeBatch(batch, limits);
  Check(fast.ok() == slow.ok(), "DecodeBatchWire accepts what DecodeBatch accepts");
  if (!slow.ok()) {
    Check(fast.status() == slow.status(), "DecodeBatchWire gives DecodeBatch's error");
    return;
  }
  Check(fast->events == slow->events, "DecodeBatchWire events equal");
  // What the store keeps of a batch it stores whole decodes to the same events.
  std::string kept;
  const memtrace::ClockEstimate clock{-5, 6};
  if (memtrace::AppendEventsOnly(bytes, &clock, &kept)) {
    memtrace::BatchLimits unlimited;
    unlimited.max_events = 1u << 31;
    unlimited.max_strings = 1u << 30;
    unlimited.max_string_bytes = 1u << 30;
    absl::StatusOr<memtrace::DecodedBatch> again = memtrace::DecodeBatchWire(kept, unlimited);
    Check(again.ok(), "events-only bytes decode");
    Check(again->events == fast->events, "events-only bytes hold the same events");
    Check(again->strings.empty(), "events-only bytes hold no strings");
    Check(again->clock == clock, "events-only bytes carry the clock given");
  }
  Check(fast->strings == slow->strings, "DecodeBatchWire strings equal");
  Check(fast->clock == slow->clock, "DecodeBatchWire clock equal");
  Check(fast->time_horizon_ns == slow->time_horizon_ns, "DecodeBatchWire time horizon equal");
  Check(fast->counters.events_recorded == slow->counters.events_recorded &&
            fast->counters.events_lost == slow->counters.events_lost &&
            fast->counters.spool_bytes == slow->counters.spool_bytes &&
            fast->counters.reconnects == slow->counters.reconnects &&
            fast->counters.cupti_records_dropped == slow->counters.cupti_records_dropped,
        "DecodeBatchWire counters equal");
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CheckWireAgrees(data, size, memtrace::BatchLimits());
  memtrace::BatchLimits tight_limits;
  tight_limits.max_events = 4;
  tight_limits.max_strings = 2;
  tight_limits.max_string_bytes = 8;
  CheckWireAgrees(data, size, tight_limits);
  memtrace::v1::EventBatch batch;
  if (!batch.ParseFromArray(data, static_cast<int>(size))) return 0;
  const memtrace::BatchLimits defaults;
  absl::StatusOr<memtrace::DecodedBatch> decoded = memtrace::DecodeBatch(batch, defaults);
  if (decoded.ok()) {
    CheckAccepted(batch, *decoded, defaults);
  } else {
    Check(!decoded.status().message().empty(), "a rejection has a reason");
    const absl::StatusCode code = decoded.status().code();
    Check(code == absl::StatusCode::kInvalidArgument ||
              code == absl::StatusCode::kResourceExhausted,
          "rejections are INVALID_ARGUMENT or RESOURCE_EXHAUSTED");
  }
  // Tight limits: the same checks must hold at the boundaries.
  memtrace::BatchLimits tight;
  tight.max_events = 4;
  tight.max_strings = 2;
  tight.max_string_bytes = 8;
  absl::StatusOr<memtrace::DecodedBatch> small = memtrace::DecodeBatch(batch, tight);
  if (small.ok()) CheckAccepted(batch, *small, tight);
  return 0;
}
