// Running a binary from an integration test: outputs captured, exit status returned.
#ifndef MEMTRACE_TESTS_UTIL_SUBPROCESS_H_
#define MEMTRACE_TESTS_UTIL_SUBPROCESS_H_

#include <string>
#include <vector>

#include "tests/util/test_dirs.h"  // TmpDir, used with these

namespace memtrace::test_util {

struct ProcessResult {
  int exit_code = -1;  // the exit status, or 128 + signal
  std::string out;
  std::string err;
};

// The whole file (empty when unreadable).
std::string ReadFile(const std::string& path);

// Runs `argv` (argv[0] a path) with stdout and stderr captured in files under TmpDir() (no pipe
// to fill up), waiting for it to end. Not thread-safe.
ProcessResult RunProcess(const std::vector<std::string>& argv);

}  // namespace memtrace::test_util

#endif  // MEMTRACE_TESTS_UTIL_SUBPROCESS_H_
