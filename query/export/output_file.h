// Writing an exported file. A regular file (or a new one) is written to a unique temporary file
// next to it and renamed over it only once complete, so a failed export never leaves a
// truncated file where a viewer would open it; it keeps its mode. A symlink is followed; a
// device, FIFO or socket is written in place, never replaced.
#ifndef MEMTRACE_QUERY_EXPORT_OUTPUT_FILE_H_
#define MEMTRACE_QUERY_EXPORT_OUTPUT_FILE_H_

#include <functional>
#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace memtrace::exporter {

// Calls `write` with a stream to `path` ("-": `stdout_stream`) and commits it. Errors name the
// path and the system's reason (a failed write to standard output too); an error from `write`
// is returned and nothing is committed.
absl::Status WriteOutputFile(const std::string& path, std::ostream& stdout_stream,
                             const std::function<absl::Status(std::ostream&)>& write);

}  // namespace memtrace::exporter

#endif  // MEMTRACE_QUERY_EXPORT_OUTPUT_FILE_H_
