// `memtrace export --job J --format perfetto -o out.json`: the job's memory as a Chrome
// trace-event file for ui.perfetto.dev / chrome://tracing (see perfetto_trace.h): rollups from
// GetRollups, and exact live-bytes and device-used counters rebuilt from every rank's raw events
// (ReadEvents) unless --raw=false.
#ifndef MEMTRACE_QUERY_EXPORT_EXPORT_COMMAND_H_
#define MEMTRACE_QUERY_EXPORT_EXPORT_COMMAND_H_

#include "query/cli/command.h"

namespace memtrace::exporter {

cli::Command ExportCommand();

}  // namespace memtrace::exporter

#endif  // MEMTRACE_QUERY_EXPORT_EXPORT_COMMAND_H_
