#include "query/cli/flags.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace memtrace::cli {
namespace {

// A flag's name as it is usually typed, and shown in help and errors: "-o", "--job".
std::string Dashed(absl::string_view name) {
  return absl::StrCat(name.size() == 1 ? "-" : "--", name);
}

}  // namespace

void FlagSet::Add(std::string name, std::string value_name, std::string help, Setter setter) {
  flags_.push_back({std::move(name), std::move(value_name), std::move(help), std::move(setter)});
}

void FlagSet::AddRepeatable(std::string name, std::string value_name, std::string help,
                            Setter setter) {
  Add(std::move(name), std::move(value_name), std::move(help), std::move(setter));
  flags_.back().repeatable = true;
}

void FlagSet::AddAlias(std::string alias, absl::string_view of) {
  const Flag* original = Find(of);
  if (original == nullptr) return;  // a programming error; the alias is then unknown
  Flag flag = *original;
  flag.help = absl::StrCat("the same as ", Dashed(of));
  flag.name = std::move(alias);
  flag.same_as = std::string(of);
  flags_.push_back(std::move(flag));
}

void FlagSet::AddString(std::string name, std::string value_name, std::string help,
                        std::string* target) {
  Add(std::move(name), std::move(value_name), std::move(help), [target](absl::string_view v) {
    // An empty value means "not given" to every command, so `--job ''` (an unset shell variable)
    // would quietly turn into the default: a generated job id, or every job.
    if (v.empty()) return absl::InvalidArgumentError("empty value");
    *target = std::string(v);
    return absl::OkStatus();
  });
}

void FlagSet::AddInt(std::string name, std::string value_name, std::string help, int64_t* target) {
  Add(std::move(name), std::move(value_name), std::move(help), [target](absl::string_view v) {
    if (!absl::SimpleAtoi(v, target)) {
      return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not an integer"));
    }
    return absl::OkStatus();
  });
}

void FlagSet::AddOptionalUint32(std::string name, std::string value_name, std::string help,
                                std::optional<uint32_t>* target) {
  Add(std::move(name), std::move(value_name), std::move(help), [target](absl::string_view v) {
    absl::StatusOr<uint32_t> value = ParsePlainUint32(v);  // a rank is plain digits
    if (!value.ok()) return value.status();
    *target = *value;
    return absl::OkStatus();
  });
}

void FlagSet::AddBool(std::string name, std::string help, bool* target) {
  Add(std::move(name), "", std::move(help), [target](absl::string_view v) {
    if (!absl::SimpleAtob(v, target)) {
      return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not true or false"));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<uint32_t> ParsePlainUint32(absl::string_view text) {
  uint32_t value = 0;
  if (text.empty() ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      !absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a non-negative integer below 2^32"));
  }
  return value;
}

absl::StatusOr<uint64_t> ParseBytes(absl::string_view text) {
  auto bad = [&text]() {
    return absl::InvalidArgumentError(absl::StrCat("'", text,
                                                   "' is not a byte count (e.g. 1048576, 256MiB, "
                                                   "1.5GiB; units B, K/KiB, M/MiB, G/GiB, T/TiB)"));
  };
  uint64_t plain = 0;
  if (absl::SimpleAtoi(text, &plain)) {
    if (absl::StartsWith(text, "-")) return bad();
    return plain;
  }
  size_t unit_at = text.find_first_not_of("0123456789.");
  if (unit_at == 0 || unit_at == absl::string_view::npos) return bad();
  double number = 0;
  if (!absl::SimpleAtod(text.substr(0, unit_at), &number) || number < 0) return bad();
  absl::string_view unit = text.substr(unit_at);
  static constexpr std::pair<const char*, int> kUnits[] = {{"B", 0},    {"K", 10},   {"KiB", 10},
                                                           {"M", 20},   {"MiB", 20}, {"G", 30},
                                                           {"GiB", 30}, {"T", 40},   {"TiB", 40}};
  for (const auto& [name, shift] : kUnits) {
    if (unit == name) {
      const double bytes = number * static_cast<double>(1ull << shift);
      if (bytes >= 18446744073709551615.0) return bad();
      return static_cast<uint64_t>(bytes);
    }
  }
  return bad();
}

void FlagSet::AddBytes(std::string name, std::string value_name, std::string help,
                       uint64_t* target) {
  Add(std::move(name), std::move(value_name), std::move(help), [target](absl::string_view v) {
    absl::StatusOr<uint64_t> bytes = ParseBytes(v);
    if (!bytes.ok()) return bytes.status();
    *target = *bytes;
    return absl::OkStatus();
  });
}

void FlagSet::AddDuration(std::string name, std::string value_name, std::string help,
                          absl::Duration* target) {
  Add(std::move(name), std::move(value_name), std::move(help), [target](absl::string_view v) {
    int64_t seconds = 0;
    absl::Duration d;
    if (absl::SimpleAtoi(v, &seconds)) {
      d = absl::Seconds(seconds);
    } else if (!absl::ParseDuration(std::string(v), &d)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", v, "' is not a duration (e.g. 10s, 500ms, 2m)"));
    }
    if (d <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not a positive duration"));
    }
    *target = d;
    return absl::OkStatus();
  });
}

const FlagSet::Flag* FlagSet::Find(absl::string_view name) const {
  for (const Flag& flag : flags_) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

bool FlagSet::NamesAFlag(absl::string_view arg) const {
  if (!absl::StartsWith(arg, "-") || arg == "-" || arg == "--") return false;
  arg.remove_prefix(absl::StartsWith(arg, "--") ? 2 : 1);
  return Find(arg.substr(0, arg.find('='))) != nullptr;
}

absl::StatusOr<FlagSet::Parsed> FlagSet::Parse(const std::vector<std::string>& args) const {
  Parsed parsed;
  std::map<std::string, std::string> seen;  // flag (an alias's original) -> the name given
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      parsed.positional.insert(parsed.positional.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (arg == "--help" || arg == "-h") {
      parsed.help = true;
      return parsed;
    }
    if (!absl::StartsWith(arg, "-") || arg == "-") {
      parsed.positional.push_back(arg);
      continue;
    }
    // Both -name and --name are accepted, as with Abseil and gflags.
    absl::string_view body = arg;
    body.remove_prefix(absl::StartsWith(body, "--") ? 2 : 1);
    std::optional<std::string> inline_value;
    if (size_t eq = body.find('='); eq != absl::string_view::npos) {
      inline_value = std::string(body.substr(eq + 1));
      body = body.substr(0, eq);
    }
    const Flag* flag = Find(body);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag ", arg.substr(0, arg.find('='))));
    }
    auto [first, inserted] =
        seen.try_emplace(flag->same_as.empty() ? flag->name : flag->same_as, flag->name);
    if (!inserted && !flag->repeatable) {
      return absl::InvalidArgumentError(
          first->second == flag->name
              ? absl::StrCat(Dashed(flag->name), " given more than once (it takes one value)")
              : absl::StrCat(Dashed(first->second), " and ", Dashed(flag->name),
                             " given: they are one flag, which takes one value"));
    }
    std::string value;
    if (inline_value.has_value()) {
      value = *inline_value;
    } else if (flag->value_name.empty()) {
      value = "true";
    } else if (i + 1 < args.size() && (args[i + 1] == "--help" || args[i + 1] == "-h")) {
      parsed.help = true;  // "--job --help": the help, not a job named --help
      return parsed;
    } else if (i + 1 < args.size() && !NamesAFlag(args[i + 1])) {
      // The next argument is the value even when it starts with '-' ("--from -5m"), unless it
      // is one of the flags: "--job --wide" asked for job "--wide" (exit 1, not a usage error),
      // and "--job --format json" blamed 'json'. --job=--wide still says it.
      value = args[++i];
    } else if (i + 1 < args.size()) {
      return absl::InvalidArgumentError(absl::StrCat(Dashed(flag->name), " needs a value (",
                                                     flag->value_name, "), not the flag ",
                                                     args[i + 1]));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(Dashed(flag->name), " needs a value (", flag->value_name, ")"));
    }
    if (absl::Status s = flag->setter(value); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(Dashed(flag->name), ": ", s.message()));
    }
  }
  return parsed;
}

std::string FlagSet::Describe() const {
  std::vector<std::string> lefts;
  size_t width = 0;
  for (const Flag& flag : flags_) {
    // A one-letter flag is shown as it is usually typed, "-o FILE" ("--o" works too).
    lefts.push_back(
        absl::StrCat("  ", Dashed(flag.name), flag.value_name.empty() ? "" : " ", flag.value_name));
    width = std::max(width, lefts.back().size());
  }
  std::string out;
  for (size_t i = 0; i < flags_.size(); ++i) {
    absl::StrAppend(&out, lefts[i], std::string(width - lefts[i].size() + 3, ' '), flags_[i].help,
                    "\n");
  }
  return out;
}

absl::StatusOr<std::set<uint32_t>> ParseRankList(absl::string_view text) {
  constexpr uint32_t kMaxRank = 1 << 24;
  constexpr size_t kMaxRanks = size_t{1} << 20;
  std::set<uint32_t> ranks;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    const auto bad = [part] {
      return absl::InvalidArgumentError(
          absl::StrCat("'", part, "' is not a rank or a range of ranks"));
    };
    // Plain digits, as every other rank flag takes ("+3" is none); "0-3-17", a typo for
    // "0-3,17", is no range (a split into a pair kept 0-3 and dropped 17).
    const std::vector<absl::string_view> ends = absl::StrSplit(part, '-');
    if (ends.size() > 2) return bad();
    absl::StatusOr<uint32_t> first = ParsePlainUint32(ends[0]);
    absl::StatusOr<uint32_t> last = ends.size() == 2 ? ParsePlainUint32(ends[1]) : first;
    if (!first.ok() || !last.ok() || *last < *first || *last >= kMaxRank) return bad();
    // "0-16777215" made a set of 16 M ranks before a request was sent.
    if (*last - *first >= kMaxRanks) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", part, "' names more than ", kMaxRanks, " ranks"));
    }
    for (uint32_t r = *first; r <= *last; ++r) ranks.insert(r);
    if (ranks.size() > kMaxRanks) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text, "' names more than ", kMaxRanks, " ranks"));
    }
  }
  return ranks;
}

}  // namespace memtrace::cli
