// Streaming parser of PyTorch profiler (Kineto) Chrome-trace JSON: RapidJSON's SAX reader over
// a (possibly gzip-compressed) file, keeping only what KinetoTrace holds. Accepts the object
// form ({"traceEvents": [...], ...}, keys in any order: distributedInfo and
// baseTimeNanoseconds may follow traceEvents) and the bare-array form ([{...}, ...]).
#ifndef MEMTRACE_QUERY_IMPORTERS_KINETO_PARSER_H_
#define MEMTRACE_QUERY_IMPORTERS_KINETO_PARSER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "query/importers/kineto_trace.h"

namespace memtrace::importers {

struct KinetoParseOptions {
  // Called as the file is read with (compressed bytes consumed, file size). May be empty.
  std::function<void(uint64_t consumed, uint64_t total)> progress;
  // Module scopes that PyTorch writes with with_modules=True (python_function ranges named
  // "nn.Module: Qwen2Attention_0") tag allocations too, like record_function ranges.
  bool module_tags = true;
};

// Parses the trace file at `path` (.gz or plain, detected from the data, not the name).
// Errors name the file: NOT_FOUND / PERMISSION_DENIED / FAILED_PRECONDITION when it cannot be
// opened, DATA_LOSS with the byte offset and RapidJSON's reason for malformed JSON (the offset
// counts decompressed bytes for .gz) or a truncated/corrupt .gz, INVALID_ARGUMENT when the
// JSON is well-formed but has no traceEvents array.
absl::StatusOr<KinetoTrace> ParseKinetoFile(const std::string& path,
                                            const KinetoParseOptions& options = {});

// The same over JSON text in memory; `name` stands for the file in error messages.
absl::StatusOr<KinetoTrace> ParseKinetoJson(absl::string_view json, absl::string_view name,
                                            const KinetoParseOptions& options = {});

// The distributedInfo a trace file holds before its traceEvents array, where PyTorch writes
// it: reads only up to that array (a few KB, even of a .gz), so that an import can give every
// file its rank, and refuse two files the same one, before it stores anything. Empty when the
// file has none there (it may still come after the events). Errors as ParseKinetoFile's for
// what is read: a file that cannot be opened, malformed JSON before the events, no traceEvents.
absl::StatusOr<KinetoDistributedInfo> ReadKinetoHeader(const std::string& path);
// The same over JSON text in memory.
absl::StatusOr<KinetoDistributedInfo> ReadKinetoJsonHeader(absl::string_view json,
                                                           absl::string_view name);

// Parses a decimal number of microseconds ("1428625746340.715", "-3", "1.5e3") into
// nanoseconds, exactly for up to three fractional digits (rounded beyond). False when the text
// is not a number or overflows int64 nanoseconds.
bool ParseMicrosToNanos(absl::string_view text, int64_t* nanos);

}  // namespace memtrace::importers

#endif  // MEMTRACE_QUERY_IMPORTERS_KINETO_PARSER_H_
