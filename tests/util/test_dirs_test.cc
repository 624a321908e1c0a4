#include "tests/util/test_dirs.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace memtrace::test_util {
namespace {

TEST(TestDirsTest, PathsAreUnderBazelsScratchDirectory) {
  ASSERT_NE(std::getenv("TEST_TMPDIR"), nullptr);
  EXPECT_EQ(TmpDir(), std::getenv("TEST_TMPDIR"));
  EXPECT_EQ(TmpPath("a/b"), TmpDir() + "/a/b");
  EXPECT_FALSE(std::filesystem::exists(TmpPath("never-made")));
}

TEST(TestDirsTest, FreshDirIsEmptyEvenWhenAnEarlierRunLeftFiles) {
  const std::string dir = FreshDir("fresh/nested");
  std::ofstream(dir + "/left-over") << "x";
  std::filesystem::create_directories(dir + "/sub");
  EXPECT_EQ(FreshDir("fresh/nested"), dir);
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST(TestDirsTest, ClearedPathRemovesWhatWasThereAndCreatesNothing) {
  const std::string dir = FreshDir("cleared");
  std::ofstream(dir + "/left-over") << "x";
  EXPECT_EQ(ClearedPath("cleared"), dir);
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(TestDirsTest, UniqueDirsAreNewAndDistinct) {
  const std::string a = UniqueDir("unique");
  const std::string b = UniqueDir("unique");
  ASSERT_FALSE(a.empty());
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind(TmpDir() + "/unique-", 0), 0u);
  EXPECT_TRUE(std::filesystem::is_empty(a));
}

}  // namespace
}  // namespace memtrace::test_util
