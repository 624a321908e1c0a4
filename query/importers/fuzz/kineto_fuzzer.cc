// libFuzzer target over what `memtrace import` does with a Kineto (PyTorch profiler) trace a
// user hands it: ReadKinetoJsonHeader and ParseKinetoJson on arbitrary bytes, then
// RecordKinetoTrace of whatever parsed, with and without CPU memory. Promises checked (a
// violation aborts, a finding):
//   - a parse error is DATA_LOSS (malformed JSON) or INVALID_ARGUMENT (no traceEvents), the
//     codes kineto_parser.h documents; a trace that parses has a header that reads;
//   - RecordKinetoTrace without a checkpoint succeeds; the sink gets exactly
//     stats.events_recorded events, in non-decreasing time; ALLOC / FREE carry bytes > 0;
//     allocs + frees = memory_events;
//   - every FREE finds a live ALLOC at its address (the baseline seeding's promise in
//     kineto_events.h), so the collector never sees a free it cannot match.
//   bazel build --config=fuzz //query/importers/fuzz:kineto_fuzzer
//   tools/fuzz.sh runs it for a bounded time.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "query/importers/kineto_events.h"
#include "query/importers/kineto_parser.h"
#include "query/importers/recording_sink.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "kineto_fuzzer: violated: %s\n", what);
    std::abort();
  }
}

void CheckRecorded(memtrace::importers::KinetoTrace trace, bool include_cpu) {
  using memtrace::Event;
  using memtrace::EventKind;
  memtrace::importers::RecordingSink sink;
  memtrace::importers::KinetoEventOptions options;
  options.include_cpu_memory = include_cpu;
  absl::StatusOr<memtrace::importers::KinetoEventStats> stats =
      memtrace::importers::RecordKinetoTrace(&trace, options, sink);
  Check(stats.ok(), "RecordKinetoTrace without a checkpoint succeeds");
  const std::vector<Event> events = sink.events();
  Check(events.size() == stats->events_recorded, "sink holds stats.events_recorded events");
  Check(stats->allocs + stats->frees == stats->memory_events, "allocs + frees = memory_events");
  // Live blocks by address, of every memory kind: what the collector's live set holds
  // (RankState: an ALLOC at a live address replaces the block there).
  std::map<uint64_t, uint64_t> live;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    Check(i == 0 || e.ts_ns >= events[i - 1].ts_ns, "events in non-decreasing time");
    if (e.kind != EventKind::kAlloc && e.kind != EventKind::kFree) continue;
    Check(e.bytes > 0, "ALLOC / FREE bytes > 0");
    if (e.kind == EventKind::kAlloc) {
      live[e.address] = e.bytes;
    } else {
      Check(live.erase(e.address) == 1, "every FREE matches a live ALLOC");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view json(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<memtrace::importers::KinetoDistributedInfo> header =
      memtrace::importers::ReadKinetoJsonHeader(json, "fuzz.json");
  absl::StatusOr<memtrace::importers::KinetoTrace> trace =
      memtrace::importers::ParseKinetoJson(json, "fuzz.json");
  if (!trace.ok()) {
    const absl::StatusCode code = trace.status().code();
    Check(code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kInvalidArgument,
          "parse errors are DATA_LOSS or INVALID_ARGUMENT");
    return 0;
  }
  Check(header.ok(), "a trace that parses has a header that reads");
  CheckRecorded(*trace, /*include_cpu=*/true);
  CheckRecorded(*std::move(trace), /*include_cpu=*/false);
  return 0;
}
