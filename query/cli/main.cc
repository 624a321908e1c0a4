// memtrace: the command-line client of a memtrace collector.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "proto/connect/collector_address.h"
#include "query/cli/command.h"
#include "query/cli/commands/compare.h"
#include "query/cli/commands/diverged.h"
#include "query/cli/commands/growth.h"
#include "query/cli/commands/headroom.h"
#include "query/cli/commands/jobs.h"
#include "query/cli/commands/leaks.h"
#include "query/cli/commands/live.h"
#include "query/cli/commands/peak.h"
#include "query/cli/commands/ranks.h"
#include "query/cli/commands/timeline.h"
#include "query/cli/dispatch.h"
#include "query/export/export_command.h"
#include "query/export/plot_command.h"
#include "query/importers/import_command.h"
#include "tools/launch/ray_env_command.h"
#include "tools/launch/run_command.h"

int main(int argc, char** argv) {
  using namespace memtrace::cli;
  // The command table: add a subcommand here (see query/cli/command.h).
  const std::vector<Command> commands = {
      JobsCommand(),
      RanksCommand(),
      TimelineCommand(),
      DivergedCommand(),
      GrowthCommand(),
      LeaksCommand(),
      LiveCommand(),
      PeakCommand(),
      HeadroomCommand(),
      CompareCommand(),
      memtrace::launch::RunCommand(),
      memtrace::launch::RayEnvCommand(),
      memtrace::importers::ImportCommand(),
      memtrace::exporter::ExportCommand(),
      memtrace::exporter::PlotCommand(),
  };
  CommandIo io{std::cout, std::cerr};
  if (const char* env = std::getenv("MEMTRACE_COLLECTOR"); env != nullptr && *env != '\0') {
    io.default_collector = env;
    // Said as the environment's: a bad value is --collector's default, and the error of a
    // command that used it named --collector, which the user never gave.
    if (absl::Status s = memtrace::connect::CheckCollectorAddress("$MEMTRACE_COLLECTOR", env);
        !s.ok()) {
      std::cerr << "memtrace: " << s.message() << " (--collector's default)\n";
    }
  }
  int code = RunCli(commands, std::vector<std::string>(argv + 1, argv + argc), io);
  std::cout.flush();
  return code;
}
