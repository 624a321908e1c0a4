// memtrace run's temporary directory, $TMPDIR/memtrace-run-XXXXXX: the local collector's port
// file and log. The run keeps a `lock` file in it flock()ed while it runs and removes the
// directory at its end. A run killed with SIGKILL cannot: its directory's lock is then held by
// nobody (the kernel released it with the process), which is how the next run tells it from a
// live run's, whatever PID namespace either ran in, and removes it (SweepStaleWorkDirs). The
// lock file names the host, and only this host's are swept: a TMPDIR shared by nodes may have
// locks each node sees only its own of. Where flock() is not supported the run goes on without
// a lock file, and its directory is never swept.
#ifndef MEMTRACE_TOOLS_LAUNCH_WORK_DIR_H_
#define MEMTRACE_TOOLS_LAUNCH_WORK_DIR_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace memtrace::launch {

class WorkDir {
 public:
  // A new directory under `base` ($TMPDIR, else /tmp), locked.
  static absl::StatusOr<WorkDir> Create(const std::string& base);

  WorkDir() = default;
  WorkDir(WorkDir&& other) noexcept;
  WorkDir& operator=(WorkDir&& other) noexcept;
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  // Removes the directory unless Keep() was called.
  ~WorkDir();

  const std::string& path() const { return path_; }
  // Removes its files (the lock, the collector's port file and log) and the directory; anything
  // else in it (a store the collector made there) is left, and the directory with it.
  void Remove();
  // Leaves the directory for the user (a dead collector's log the run named), unlocked and
  // without its lock file, so that no later run's sweep removes it.
  void Keep();

 private:
  void Close();

  std::string path_;
  int lock_fd_ = -1;
};

// The directories of runs that no longer run under `base`, removed as WorkDir::Remove does;
// returns their paths. Directories without a lock file (a kept log, or a run of an older
// memtrace) are left alone.
std::vector<std::string> SweepStaleWorkDirs(const std::string& base);

}  // namespace memtrace::launch

#endif  // MEMTRACE_TOOLS_LAUNCH_WORK_DIR_H_
