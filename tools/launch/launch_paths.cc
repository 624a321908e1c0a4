#include "tools/launch/launch_paths.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace memtrace::launch {
namespace {

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string Dirname(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Absolute and without symlinks (so a path stays valid after the worker changes directory).
std::string Absolute(const std::string& path) {
  char buffer[PATH_MAX];
  if (realpath(path.c_str(), buffer) != nullptr) return buffer;
  return path;
}

}  // namespace

std::string CurrentExecutablePath() {
  char buffer[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return "";
  buffer[n] = '\0';
  return buffer;
}

std::vector<std::string> CandidatePaths(const std::string& exe_path, const std::string& file,
                                        const std::string& bazel_package) {
  if (exe_path.empty()) return {};
  const std::string dir = Dirname(exe_path);
  return {
      absl::StrCat(dir, "/", file),
      absl::StrCat(dir, "/../lib/", file),
      absl::StrCat(dir, "/../lib/memtrace/", file),
      absl::StrCat(dir, "/../../", bazel_package, "/", file),
  };
}

absl::StatusOr<std::string> FindComponent(const std::string& what, const std::string& flag_value,
                                          const char* env_name, const EnvLookup& env,
                                          const std::vector<std::string>& candidates) {
  if (!flag_value.empty()) {
    if (!IsRegularFile(flag_value)) {
      return absl::NotFoundError(absl::StrCat(what, " '", flag_value, "' does not exist"));
    }
    return Absolute(flag_value);
  }
  if (std::optional<std::string> value = EnvNonEmpty(env, env_name)) {
    if (!IsRegularFile(*value)) {
      return absl::NotFoundError(
          absl::StrCat(what, " '", *value, "' (from ", env_name, ") does not exist"));
    }
    return Absolute(*value);
  }
  for (const std::string& candidate : candidates) {
    if (IsRegularFile(candidate)) return Absolute(candidate);
  }
  return absl::NotFoundError(
      absl::StrCat("cannot find the ", what, ": ", env_name, " is not set and none of ",
                   candidates.empty() ? "(no place: the memtrace binary's path is unknown)"
                                      : absl::StrJoin(candidates, ", "),
                   " exists"));
}

absl::StatusOr<std::string> FindAgentLibrary(const std::string& flag_value, const EnvLookup& env,
                                             const std::string& exe_path) {
  return FindComponent("agent library", flag_value, kAgentLibraryEnv, env,
                       CandidatePaths(exe_path, kAgentLibraryName, "agent"));
}

absl::StatusOr<std::string> NvtxLibrary(const std::string& flag_value, const EnvLookup& env,
                                        const std::string& agent_library) {
  absl::StatusOr<std::string> explicit_path =
      FindComponent("NVTX injection library", flag_value, kNvtxLibraryEnv, env, {});
  if (explicit_path.ok()) return explicit_path;
  if (!flag_value.empty() || EnvNonEmpty(env, kNvtxLibraryEnv).has_value()) {
    return explicit_path.status();
  }
  return agent_library;
}

absl::StatusOr<std::string> FindCollectorBinary(const EnvLookup& env, const std::string& exe_path) {
  return FindComponent("collector binary", "", kCollectorBinaryEnv, env,
                       CandidatePaths(exe_path, kCollectorBinaryName, "collector"));
}

}  // namespace memtrace::launch
