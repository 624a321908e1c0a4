#include "query/importers/shared_data.h"

#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace memtrace::importers {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

std::string Parent(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos || slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

absl::StatusOr<std::string> FindSharedDataDir() {
  std::vector<std::string> tried;
  if (std::string dir = Env("MEMTRACE_SHARED_DATA"); !dir.empty()) {
    if (IsDirectory(dir)) return dir;
    tried.push_back(absl::StrCat("$MEMTRACE_SHARED_DATA=", dir));
  }
  std::string srcdir = Env("TEST_SRCDIR");
  std::string workspace = Env("TEST_WORKSPACE");
  if (!srcdir.empty()) {
    std::string anchor = absl::StrCat(srcdir, "/", workspace.empty() ? "memtrace" : workspace,
                                      "/query/importers/testdata/shared_data_anchor.txt");
    char real[PATH_MAX];
    if (::realpath(anchor.c_str(), real) != nullptr) {
      // <repo>/query/importers/testdata/shared_data_anchor.txt -> <repo>
      std::string repo = Parent(Parent(Parent(Parent(real))));
      std::string dir = absl::StrCat(Parent(repo), "/shared/data");
      if (IsDirectory(dir)) return dir;
      tried.push_back(dir);
    } else {
      tried.push_back(absl::StrCat("(unresolvable runfile ", anchor, ")"));
    }
  }
  if (std::string ws = Env("BUILD_WORKSPACE_DIRECTORY"); !ws.empty()) {
    std::string dir = absl::StrCat(ws, "/../shared/data");
    if (IsDirectory(dir)) return dir;
    tried.push_back(dir);
  }
  return absl::NotFoundError(
      absl::StrCat("shared test data not found; tried: ", absl::StrJoin(tried, ", ")));
}

bool SharedDataRequired() {
  std::string ci = Env("CI");
  return !ci.empty() && ci != "0" && ci != "false";
}

}  // namespace memtrace::importers
