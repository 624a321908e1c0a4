// `memtrace timeline --job J`: per-rank live bytes per step (or time bucket) from the
// collector's rollups: the floor, the peak and the value at the end of each step.
#ifndef MEMTRACE_QUERY_CLI_COMMANDS_TIMELINE_H_
#define MEMTRACE_QUERY_CLI_COMMANDS_TIMELINE_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/memtrace/v1/query.pb.h"
#include "query/cli/command.h"
#include "query/cli/output.h"

namespace memtrace::cli {

Command TimelineCommand();

enum class TimelineValue { kFloor, kPeak, kEnd };

// How a TimelineResponse is shown; every field is a client-side filter or layout choice.
struct TimelineView {
  v1::TimelineAxis axis = v1::TIMELINE_AXIS_STEP;
  // Only points whose key (step or bucket index) lies in [first_key, last_key].
  std::optional<int64_t> first_key;
  std::optional<int64_t> last_key;
  // Every n-th point of each rank (counting from its first shown point), plus its last one.
  int64_t every = 1;
  // One row per key and one column per rank holding `value`, instead of one row per point.
  bool wide = false;
  TimelineValue value = TimelineValue::kEnd;
};

// Parses --steps: "A:B", "A:", ":B" or "A" (inclusive). INVALID_ARGUMENT naming the text.
absl::Status ParseKeyRange(absl::string_view text, TimelineView* view);

// Long form: rank, [attempt when any is non-zero], step|bucket, start, floor, peak, end and the
// change of end since the rank's previous point. Wide form: step|bucket, then r<rank> per rank
// (r<rank>.<attempt> for attempts after the first).
Table TimelineTable(const v1::TimelineResponse& response, const TimelineView& view);

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_COMMANDS_TIMELINE_H_
