// `memtrace plot --job J -o mem.svg [--metric live|floor|peak] [--ranks 0,1,5]`: an SVG of the
// job's memory by step (see svg_plot.h) from the collector's rollups, with the diverging rank
// highlighted and the divergence / leak onsets marked.
#ifndef MEMTRACE_QUERY_EXPORT_PLOT_COMMAND_H_
#define MEMTRACE_QUERY_EXPORT_PLOT_COMMAND_H_

#include "query/cli/command.h"

namespace memtrace::exporter {

cli::Command PlotCommand();

}  // namespace memtrace::exporter

#endif  // MEMTRACE_QUERY_EXPORT_PLOT_COMMAND_H_
