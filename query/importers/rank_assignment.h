// Which rank a trace file is. In order of trust: the trace's own distributedInfo.rank (PyTorch
// writes it when torch.distributed is initialized, usually before traceEvents, where it is read
// before anything is imported; one written after the events is known only once the file is
// parsed), then the file name ("rank3", "rank_3", "rank-3", "rank3_of_8", "_r3."), then the
// name of the directory holding it ("rank_3/host.pt.trace.json", as tensorboard_trace_handler
// lays traces out per rank), then the file's place among the files that state no rank: the
// lowest rank no other file states, in file order.
//
// One world size for the whole import: the largest of the number of files, every world size a
// file states (distributedInfo, "_of_N" in a name) and the highest rank + 1.
#ifndef MEMTRACE_QUERY_IMPORTERS_RANK_ASSIGNMENT_H_
#define MEMTRACE_QUERY_IMPORTERS_RANK_ASSIGNMENT_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "query/importers/kineto_trace.h"

namespace memtrace::importers {

struct NamedRank {
  int32_t rank = 0;
  std::optional<int32_t> world_size;  // "rank3_of_8"
  // "file name" or "directory name".
  std::string source;
};

// The rank a path states. Its base name first: "rank" (any case, not preceded by a letter),
// optionally followed by '_' or '-', then digits, optionally followed by "of" N (with or
// without '_' / '-' around it); else 'r' + digits between a separator ('_', '.', '-') and a
// '.', as in "trace_r3.json" ("resnet_r50_fpn.json" states none: that is a model). Else the
// parent directory's name, "rank" spellings only. nullopt when the path states none.
std::optional<NamedRank> RankFromFileName(absl::string_view path);

struct RankChoice {
  int32_t rank = 0;
  int32_t world_size = 0;
  // "distributedInfo", "file name", "directory name" or "file order".
  std::string source;
};

// Assigns ranks to the files of one import, refusing to give two files the same rank.
// A plain value; not thread-safe.
class RankAssigner {
 public:
  // Plans the ranks of `paths` from what each states before it is parsed: `headers[i]` is the
  // distributedInfo read before file i's events (empty when there is none), else its name.
  // ALREADY_EXISTS naming both files when two state one rank; DATA_LOSS for a negative rank.
  // Nothing is imported yet, so either refusal leaves the job as it was.
  static absl::StatusOr<RankAssigner> Plan(const std::vector<std::string>& paths,
                                           const std::vector<KinetoDistributedInfo>& headers);

  // The world size every file of the import is given, as far as the plan knows (a
  // distributedInfo found only after a file's events can raise it).
  int32_t world_size() const {
    return world_size_stated_ ? world_size_ : std::max(world_size_, implied_world_size_);
  }
  // Whether a file states a world size (distributedInfo, "_of_N"), as opposed to one the
  // number of files and ranks imply.
  bool world_size_stated() const { return world_size_stated_; }
  // The world sizes the files state before their events, each with the first file stating it,
  // "a.json (distributedInfo)". Every file is given world_size(): one stated otherwise, or two
  // sizes stated, are files of two runs, most likely.
  const std::map<int32_t, std::string>& StatedWorldSizes() const { return stated_sizes_; }
  // The world size the job's stored ranks imply (the largest they were stored with, their
  // highest rank + 1), taken when no file states one: a run's ranks imported one command at a
  // time were each "of 1", or "of rank + 1".
  // Kept apart: a file whose distributedInfo, read only after its events, states a size is
  // given that size, not the job's.
  void ImplyWorldSize(int32_t job_world_size) { implied_world_size_ = job_world_size; }

  // The ranks the job already holds (at the import's attempt): a file that states no rank takes
  // none of them, unless it is the trace stored there (Assign's `stored_as`). Imported one
  // command at a time, the second such file was guessed rank 0 again and refused.
  void ReserveJobRanks(std::set<int32_t> ranks) { job_ranks_ = std::move(ranks); }

  // The rank of the file at `index` (as given to Plan), now that it is parsed: `info` is its
  // whole distributedInfo; `stored_as` the rank the job holds this very trace as, if any (a
  // file imported again keeps its rank, source "as stored before"). ALREADY_EXISTS naming both
  // files when another file has, or will have, the rank it states after its events; DATA_LOSS
  // for a negative rank.
  absl::StatusOr<RankChoice> Assign(size_t index, const KinetoDistributedInfo& info,
                                    std::optional<int32_t> stored_as = std::nullopt);

 private:
  struct Stated {
    int32_t rank = 0;
    std::string source;
  };
  RankAssigner() = default;
  // The file holding `rank` other than `index`, taken or planned, if any: (path, source).
  std::optional<std::pair<std::string, std::string>> HolderOf(int32_t rank, size_t index) const;

  std::vector<std::string> paths_;
  std::vector<std::optional<Stated>> stated_;                     // per file, before parsing
  std::map<int32_t, size_t> stated_ranks_;                        // rank -> the file stating it
  std::map<int32_t, std::pair<std::string, std::string>> taken_;  // rank -> (file, source)
  int32_t world_size_ = 0;
  bool world_size_stated_ = false;
  int32_t implied_world_size_ = 0;  // the job's (ImplyWorldSize)
  std::map<int32_t, std::string> stated_sizes_;  // size -> the first file stating it (Plan)
  std::set<int32_t> job_ranks_;     // ReserveJobRanks
};

}  // namespace memtrace::importers

#endif  // MEMTRACE_QUERY_IMPORTERS_RANK_ASSIGNMENT_H_
