#include "query/importers/rank_assignment.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace memtrace::importers {
namespace {

bool IsSeparator(char c) { return c == '_' || c == '.' || c == '-'; }

// Digits at the start of `text` as a rank, or nullopt.
std::optional<int32_t> LeadingNumber(absl::string_view text, size_t* length) {
  size_t n = 0;
  while (n < text.size() && n < 9 && absl::ascii_isdigit(text[n])) ++n;
  if (n == 0 || (n < text.size() && absl::ascii_isdigit(text[n]))) return std::nullopt;
  int32_t value = 0;
  if (!absl::SimpleAtoi(text.substr(0, n), &value)) return std::nullopt;
  *length = n;
  return value;
}

}  // namespace

std::optional<int32_t> RankFromFileName(absl::string_view path) {
  size_t slash = path.rfind('/');
  absl::string_view base = slash == absl::string_view::npos ? path : path.substr(slash + 1);
  std::string lower = absl::AsciiStrToLower(base);
  absl::string_view name(lower);
  for (size_t at = name.find("rank"); at != absl::string_view::npos;
       at = name.find("rank", at + 1)) {
    if (at > 0 && absl::ascii_isalpha(name[at - 1])) continue;
    absl::string_view rest = name.substr(at + 4);
    if (!rest.empty() && (rest.front() == '_' || rest.front() == '-')) rest.remove_prefix(1);
    size_t length = 0;
    if (std::optional<int32_t> rank = LeadingNumber(rest, &length)) return rank;
  }
  for (size_t at = 1; at + 1 < name.size(); ++at) {
    if (name[at] != 'r' || !IsSeparator(name[at - 1])) continue;
    size_t length = 0;
    std::optional<int32_t> rank = LeadingNumber(name.substr(at + 1), &length);
    size_t after = at + 1 + length;
    if (rank.has_value() && after < name.size() && IsSeparator(name[after])) return rank;
  }
  return std::nullopt;
}

absl::StatusOr<RankChoice> RankAssigner::Assign(size_t index, const std::string& path,
                                                const KinetoDistributedInfo& info) {
  RankChoice choice;
  if (info.rank.has_value()) {
    if (*info.rank < 0) {
      return absl::DataLossError(
          absl::StrCat(path, ": distributedInfo.rank is ", *info.rank, ", not a rank"));
    }
    choice.rank = *info.rank;
    choice.source = "distributedInfo";
  } else if (std::optional<int32_t> named = RankFromFileName(path)) {
    choice.rank = *named;
    choice.source = "file name";
  } else {
    // A guess: the file's position, or when an earlier file stated that rank, the lowest rank
    // still free (refusing would leave the files before it imported and this one not).
    choice.rank = static_cast<int32_t>(index);
    if (taken_.count(choice.rank) != 0) {
      choice.rank = 0;
      while (taken_.count(choice.rank) != 0) ++choice.rank;
    }
    choice.source = "file order";
  }
  auto [it, inserted] = taken_.try_emplace(choice.rank, path, choice.source);
  if (!inserted) {
    return absl::AlreadyExistsError(
        absl::StrCat(path, ": rank ", choice.rank, " (from ", choice.source,
                     ") is already taken by ", it->second.first, " (from ", it->second.second,
                     "); import one file per rank, or separate runs of a rank as separate jobs"));
  }
  int32_t world = info.world_size.value_or(0);
  if (world <= 0) world = static_cast<int32_t>(file_count_);
  choice.world_size = std::max(world, choice.rank + 1);
  return choice;
}

}  // namespace memtrace::importers
