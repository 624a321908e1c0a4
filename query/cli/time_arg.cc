#include "query/cli/time_arg.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace memtrace::cli {

absl::StatusOr<int64_t> ParseTimeArg(absl::string_view text, absl::Time now) {
  auto bad = [&text]() {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text, "' is not a time: use ns since the epoch, now, now-15m, -90s or RFC 3339"));
  };
  int64_t ns = 0;
  if (absl::SimpleAtoi(text, &ns)) {
    if (ns < 0) return bad();
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
  return bad();
}

}  // namespace memtrace::cli
