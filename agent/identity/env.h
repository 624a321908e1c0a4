// Reading the process environment through an injectable lookup, so that identity and option
// parsing are tested on plain maps instead of the real environment.
#ifndef MEMTRACE_AGENT_IDENTITY_ENV_H_
#define MEMTRACE_AGENT_IDENTITY_ENV_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace memtrace {

// Returns the value of one environment variable, or nullopt when it is not set. A variable set
// to the empty string is returned as "" (callers decide whether that counts as set).
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The real environment (getenv). The lookup copies each value at call time; it must not race
// with setenv() in other threads, which is the usual getenv() rule.
EnvLookup ProcessEnvironment();

// A fixed environment for tests and for callers that build one (e.g. a launcher previewing what
// a worker would see). The map is copied into the lookup.
EnvLookup MapEnvironment(std::map<std::string, std::string> vars);

// The value of `name`, or nullopt when it is unset or empty (launchers and shells often export
// empty variables; they mean "not given").
std::optional<std::string> EnvNonEmpty(const EnvLookup& env, const std::string& name);

// The integer value of `name` (surrounding spaces allowed), nullopt when unset or empty;
// INVALID_ARGUMENT naming the variable and value when it is not an integer in [min, max].
absl::StatusOr<std::optional<int64_t>> EnvInteger(const EnvLookup& env, const std::string& name,
                                                  int64_t min, int64_t max);

}  // namespace memtrace

#endif  // MEMTRACE_AGENT_IDENTITY_ENV_H_
