#include "query/cli/commands/analysis_command.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "google/protobuf/util/json_util.h"

namespace memtrace::cli {

void AddAnalysisFlags(const CommandIo& io, FlagSet& flags, AnalysisOptions* options) {
  options->collector = io.default_collector;
  flags.AddString("collector", "ADDR",
                  absl::StrCat("collector host:port (default $MEMTRACE_COLLECTOR or ",
                               kDefaultCollector, "; now ", io.default_collector, ")"),
                  &options->collector);
  AddChoiceFlag<bool>(flags, "format", {{"table", false}, {"json", true}},
                      "output format (default table; json is the report message's proto3 JSON)",
                      [options](bool json) { options->json = json; });
  flags.AddDuration("timeout", "DURATION", "deadline of the request to the collector (default 30s)",
                    &options->timeout);
}

void AddAxisFlag(FlagSet& flags, v1::TimelineAxis* axis) {
  AddChoiceFlag<v1::TimelineAxis>(
      flags, "axis", {{"step", v1::TIMELINE_AXIS_STEP}, {"time", v1::TIMELINE_AXIS_TIME}},
      "step: compare ranks by step, or by time buckets when the job has no step markers (the "
      "default; the report then says so); time: by the collector's time buckets. Buckets "
      "shorter than the job's steps are read in windows of whole steps either way",
      [axis](v1::TimelineAxis a) { *axis = a; });
}

void AddSubprocessesFlag(FlagSet& flags, bool* subprocesses) {
  flags.AddBool("subprocesses",
                "compare the ranks' subprocesses with each other instead of the ranks (see above)",
                subprocesses);
}

void AddUint32Flag(FlagSet& flags, std::string name, std::string value_name, std::string help,
                   std::function<void(uint32_t)> set, uint32_t min) {
  flags.Add(
      std::move(name), std::move(value_name), std::move(help), [set, min](absl::string_view v) {
        absl::StatusOr<uint32_t> value = ParsePlainUint32(v);
        if (min == 0 && !value.ok()) return value.status();
        if (!value.ok() || *value < min) {
          return absl::InvalidArgumentError(
              absl::StrCat("'", v, "' is not an integer from ", min, " below 2^32"));
        }
        set(*value);
        return absl::OkStatus();
      });
}

void AddStepWindowFlag(FlagSet& flags, std::string name, std::string help, uint32_t min_points,
                       std::function<void(uint32_t)> set) {
  flags.Add(std::move(name), "N", std::move(help),
            [set, min_points](absl::string_view v) -> absl::Status {
              absl::StatusOr<uint32_t> parsed = ParsePlainUint32(v);
              if (!parsed.ok()) return parsed.status();
              const uint32_t n = *parsed;
              if (n > 0 && n < min_points) {
                return absl::InvalidArgumentError(
                    absl::StrCat(n, " is too few steps to fit a trend: give at least ", min_points,
                                 ", or 0 for all steps after warm-up"));
              }
              set(n);
              return absl::OkStatus();
            });
}

void AddBytesFlag(FlagSet& flags, std::string name, std::string help,
                  std::function<void(uint64_t)> set) {
  flags.Add(std::move(name), "BYTES", std::move(help), [set](absl::string_view v) {
    absl::StatusOr<uint64_t> bytes = ParseBytes(v);
    if (!bytes.ok()) return bytes.status();
    set(*bytes);
    return absl::OkStatus();
  });
}

std::string NumberRange::Describe() const {
  const bool bounded_above = std::isfinite(max);
  if (!bounded_above) return absl::StrCat(min_inclusive ? ">= " : "> ", min);
  return absl::StrCat("in ", min_inclusive ? "[" : "(", min, ", ", max, max_inclusive ? "]" : ")");
}

void AddDoubleFlag(FlagSet& flags, std::string name, std::string value_name, std::string help,
                   NumberRange range, std::function<void(double)> set) {
  flags.Add(std::move(name), std::move(value_name), std::move(help),
            [set, range](absl::string_view v) {
              double value = 0;
              // SimpleAtod reads "nan" and "inf" too; neither is a threshold.
              const bool ok = absl::SimpleAtod(v, &value) && std::isfinite(value) &&
                              (range.min_inclusive ? value >= range.min : value > range.min) &&
                              (range.max_inclusive ? value <= range.max : value < range.max);
              if (!ok) {
                return absl::InvalidArgumentError(
                    absl::StrCat("'", v, "' is not a finite number ", range.Describe()));
              }
              set(value);
              return absl::OkStatus();
            });
}

std::string ReportJson(const google::protobuf::Message& report) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  // Printing a well-formed message cannot fail; an empty object is still valid JSON if it did.
  if (!google::protobuf::util::MessageToJsonString(report, &json, options).ok()) json = "{}";
  if (json.empty() || json.back() != '\n') json += '\n';
  return json;
}

}  // namespace memtrace::cli
