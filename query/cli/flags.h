// A small command-line flag parser for the memtrace CLI and the simulator: named flags with
// typed setters, `--name value` or `--name=value`, positional arguments kept in order, `--help`
// reported to the caller, and one-line errors naming the flag and the bad value. A flag given
// twice is an error unless it was registered with AddRepeatable: silently keeping the last of
// `--job a --job b` would answer a question nobody asked.
//
// Abseil's flags are process-global; commands need their own flag sets (and tests need several
// in one process), hence this.
#ifndef MEMTRACE_QUERY_CLI_FLAGS_H_
#define MEMTRACE_QUERY_CLI_FLAGS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace memtrace::cli {

// The set of flags one command accepts. Targets are borrowed: they must outlive Parse().
class FlagSet {
 public:
  // Sets a flag from its text value; returns INVALID_ARGUMENT with a reason (without the flag's
  // name, which Parse() adds) when the value is bad.
  using Setter = std::function<absl::Status(absl::string_view value)>;

  // Registers --name. `value_name` is shown in help ("--job JOB"); an empty one marks a boolean
  // flag that takes no value (but accepts --name=true/false).
  void Add(std::string name, std::string value_name, std::string help, Setter setter);
  // Add() for a flag that may be given more than once; `setter` runs for each occurrence, in
  // order (e.g. `compare --job A --job B`).
  void AddRepeatable(std::string name, std::string value_name, std::string help, Setter setter);

  // --alias is another name of the flag `of` (added before): the same value and setter; giving
  // both is a flag given twice. Its help reads "the same as -o".
  void AddAlias(std::string alias, absl::string_view of);

  // A string flag; an empty value is refused ("--job: empty value"), as it would read as unset.
  void AddString(std::string name, std::string value_name, std::string help, std::string* target);
  void AddInt(std::string name, std::string value_name, std::string help, int64_t* target);
  void AddOptionalUint32(std::string name, std::string value_name, std::string help,
                         std::optional<uint32_t>* target);
  void AddBool(std::string name, std::string help, bool* target);
  // Byte counts: an integer, or a number with a binary unit ("256MiB", "1.5GiB", "64K";
  // K/M/G/T mean KiB/MiB/GiB/TiB).
  void AddBytes(std::string name, std::string value_name, std::string help, uint64_t* target);
  // Durations in Abseil's syntax ("5s", "250ms", "1m30s"); a bare integer means seconds.
  void AddDuration(std::string name, std::string value_name, std::string help,
                   absl::Duration* target);

  struct Parsed {
    bool help = false;  // --help or -h was given; nothing else was checked after it
    std::vector<std::string> positional;
  };
  // Applies `args` in order. "--" ends flag parsing. Unknown flags, missing values, bad values
  // and a second occurrence of a flag not added with AddRepeatable are INVALID_ARGUMENT with a
  // message such as "--rank: 'abc' is not an integer".
  absl::StatusOr<Parsed> Parse(const std::vector<std::string>& args) const;

  // One line per flag, "  --name VALUE   help", in registration order.
  std::string Describe() const;

 private:
  struct Flag {
    std::string name;
    std::string value_name;
    std::string help;
    Setter setter;
    bool repeatable = false;
    std::string same_as;  // an alias's flag; empty for a flag of its own
  };
  const Flag* Find(absl::string_view name) const;
  // Whether `arg` is one of these flags as Parse reads them (-name, --name, --name=v).
  bool NamesAFlag(absl::string_view arg) const;

  std::vector<Flag> flags_;
};

// Parses a byte count as AddBytes does; INVALID_ARGUMENT (without a flag name) otherwise.
absl::StatusOr<uint64_t> ParseBytes(absl::string_view text);

// Parses plain decimal digits into a uint32 ("'x' is not a non-negative integer below 2^32",
// INVALID_ARGUMENT, otherwise): SimpleAtoi alone accepts a leading '+' and surrounding spaces.
absl::StatusOr<uint32_t> ParsePlainUint32(absl::string_view text);

// Parses a list of ranks: "0,1,5", ranges "0-3,8", or one rank "3", of plain digits.
// INVALID_ARGUMENT naming the bad part (or the list, when it names too many); ranks are below
// 2^24 (the store numbers a rank's subprocesses from 1000000), at most 2^20 of them.
absl::StatusOr<std::set<uint32_t>> ParseRankList(absl::string_view text);

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_FLAGS_H_
