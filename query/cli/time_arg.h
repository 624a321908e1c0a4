// Parsing of the time arguments of --from / --to.
#ifndef MEMTRACE_QUERY_CLI_TIME_ARG_H_
#define MEMTRACE_QUERY_CLI_TIME_ARG_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace memtrace::cli {

// Returns nanoseconds since the Unix epoch for one of:
//   1764694443000000000         an integer: ns since the epoch (0 means "open"; one before 1973
//                               is refused: seconds, ms or us typed for ns)
//   now                         `now`
//   now-15m, now+1h, -90s       relative to `now` (Abseil durations: h m s ms us ns)
//   2026-12-02T16:54:03Z        RFC 3339, with optional fraction and offset; a space for the T
//   2026-12-02 16:54:03.250     no offset: UTC, as memtrace's tables print times (a trailing
//                               " UTC", as its messages print them, is taken too)
// Anything else is INVALID_ARGUMENT naming the text.
absl::StatusOr<int64_t> ParseTimeArg(absl::string_view text, absl::Time now);

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_TIME_ARG_H_
