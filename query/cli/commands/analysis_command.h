// What the analysis subcommands (diverged, growth, leaks, live, peak, headroom, compare) share:
// their common flags (--collector, --format table|json, --timeout), typed flags that set request
// fields directly, and printing a report: the terminal table of query/analysis/render.h, or the
// report's proto3 JSON (field names as in analysis.proto, every field present) that
// JsonStringToMessage parses back into the same message.
#ifndef MEMTRACE_QUERY_CLI_COMMANDS_ANALYSIS_COMMAND_H_
#define MEMTRACE_QUERY_CLI_COMMANDS_ANALYSIS_COMMAND_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "proto/memtrace/v1/query.pb.h"
#include "query/cli/command.h"
#include "query/cli/commands/analysis_client.h"
#include "query/cli/flags.h"

namespace memtrace::cli {

struct AnalysisOptions {
  std::string collector;
  bool json = false;
  // Analyses of long jobs read more than the listing commands: a longer default deadline.
  absl::Duration timeout = absl::Seconds(30);
};

// Registers --collector (default io.default_collector), --format table|json and --timeout.
void AddAnalysisFlags(const CommandIo& io, FlagSet& flags, AnalysisOptions* options);

// Registers --axis step|time (default step: steps, or time buckets when the job has none).
void AddAxisFlag(FlagSet& flags, v1::TimelineAxis* axis);
// Registers --subprocesses: compare the ranks' subprocesses with each other instead of the ranks.
void AddSubprocessesFlag(FlagSet& flags, bool* subprocesses);
// The help paragraph of --subprocesses, the same for every analysis that takes it: a literal,
// for each command's constexpr usage text to end with.
#define MEMTRACE_SUBPROCESSES_HELP                                                             \
  "\n--subprocesses compares the ranks' subprocesses instead (processes a rank started that\n" \
  "inherited its RANK, such as an inference engine beside each trainer: memtrace ranks\n"      \
  "lists them) with each other, each \"rank\" of the report a subprocess's number there; of\n" \
  "--attempt N's, else of each rank's latest attempt that has any (for leaks --at, that had\n" \
  "begun by then; those begun later are left out). Every kind of subprocess\n"                 \
  "is one cohort (an engine's workers with the engines); a process that started its rank's\n"  \
  "(connected after it) is left out. Engines record no step markers as a rule, so they are\n"  \
  "compared by time bucket, and `leaks` then classifies their curves but lists no candidates."

// Registers --NAME VALUE_NAME calling `set` with an integer from `min` up to 2^32 - 1.
void AddUint32Flag(FlagSet& flags, std::string name, std::string value_name, std::string help,
                   std::function<void(uint32_t)> set, uint32_t min = 0);
// Registers --NAME N, a window of steps a trend is fitted over: 0 (all steps after warm-up) or
// at least `min_points`. Fewer steps than a trend needs made every rank "too short" and the job
// read as safe ("nothing to fit").
void AddStepWindowFlag(FlagSet& flags, std::string name, std::string help, uint32_t min_points,
                       std::function<void(uint32_t)> set);

// Registers --NAME BYTES calling `set` with a byte count ("256MiB", "80GiB", "1048576").
void AddBytesFlag(FlagSet& flags, std::string name, std::string help,
                  std::function<void(uint64_t)> set);
// The values a number flag accepts besides being finite (NaN and inf are never thresholds):
// above `min`, or at it too when min_inclusive; below `max`, or at it too when max_inclusive.
struct NumberRange {
  double min = 0;
  bool min_inclusive = true;
  double max = std::numeric_limits<double>::infinity();
  bool max_inclusive = false;

  // "> 0", "in [0, 1)": what error messages and help say.
  std::string Describe() const;
};
// A threshold such as a z score: 0 or less would flag every rank.
inline constexpr NumberRange kPositiveNumber{0, false};
// A fraction of a value: 1 or more would make no difference count.
inline constexpr NumberRange kFractionBelowOne{0, true, 1, false};

// Registers --NAME calling `set` with a finite number ("3.5") in `range`; anything else is
// "'x' is not a finite number > 0" (with the range's own description).
void AddDoubleFlag(FlagSet& flags, std::string name, std::string value_name, std::string help,
                   NumberRange range, std::function<void(double)> set);

// Registers --NAME a|b|c calling `set` with the value of the chosen name; anything else is
// "'x' is not one of a, b, c".
template <typename T>
void AddChoiceFlag(FlagSet& flags, std::string name, std::vector<std::pair<std::string, T>> choices,
                   std::string help, std::function<void(T)> set) {
  std::vector<std::string> names;
  for (const auto& c : choices) names.push_back(c.first);
  flags.Add(std::move(name), absl::StrJoin(names, "|"), std::move(help),
            [choices, names, set](absl::string_view value) {
              for (const auto& c : choices) {
                if (c.first == value) {
                  set(c.second);
                  return absl::OkStatus();
                }
              }
              return absl::InvalidArgumentError(
                  absl::StrCat("'", value, "' is not one of ", absl::StrJoin(names, ", ")));
            });
}

// The report as indented proto3 JSON, snake_case field names, fields at their default included,
// ending in a newline.
std::string ReportJson(const google::protobuf::Message& report);

// Prints `report` (rendered by `render` for tables) to io.out and returns kExitOk, or reports
// its error as one line on io.err ("memtrace COMMAND: ...") and returns the exit code.
template <typename Report>
int PrintReport(const std::string& command, const absl::StatusOr<Report>& report,
                const AnalysisOptions& options, std::string (*render)(const Report&),
                CommandIo& io) {
  if (!report.ok()) return ReportError(io, report.status(), command);
  io.out << (options.json ? ReportJson(*report) : render(*report));
  return kExitOk;
}

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_COMMANDS_ANALYSIS_COMMAND_H_
