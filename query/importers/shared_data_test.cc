#include "query/importers/shared_data.h"

#include <sys/stat.h>

#include <cstdlib>

#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"

namespace memtrace::importers {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

TEST(SharedDataTest, FindsTheDataBesideTheRepositoryThroughTheRunfiles) {
  unsetenv("MEMTRACE_SHARED_DATA");
  absl::StatusOr<std::string> dir = FindSharedDataDir();
  if (!dir.ok()) {
    // Only a checkout without shared/ beside it gets here, and then nothing is required.
    EXPECT_FALSE(SharedDataRequired()) << dir.status();
    GTEST_SKIP() << dir.status();
  }
  EXPECT_EQ(dir->substr(dir->size() - 12), "/shared/data");
  EXPECT_TRUE(IsDirectory(*dir + "/kineto"));
  // shared/ is beside the repository, so a missing data set would fail the tests.
  EXPECT_TRUE(SharedDataRequired());
}

TEST(SharedDataTest, AnExplicitDirectoryWins) {
  std::string tmp = test_util::TmpDir();
  setenv("MEMTRACE_SHARED_DATA", tmp.c_str(), 1);
  absl::StatusOr<std::string> dir = FindSharedDataDir();
  unsetenv("MEMTRACE_SHARED_DATA");
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, tmp);
}

TEST(SharedDataTest, CiMakesTheDataRequired) {
  setenv("CI", "true", 1);
  EXPECT_TRUE(SharedDataRequired());
  unsetenv("CI");
}

}  // namespace
}  // namespace memtrace::importers
