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

// The repository root, from the real path of this package's anchor runfile; "" outside a test.
std::string RepoRootFromRunfiles() {
  std::string srcdir = Env("TEST_SRCDIR");
  if (srcdir.empty()) return "";
  std::string workspace = Env("TEST_WORKSPACE");
  std::string anchor = absl::StrCat(srcdir, "/", workspace.empty() ? "memtrace" : workspace,
                                    "/query/importers/testdata/shared_data_anchor.txt");
  char real[PATH_MAX];
  if (::realpath(anchor.c_str(), real) == nullptr) return "";
  // <repo>/query/importers/testdata/shared_data_anchor.txt -> <repo>
  return Parent(Parent(Parent(Parent(real))));
}

}  // namespace

absl::StatusOr<std::string> FindSharedDataDir() {
  std::vector<std::string> tried;
  if (std::string dir = Env("MEMTRACE_SHARED_DATA"); !dir.empty()) {
    if (IsDirectory(dir)) return dir;
    tried.push_back(absl::StrCat("$MEMTRACE_SHARED_DATA=", dir));
  }
  if (std::string repo = RepoRootFromRunfiles(); !repo.empty()) {
    std::string dir = absl::StrCat(Parent(repo), "/shared/data");
    if (IsDirectory(dir)) return dir;
    tried.push_back(dir);
  } else if (!Env("TEST_SRCDIR").empty()) {
    tried.push_back("(the anchor runfile does not resolve)");
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
  if (!ci.empty() && ci != "0" && ci != "false") return true;
  // The project's layout puts shared/ beside the repository (CI copies it there); where it is,
  // its data must be too.
  std::string repo = RepoRootFromRunfiles();
  return !repo.empty() && IsDirectory(absl::StrCat(Parent(repo), "/shared"));
}

}  // namespace memtrace::importers
