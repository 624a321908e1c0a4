#include "query/cli/command.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace memtrace::cli {

void AddCommonFlags(const CommandIo& io, FlagSet& flags, CommonOptions* options) {
  options->collector = io.default_collector;
  flags.AddString("collector", "ADDR",
                  absl::StrCat("collector host:port (default $MEMTRACE_COLLECTOR or ",
                               kDefaultCollector, "; now ", io.default_collector, ")"),
                  &options->collector);
  flags.Add("format", "table|json|csv", "output format (default table)",
            [options](absl::string_view value) {
              absl::StatusOr<OutputFormat> format = ParseOutputFormat(value);
              if (!format.ok()) {
                return absl::InvalidArgumentError(
                    absl::StrCat("'", value, "' is not one of table, json, csv"));
              }
              options->format = *format;
              return absl::OkStatus();
            });
  flags.AddDuration("timeout", "DURATION",
                    "deadline of each request to the collector (default 10s)", &options->timeout);
}

std::optional<int> ParseCommandLine(const Command& command, const FlagSet& flags,
                                    const std::vector<std::string>& args, CommandIo& io) {
  absl::StatusOr<FlagSet::Parsed> parsed = flags.Parse(args);
  if (!parsed.ok()) return ReportError(io, parsed.status(), command.name);
  if (parsed->help) {
    io.out << command.usage << "\n\nFlags:\n" << flags.Describe();
    return kExitOk;
  }
  if (!parsed->positional.empty()) {
    return ReportError(
        io,
        absl::InvalidArgumentError(absl::StrCat("unexpected argument '", parsed->positional.front(),
                                                "' (run 'memtrace help ", command.name, "')")),
        command.name);
  }
  return std::nullopt;
}

int ReportError(CommandIo& io, const absl::Status& status, const std::string& command) {
  std::string message(status.message());
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  if (message.empty()) message = absl::StatusCodeToString(status.code());
  io.err << "memtrace" << (command.empty() ? "" : " ") << command << ": " << message << "\n";
  return status.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitError;
}

}  // namespace memtrace::cli
