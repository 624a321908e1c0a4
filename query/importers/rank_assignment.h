// Which rank a trace file is. In order of trust: the trace's own distributedInfo.rank (PyTorch
// writes it when torch.distributed is initialized; it may come after traceEvents, so it is
// known only once the file is parsed), then the file name ("rank3", "rank_3", "rank-3",
// "_r3."), then the file's position on the command line (or, when an earlier file stated that
// rank, the lowest one still free). World size: distributedInfo's, else the number of files
// (at least the highest rank + 1).
#ifndef MEMTRACE_QUERY_IMPORTERS_RANK_ASSIGNMENT_H_
#define MEMTRACE_QUERY_IMPORTERS_RANK_ASSIGNMENT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "query/importers/kineto_trace.h"

namespace memtrace::importers {

// The rank a file name states, looking at the base name only: "rank" (any case, not preceded
// by a letter) optionally followed by '_' or '-', then digits; else 'r' + digits between
// separators ('_', '.', '-'), as in "trace_r3.json". nullopt when the name states none.
std::optional<int32_t> RankFromFileName(absl::string_view path);

struct RankChoice {
  int32_t rank = 0;
  int32_t world_size = 0;
  // "distributedInfo", "file name" or "file order".
  std::string source;
};

// Assigns ranks to the files of one import, refusing to give two files the same rank.
// A plain value; not thread-safe.
class RankAssigner {
 public:
  explicit RankAssigner(size_t file_count) : file_count_(file_count) {}

  // The rank of the file at `index` (0-based position among the files) named `path`.
  // ALREADY_EXISTS naming both files when an earlier file has the rank this one states (in
  // distributedInfo or its name); INVALID_ARGUMENT for a negative distributedInfo rank.
  absl::StatusOr<RankChoice> Assign(size_t index, const std::string& path,
                                    const KinetoDistributedInfo& info);

 private:
  size_t file_count_;
  std::map<int32_t, std::pair<std::string, std::string>> taken_;  // rank -> (file, source)
};

}  // namespace memtrace::importers

#endif  // MEMTRACE_QUERY_IMPORTERS_RANK_ASSIGNMENT_H_
