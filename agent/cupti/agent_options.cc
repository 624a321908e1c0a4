#include "agent/cupti/agent_options.h"

#include <cctype>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace memtrace {
namespace cupti {
namespace {

std::string Lowered(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    size_t b = cur.find_first_not_of(" \t");
    size_t e = cur.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(cur.substr(b, e - b + 1));
    cur.clear();
  };
  for (char c : s) {
    if (c == ',') {
      flush();
    } else {
      cur.push_back(c);
    }
  }
  flush();
  return out;
}

class Reader {
 public:
  Reader(const EnvLookup& env, std::vector<std::string>* warnings)
      : env_(env), warnings_(warnings) {}

  std::optional<std::string> Get(const char* name) {
    std::optional<std::string> v = env_(name);
    if (v && v->empty()) return std::nullopt;  // set but empty counts as unset
    return v;
  }

  void Bool(const char* name, bool* out) {
    std::optional<std::string> v = Get(name);
    if (!v) return;
    std::string s = Lowered(*v);
    if (s == "1" || s == "true" || s == "yes" || s == "on") {
      *out = true;
    } else if (s == "0" || s == "false" || s == "no" || s == "off") {
      *out = false;
    } else {
      Warn(name, *v, "expected 0 or 1");
    }
  }

  template <typename T>
  void Int(const char* name, int64_t min, int64_t max, T* out) {
    std::optional<std::string> v = Get(name);
    if (!v) return;
    int64_t n = 0;
    if (!absl::SimpleAtoi(*v, &n) || n < min || n > max) {
      Warn(name, *v, absl::StrCat("expected an integer in [", min, ", ", max, "]"));
      return;
    }
    *out = static_cast<T>(n);
  }

  void Warn(const char* name, const std::string& value, const std::string& why) {
    warnings_->push_back(
        absl::StrCat(name, "=\"", value, "\" ignored (", why, "); using the default"));
  }

 private:
  const EnvLookup& env_;
  std::vector<std::string>* warnings_;
};

}  // namespace

ParsedAgentOptions ParseAgentOptions(const EnvLookup& env) {
  ParsedAgentOptions parsed;
  AgentOptions& o = parsed.options;
  Reader r(env, &parsed.warnings);
  r.Bool("MEMTRACE_DISABLE", &o.disabled);
  r.Int("MEMTRACE_SAMPLE_MS", 0, 3600 * 1000, &o.sample_ms);
  r.Bool("MEMTRACE_SUBSCRIBE", &o.subscribe);
  if (std::optional<std::string> v = r.Get("MEMTRACE_SOURCE")) {
    std::string s = Lowered(*v);
    if (s == "backtrace") {
      o.source = SourceMode::kBacktrace;
    } else if (s == "cupti") {
      o.source = SourceMode::kCupti;
    } else if (s == "off" || s == "0") {
      o.source = SourceMode::kOff;
    } else {
      r.Warn("MEMTRACE_SOURCE", *v, "expected backtrace, cupti or off");
    }
  }
  r.Bool("MEMTRACE_STACKS", &o.full_stacks);
  r.Int("MEMTRACE_STACK_DEPTH", 1, 256, &o.stack_depth);
  if (std::optional<std::string> v = r.Get("MEMTRACE_SOURCE_SKIP")) o.source_skip = SplitList(*v);
  if (std::optional<std::string> v = r.Get("MEMTRACE_STEP_PREFIXES")) {
    std::vector<std::string> prefixes = SplitList(*v);
    if (prefixes.empty()) {
      r.Warn("MEMTRACE_STEP_PREFIXES", *v, "no prefix in the list");
    } else {
      o.ranges.step_prefixes = prefixes;
    }
  }
  if (std::optional<std::string> v = r.Get("MEMTRACE_STEP_REGEX")) {
    RangeClassifierOptions trial = o.ranges;
    trial.step_regex = *v;
    absl::StatusOr<RangeClassifier> c = RangeClassifier::Create(trial);
    if (c.ok()) {
      o.ranges.step_regex = *v;
    } else {
      r.Warn("MEMTRACE_STEP_REGEX", *v, std::string(c.status().message()));
    }
  }
  if (std::optional<std::string> v = env("MEMTRACE_PHASES")) {
    // Set but empty means "no phase names" (the "phase:" prefix still works).
    o.ranges.phase_names = SplitList(*v);
  }
  if (std::optional<std::string> v = env("MEMTRACE_PHASE_PREFIX")) o.ranges.phase_prefix = *v;
  size_t buffer_kb = o.buffer_bytes / 1024;
  r.Int("MEMTRACE_CUPTI_BUFFER_KB", 64, 256 * 1024, &buffer_kb);
  o.buffer_bytes = buffer_kb * 1024;
  r.Int("MEMTRACE_CUPTI_BUFFERS", 1, 1024, &o.max_buffers);
  r.Int("MEMTRACE_FLUSH_MS", 0, 60 * 1000, &o.flush_ms);
  r.Int("MEMTRACE_SHUTDOWN_TIMEOUT_MS", 0, 10 * 60 * 1000, &o.shutdown_timeout_ms);
  r.Bool("MEMTRACE_SIGTERM_DRAIN", &o.drain_on_sigterm);
  return parsed;
}

}  // namespace cupti
}  // namespace memtrace
