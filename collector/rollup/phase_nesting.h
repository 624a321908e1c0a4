// The open runs of one stream's NVTX phases (PHASE_BEGIN / PHASE_END, matched by phase name),
// and the rules that decide which run a marker opens or ends. The collector's RankState keeps
// its phase statistics by them, and the Perfetto export draws phase runs by them, so the two
// agree on every run (the export once matched by name alone and disagreed after a loss).
//
// - An END ends the innermost open run of its phase; an END with none open changes nothing.
// - At most kMaxOpen runs are open: a BEGIN past that is ignored (a stream of distinct BEGINs
//   would otherwise cost the rollups cubic time), and so is the next END of that phase, which is
//   the ignored BEGIN's, not an open outer run's.
// - After a LOSS while runs were open, and until all of them have ended, a BEGIN of a phase
//   with a run open ends that run first (its END was most likely lost) instead of nesting in it.
#ifndef MEMTRACE_COLLECTOR_ROLLUP_PHASE_NESTING_H_
#define MEMTRACE_COLLECTOR_ROLLUP_PHASE_NESTING_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace memtrace::collector {

class PhaseNesting {
 public:
  static constexpr size_t kMaxOpen = 64;

  // What an END (or a BEGIN after a loss) did.
  struct Ended {
    enum class What { kEndedARun, kEndedAnIgnoredBegin, kNothingOpen };
    What what = What::kNothingOpen;
    size_t index = 0;  // kEndedARun: the run's place in open() before it ended
  };

  // A PHASE_BEGIN of `phase_id`. `ended_first` is set when, after a loss, it ended an open run
  // of the phase first (else reset). Returns whether it opened a run (the last of open()).
  bool Begin(uint32_t phase_id, std::optional<Ended>* ended_first);
  Ended End(uint32_t phase_id);
  // A LOSS event: some markers may be missing.
  void Loss() {
    if (!open_.empty()) after_loss_ = true;
  }

  bool IsOpen(uint32_t phase_id) const;
  // The phases of the open runs, outermost first.
  const std::vector<uint32_t>& open() const { return open_; }
  bool after_loss() const { return after_loss_; }
  // Per phase, the BEGINs ignored for depth whose END has not come.
  const absl::flat_hash_map<uint32_t, uint32_t>& ignored() const { return ignored_; }
  // The state as open(), after_loss() and ignored() gave it (a checkpoint).
  void Restore(std::vector<uint32_t> open, bool after_loss,
               absl::flat_hash_map<uint32_t, uint32_t> ignored);

 private:
  std::vector<uint32_t> open_;
  bool after_loss_ = false;
  absl::flat_hash_map<uint32_t, uint32_t> ignored_;  // bounded by the string table's ids
};

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_ROLLUP_PHASE_NESTING_H_
