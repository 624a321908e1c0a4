#include "agent/cupti/range_classifier.h"

#include <cctype>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace memtrace {
namespace cupti {
namespace {

// Debian's Abseil is built as C++14, so its absl::string_view is not std::string_view; these
// few helpers avoid converting at every call.
char Lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

bool StartsWithIgnoreCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (Lower(s[i]) != Lower(prefix[i])) return false;
  }
  return true;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && StartsWithIgnoreCase(a, b);
}

std::string_view StripBlanks(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool IsSeparator(char c) {
  return c == ' ' || c == '\t' || c == '_' || c == '#' || c == ':' || c == '=';
}

// "<digits>" with optional trailing blanks; SimpleAtoi rejects what does not fit a uint64.
std::optional<uint64_t> ParseNumberTail(std::string_view rest) {
  size_t digits = 0;
  while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) {
    ++digits;
  }
  if (digits == 0 || digits > 20) return std::nullopt;
  std::string_view tail = rest.substr(digits);
  for (char c : tail) {
    if (c != ' ' && c != '\t') return std::nullopt;
  }
  uint64_t n = 0;
  if (!absl::SimpleAtoi(std::string(rest.substr(0, digits)), &n)) return std::nullopt;
  return n;
}

}  // namespace

absl::StatusOr<RangeClassifier> RangeClassifier::Create(RangeClassifierOptions options) {
  RangeClassifier classifier(options);
  if (!options.step_regex.empty()) {
    std::shared_ptr<std::regex> re;
    try {
      // std::regex reports a bad pattern only by throwing; the throw stays inside this function.
      re = std::make_shared<std::regex>(options.step_regex,
                                        std::regex::ECMAScript | std::regex::icase);
    } catch (const std::regex_error& e) {
      return absl::InvalidArgumentError(
          absl::StrCat("step regex \"", options.step_regex, "\" does not compile: ", e.what()));
    }
    if (re->mark_count() < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "step regex \"", options.step_regex, "\" has no capture group for the step number"));
    }
    classifier.step_regex_ = std::move(re);
  }
  for (const std::string& prefix : options.step_prefixes) {
    if (prefix.empty()) return absl::InvalidArgumentError("empty step prefix");
  }
  return classifier;
}

RangeClassifier::RangeClassifier(RangeClassifierOptions options) : options_(std::move(options)) {}

std::optional<uint64_t> RangeClassifier::ParseStep(std::string_view name) const {
  if (step_regex_ != nullptr) {
    if (name.size() > kMaxStepRegexNameBytes) return std::nullopt;
    std::match_results<std::string_view::const_iterator> m;
    try {
      if (!std::regex_match(name.begin(), name.end(), m, *step_regex_)) return std::nullopt;
    } catch (const std::exception&) {
      // std::regex may throw while matching (error_complexity, error_stack, bad_alloc): never
      // into the application's nvtxRangePush, where it would end the process.
      return std::nullopt;
    }
    uint64_t n = 0;
    std::string digits = m[1].str();
    if (digits.size() > 20 || !absl::SimpleAtoi(digits, &n)) return std::nullopt;
    return n;
  }
  for (const std::string& prefix : options_.step_prefixes) {
    if (!StartsWithIgnoreCase(name, prefix)) continue;
    std::string_view rest = name.substr(prefix.size());
    size_t i = 0;
    while (i < rest.size() && IsSeparator(rest[i])) ++i;
    if (std::optional<uint64_t> n = ParseNumberTail(rest.substr(i))) return n;
  }
  return std::nullopt;
}

RangeClass RangeClassifier::Classify(std::string_view name) const {
  RangeClass out;
  if (std::optional<uint64_t> step = ParseStep(name)) {
    out.kind = RangeClass::Kind::kStep;
    out.step = *step;
    return out;
  }
  if (!options_.phase_prefix.empty() && StartsWithIgnoreCase(name, options_.phase_prefix)) {
    std::string_view rest = StripBlanks(name.substr(options_.phase_prefix.size()));
    if (!rest.empty()) {
      out.kind = RangeClass::Kind::kPhase;
      out.phase = std::string(rest);
      return out;
    }
  }
  for (const std::string& phase : options_.phase_names) {
    if (EqualsIgnoreCase(name, phase)) {
      out.kind = RangeClass::Kind::kPhase;
      out.phase = phase;
      return out;
    }
  }
  return out;
}

}  // namespace cupti
}  // namespace memtrace
