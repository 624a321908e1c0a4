// Decides what an NVTX range name means to memtrace: a training step ("step 12"), a phase of an
// RL loop ("rollout", "phase:actor_update"), or otherwise a tag for the allocations made while
// the range is open ("fsdp:layers.12", "leak:cache").
#ifndef MEMTRACE_AGENT_CUPTI_RANGE_CLASSIFIER_H_
#define MEMTRACE_AGENT_CUPTI_RANGE_CLASSIFIER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace memtrace {
namespace cupti {

struct RangeClassifierOptions {
  // A name is a step when it is one of these prefixes (case-insensitive), then optional
  // separators (space, tab, '_', '#', ':', '='), then a decimal number, and nothing else
  // ("step -1" is not a step):
  // "step 12", "Iteration_3", "ProfilerStep#7".
  std::vector<std::string> step_prefixes = {"step", "iteration", "ProfilerStep#"};
  // When non-empty, replaces step_prefixes: an ECMAScript regex matched case-insensitively
  // against the whole name, whose first capture group is the step number. Names longer than
  // kMaxStepRegexNameBytes are not matched (they are tags): libstdc++'s matcher recurses once per
  // character, and it runs on the application's thread, inside its nvtxRangePush.
  std::string step_regex;
  // Names (case-insensitive, whole name) that are phases.
  std::vector<std::string> phase_names = {"rollout",      "generate",      "weight_sync",
                                          "actor_update", "critic_update", "ref",
                                          "offload",      "wake_up",       "reward"};
  // Any name starting with this prefix is a phase named by the rest ("phase:rollout").
  std::string phase_prefix = "phase:";
};

inline constexpr size_t kMaxStepRegexNameBytes = 256;

struct RangeClass {
  enum class Kind { kTag, kStep, kPhase };
  Kind kind = Kind::kTag;
  uint64_t step = 0;  // kStep only
  std::string phase;  // kPhase only: the canonical phase name
};

class RangeClassifier {
 public:
  // Fails with INVALID_ARGUMENT on a step_regex that does not compile or has no capture group.
  static absl::StatusOr<RangeClassifier> Create(RangeClassifierOptions options);

  // Classifies one range name. Pure and thread-safe.
  RangeClass Classify(std::string_view name) const;

  // Just the step part of Classify: the step number when `name` is a step.
  std::optional<uint64_t> ParseStep(std::string_view name) const;

 private:
  explicit RangeClassifier(RangeClassifierOptions options);

  RangeClassifierOptions options_;
  std::shared_ptr<const std::regex> step_regex_;  // null when prefixes are used
};

}  // namespace cupti
}  // namespace memtrace

#endif  // MEMTRACE_AGENT_CUPTI_RANGE_CLASSIFIER_H_
