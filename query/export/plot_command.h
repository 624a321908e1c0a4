// `memtrace plot --job J -o mem.svg [--metric live|floor|peak] [--ranks 0,1,5]`: an SVG of the
// job's memory by step (see svg_plot.h) from the collector's rollups, with the diverging rank
// highlighted and the divergence / leak onsets marked.
#ifndef MEMTRACE_QUERY_EXPORT_PLOT_COMMAND_H_
#define MEMTRACE_QUERY_EXPORT_PLOT_COMMAND_H_

#include <cstdint>
#include <set>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "query/cli/command.h"

namespace memtrace::exporter {

cli::Command PlotCommand();

// Parses --ranks: "0,1,5" or ranges "0-3,8". INVALID_ARGUMENT naming the bad part.
absl::StatusOr<std::set<uint32_t>> ParseRankList(absl::string_view text);

}  // namespace memtrace::exporter

#endif  // MEMTRACE_QUERY_EXPORT_PLOT_COMMAND_H_
