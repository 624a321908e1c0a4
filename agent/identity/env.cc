#include "agent/identity/env.h"

#include <cstdlib>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace memtrace {

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

EnvLookup MapEnvironment(std::map<std::string, std::string> vars) {
  // shared_ptr keeps the lookup copyable (std::function requires it) without copying the map.
  auto shared = std::make_shared<const std::map<std::string, std::string>>(std::move(vars));
  return [shared](const std::string& name) -> std::optional<std::string> {
    auto it = shared->find(name);
    if (it == shared->end()) return std::nullopt;
    return it->second;
  };
}

std::optional<std::string> EnvNonEmpty(const EnvLookup& env, const std::string& name) {
  std::optional<std::string> value = env(name);
  if (!value.has_value() || value->empty()) return std::nullopt;
  return value;
}

absl::StatusOr<std::optional<int64_t>> EnvInteger(const EnvLookup& env, const std::string& name,
                                                  int64_t min, int64_t max) {
  std::optional<std::string> value = EnvNonEmpty(env, name);
  if (!value.has_value()) return std::optional<int64_t>();
  int64_t parsed = 0;
  if (!absl::SimpleAtoi(*value, &parsed)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "='", *value, "' is not an integer"));
  }
  if (parsed < min || parsed > max) {
    return absl::InvalidArgumentError(absl::StrCat(name, "='", *value, "' is out of range: ",
                                                   "expected ", min, "..", max));
  }
  return std::optional<int64_t>(parsed);
}

}  // namespace memtrace
