#include "tests/util/test_dirs.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace memtrace::test_util {

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr && *dir != '\0' ? dir : "/tmp";
}

std::string TmpPath(absl::string_view name) { return absl::StrCat(TmpDir(), "/", name); }

std::string ClearedPath(absl::string_view name) {
  const std::string path = TmpPath(name);
  std::error_code ignored;
  std::filesystem::remove_all(path, ignored);
  return path;
}

std::string FreshDir(absl::string_view name) {
  const std::string dir = ClearedPath(name);
  std::error_code ignored;
  std::filesystem::create_directories(dir, ignored);
  return dir;
}

std::string UniqueDir(absl::string_view prefix) {
  std::string pattern = absl::StrCat(TmpPath(prefix), "-XXXXXX");
  return mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
}

}  // namespace memtrace::test_util
