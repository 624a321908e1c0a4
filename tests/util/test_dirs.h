// Where a test writes: paths under the scratch directory Bazel gives each test.
#ifndef MEMTRACE_TESTS_UTIL_TEST_DIRS_H_
#define MEMTRACE_TESTS_UTIL_TEST_DIRS_H_

#include <string>

#include "absl/strings/string_view.h"

namespace memtrace::test_util {

// The test's scratch directory: $TEST_TMPDIR as Bazel sets it, else /tmp.
std::string TmpDir();

// TmpDir()/`name` (`name` may hold '/'); nothing is created or removed.
std::string TmpPath(absl::string_view name);

// TmpDir()/`name` with nothing there: whatever an earlier run left is removed, nothing is
// created (for code under test that must create the directory itself, or refuse to).
std::string ClearedPath(absl::string_view name);

// TmpDir()/`name`, empty: whatever was there (an earlier run's files, with --nocache_test_results
// or outside Bazel) is removed and the directory created again, with its parents.
std::string FreshDir(absl::string_view name);

// A new, empty directory TmpDir()/`prefix`-XXXXXX (mkdtemp): for fixtures set up once per test,
// each needing its own. Empty when it cannot be made.
std::string UniqueDir(absl::string_view prefix);

}  // namespace memtrace::test_util

#endif  // MEMTRACE_TESTS_UTIL_TEST_DIRS_H_
