#include "query/cli/time_arg.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace memtrace::cli {

absl::StatusOr<int64_t> ParseTimeArg(absl::string_view text, absl::Time now) {
  auto bad = [&text]() {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text,
                     "' is not a time: use ns since the epoch, now, now-15m, -90s, RFC 3339 or "
                     "2026-12-02 16:54:03 (UTC, as memtrace prints times)"));
  };
  int64_t ns = 0;
  if (absl::SimpleAtoi(text, &ns)) {
    if (ns < 0) return bad();
    // Before 1973 as ns: seconds, ms or us since the epoch, which selected everything from
    // 1970 on without a word.
    struct Unit {
      int64_t below;
      const char* name;
      const char* to_ns;
    };
    for (const Unit& u : {Unit{100'000'000'000, "seconds", "000000000"},
                          Unit{100'000'000'000'000, "milliseconds", "000000"},
                          Unit{100'000'000'000'000'000, "microseconds", "000"}}) {
      if (ns > 0 && ns < u.below) {
        return absl::InvalidArgumentError(absl::StrCat(
            "'", text, "' as ns since the epoch is before 1973; it looks like ", u.name,
            ": give ns (", text, u.to_ns, ") or a time such as 2026-12-02 16:54:03"));
      }
    }
    return ns;
  }
  absl::string_view rest = text;
  bool relative = absl::ConsumePrefix(&rest, "now");
  if (relative && rest.empty()) return absl::ToUnixNanos(now);
  if (absl::StartsWith(rest, "-") || (relative && absl::StartsWith(rest, "+"))) {
    bool minus = rest[0] == '-';
    rest.remove_prefix(1);
    absl::Duration offset;
    if (rest.empty() || !absl::ParseDuration(std::string(rest), &offset)) return bad();
    return absl::ToUnixNanos(minus ? now - offset : now + offset);
  }
  if (relative) return bad();
  absl::Time t;
  std::string error;
  if (absl::ParseTime(absl::RFC3339_full, std::string(text), &t, &error)) {
    return absl::ToUnixNanos(t);
  }
  // What the tables print: "2026-12-05 18:19:34.123", UTC without saying so. RFC 3339 allows
  // the space; a time with no offset is taken as UTC, the zone of every time memtrace prints.
  // Error messages add " UTC" ("has no event at or before 2026-12-05 18:19:34.123 UTC"): pasted
  // back, it says what the bare form means.
  absl::string_view without_zone = text;
  absl::ConsumeSuffix(&without_zone, " UTC");
  std::string pasted(without_zone);
  if (pasted.size() > 10 && pasted[10] == ' ') pasted[10] = 'T';
  if (absl::ParseTime("%Y-%m-%d%ET%H:%M:%E*S", pasted, absl::UTCTimeZone(), &t, &error) ||
      absl::ParseTime(absl::RFC3339_full, pasted, &t, &error)) {
    return absl::ToUnixNanos(t);
  }
  return bad();
}

}  // namespace memtrace::cli
