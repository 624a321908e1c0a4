// Where the project's shared test data lives for a Bazel test: the directory "shared/data"
// beside the repository (<repo>/../shared/data; CI copies shared/ next to its clone). The data
// is large and third-party, so it is not in the repository and cannot be a Bazel input; tests
// find it from the real location of a runfile instead.
#ifndef MEMTRACE_QUERY_IMPORTERS_SHARED_DATA_H_
#define MEMTRACE_QUERY_IMPORTERS_SHARED_DATA_H_

#include <string>

#include "absl/status/statusor.h"

namespace memtrace::importers {

// In order: $MEMTRACE_SHARED_DATA (bazel test --test_env=MEMTRACE_SHARED_DATA=/path); the
// real path of this package's testdata/shared_data_anchor.txt runfile, three directories up,
// then ../shared/data; $BUILD_WORKSPACE_DIRECTORY/../shared/data (bazel run). NOT_FOUND listing
// what was tried when none is a directory.
absl::StatusOr<std::string> FindSharedDataDir();

// Whether a missing data directory must fail the test rather than skip it: $CI is set to
// something other than "" / "0" / "false" (Bazel passes it only with --test_env=CI), or a
// shared/ directory exists beside the repository (CI's layout), so its data must be there.
bool SharedDataRequired();

}  // namespace memtrace::importers

#endif  // MEMTRACE_QUERY_IMPORTERS_SHARED_DATA_H_
