#include "query/importers/rank_assignment.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace memtrace::importers {
namespace {

// The world size rank needs (rank + 1, without overflowing at INT32_MAX).
int32_t WorldFor(int32_t rank) { return rank < INT32_MAX ? rank + 1 : INT32_MAX; }

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

// "of8", "_of_8", "-of-8" at the start of `rest`: the world size.
std::optional<int32_t> WorldSizeAfterRank(absl::string_view rest) {
  if (!rest.empty() && (rest.front() == '_' || rest.front() == '-')) rest.remove_prefix(1);
  if (!absl::ConsumePrefix(&rest, "of")) return std::nullopt;
  if (!rest.empty() && (rest.front() == '_' || rest.front() == '-')) rest.remove_prefix(1);
  size_t length = 0;
  std::optional<int32_t> world = LeadingNumber(rest, &length);
  if (world.has_value() && *world <= 0) return std::nullopt;
  return world;
}

// "rank" spellings in one lower-case path component.
std::optional<NamedRank> RankWordIn(absl::string_view name) {
  for (size_t at = name.find("rank"); at != absl::string_view::npos;
       at = name.find("rank", at + 1)) {
    if (at > 0 && absl::ascii_isalpha(name[at - 1])) continue;
    absl::string_view rest = name.substr(at + 4);
    if (!rest.empty() && (rest.front() == '_' || rest.front() == '-')) rest.remove_prefix(1);
    size_t length = 0;
    if (std::optional<int32_t> rank = LeadingNumber(rest, &length)) {
      NamedRank named;
      named.rank = *rank;
      named.world_size = WorldSizeAfterRank(rest.substr(length));
      return named;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<NamedRank> RankFromFileName(absl::string_view path) {
  while (absl::ConsumeSuffix(&path, "/")) {
  }
  size_t slash = path.rfind('/');
  absl::string_view base = slash == absl::string_view::npos ? path : path.substr(slash + 1);
  std::string lower = absl::AsciiStrToLower(base);
  absl::string_view name(lower);
  if (std::optional<NamedRank> named = RankWordIn(name)) {
    named->source = "file name";
    return named;
  }
  // 'r' + digits + '.': "trace_r3.json". Between two separators it is more often a model
  // ("mask_rcnn_r50_fpn") than a rank.
  for (size_t at = 1; at + 1 < name.size(); ++at) {
    if (name[at] != 'r' || !IsSeparator(name[at - 1])) continue;
    size_t length = 0;
    std::optional<int32_t> rank = LeadingNumber(name.substr(at + 1), &length);
    size_t after = at + 1 + length;
    if (rank.has_value() && after < name.size() && name[after] == '.') {
      return NamedRank{*rank, std::nullopt, "file name"};
    }
  }
  if (slash == absl::string_view::npos || slash == 0) return std::nullopt;
  absl::string_view dir = path.substr(0, slash);
  size_t dir_slash = dir.rfind('/');
  if (dir_slash != absl::string_view::npos) dir = dir.substr(dir_slash + 1);
  std::string dir_lower = absl::AsciiStrToLower(dir);
  if (std::optional<NamedRank> named = RankWordIn(dir_lower)) {
    named->source = "directory name";
    return named;
  }
  return std::nullopt;
}

absl::StatusOr<RankAssigner> RankAssigner::Plan(const std::vector<std::string>& paths,
                                                const std::vector<KinetoDistributedInfo>& headers) {
  RankAssigner plan;
  plan.paths_ = paths;
  plan.stated_.resize(paths.size());
  plan.world_size_ = static_cast<int32_t>(std::min<size_t>(paths.size(), INT32_MAX));
  for (size_t i = 0; i < paths.size(); ++i) {
    const KinetoDistributedInfo header = i < headers.size() ? headers[i] : KinetoDistributedInfo{};
    Stated stated;
    std::optional<int32_t> size;  // the world size the file states
    if (header.rank.has_value()) {
      if (*header.rank < 0) {
        return absl::DataLossError(
            absl::StrCat(paths[i], ": distributedInfo.rank is ", *header.rank, ", not a rank"));
      }
      stated.rank = *header.rank;
      stated.source = "distributedInfo";
      plan.world_size_ = std::max(plan.world_size_, header.world_size.value_or(0));
      plan.world_size_stated_ |= header.world_size.value_or(0) > 0;
      size = header.world_size;
    } else if (std::optional<NamedRank> named = RankFromFileName(paths[i])) {
      stated.rank = named->rank;
      stated.source = named->source;
      plan.world_size_ = std::max(plan.world_size_, named->world_size.value_or(0));
      plan.world_size_stated_ |= named->world_size.has_value();
      size = named->world_size;
    } else {
      continue;
    }
    if (size.has_value() && *size > 0) {
      // "rank5_of_4": not a rank of that run (a renamed file, a typo), which renaming fixes. A
      // distributedInfo saying so is the trace's own word: its rank is kept, in a world of
      // rank + 1.
      if (stated.rank >= *size && !header.rank.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat(paths[i], ": its ", stated.source, " states rank ", stated.rank, " of ",
                         *size, ", not a rank of that world size; rename it"));
      }
      plan.stated_sizes_.try_emplace(*size, absl::StrCat(paths[i], " (", stated.source, ")"));
    }
    auto [it, inserted] = plan.stated_ranks_.try_emplace(stated.rank, i);
    if (!inserted) {
      return absl::AlreadyExistsError(
          absl::StrCat(paths[i], ": rank ", stated.rank, " (from ", stated.source, ") is also ",
                       paths[it->second], "'s (from ", plan.stated_[it->second]->source,
                       "); import one file per rank, or separate runs of a rank as separate jobs"));
    }
    plan.world_size_ = std::max(plan.world_size_, WorldFor(stated.rank));
    plan.stated_[i] = std::move(stated);
  }
  return plan;
}

std::optional<std::pair<std::string, std::string>> RankAssigner::HolderOf(int32_t rank,
                                                                          size_t index) const {
  if (auto it = taken_.find(rank); it != taken_.end() && it->second.first != paths_[index]) {
    return it->second;
  }
  if (auto it = stated_ranks_.find(rank); it != stated_ranks_.end() && it->second != index) {
    return std::make_pair(paths_[it->second], stated_[it->second]->source);
  }
  return std::nullopt;
}

absl::StatusOr<RankChoice> RankAssigner::Assign(size_t index, const KinetoDistributedInfo& info,
                                                std::optional<int32_t> stored_as) {
  const std::string& path = paths_[index];
  RankChoice choice;
  if (info.rank.has_value()) {
    if (*info.rank < 0) {
      return absl::DataLossError(
          absl::StrCat(path, ": distributedInfo.rank is ", *info.rank, ", not a rank"));
    }
    choice.rank = *info.rank;
    choice.source = "distributedInfo";
  } else if (stated_[index].has_value()) {
    choice.rank = stated_[index]->rank;
    choice.source = stated_[index]->source;
  } else if (stored_as.has_value() && !HolderOf(*stored_as, index).has_value()) {
    choice.rank = *stored_as;
    choice.source = "as stored before";
  } else {
    // Ranks no other file states and the job does not hold, in file order: a guess that cannot
    // take a stated one.
    choice.rank = 0;
    while (HolderOf(choice.rank, index).has_value() || job_ranks_.count(choice.rank) > 0) {
      ++choice.rank;
    }
    choice.source = "file order";
  }
  if (auto holder = HolderOf(choice.rank, index)) {
    return absl::AlreadyExistsError(
        absl::StrCat(path, ": rank ", choice.rank, " (from ", choice.source, ") is ", holder->first,
                     "'s (from ", holder->second,
                     "); import one file per rank, or separate runs of a rank as separate jobs"));
  }
  taken_[choice.rank] = {path, choice.source};
  world_size_stated_ |= info.world_size.value_or(0) > 0;
  world_size_ = std::max({world_size_, info.world_size.value_or(0), WorldFor(choice.rank)});
  choice.world_size = world_size();
  return choice;
}

}  // namespace memtrace::importers
