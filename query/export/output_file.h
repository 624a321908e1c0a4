// Writing an exported file: into PATH.tmp first, renamed over PATH only once complete, so a
// failed export never leaves a truncated file where a viewer would open it.
#ifndef MEMTRACE_QUERY_EXPORT_OUTPUT_FILE_H_
#define MEMTRACE_QUERY_EXPORT_OUTPUT_FILE_H_

#include <functional>
#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace memtrace::exporter {

// Calls `write` with a stream to `path` ("-": `stdout_stream`) and commits it. Errors name the
// path and the system's reason; an error from `write` is returned and nothing is committed.
absl::Status WriteOutputFile(const std::string& path, std::ostream& stdout_stream,
                             const std::function<absl::Status(std::ostream&)>& write);

}  // namespace memtrace::exporter

#endif  // MEMTRACE_QUERY_EXPORT_OUTPUT_FILE_H_
