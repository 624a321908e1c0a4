#include "tools/launch/work_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace memtrace::launch {
namespace {

constexpr char kPrefix[] = "memtrace-run-";
constexpr char kLock[] = "/lock";
// What a run puts there: only these are removed, so a mistaken path never loses anything else.
constexpr const char* kFiles[] = {"/collector.port", "/collector.log", kLock};

void RemoveFilesAndDir(const std::string& dir) {
  for (const char* name : kFiles) unlink(absl::StrCat(dir, name).c_str());
  rmdir(dir.c_str());
}

}  // namespace

absl::StatusOr<WorkDir> WorkDir::Create(const std::string& base) {
  // Another run's sweep may find the lock file between its creation and its flock() and take
  // the directory for a dead run's: then the file locked is not the one at the path. Again.
  for (int tries = 0;; ++tries) {
    std::string pattern = absl::StrCat(base.empty() ? "/tmp" : base, "/", kPrefix, "XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot create a temporary directory ", pattern, " (TMPDIR): ", std::strerror(errno)));
    }
    WorkDir dir;
    dir.path_ = pattern;
    const std::string lock = absl::StrCat(dir.path_, kLock);
    // Not inherited by the job or the collector (CLOEXEC): the lock is this process's alone.
    dir.lock_fd_ = open(lock.c_str(), O_CREAT | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (dir.lock_fd_ < 0 || flock(dir.lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      dir.Remove();
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot lock ", lock, " in the temporary directory: ", std::strerror(error)));
    }
    struct stat locked, at_path;
    if (fstat(dir.lock_fd_, &locked) == 0 && stat(lock.c_str(), &at_path) == 0 &&
        locked.st_ino == at_path.st_ino && locked.st_dev == at_path.st_dev) {
      return dir;
    }
    dir.Close();
    dir.path_.clear();
    if (tries == 3) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot keep a temporary directory under ", base, ": each was removed"));
    }
  }
}

WorkDir::WorkDir(WorkDir&& other) noexcept
    : path_(std::exchange(other.path_, "")), lock_fd_(std::exchange(other.lock_fd_, -1)) {}

WorkDir& WorkDir::operator=(WorkDir&& other) noexcept {
  if (this != &other) {
    Remove();
    path_ = std::exchange(other.path_, "");
    lock_fd_ = std::exchange(other.lock_fd_, -1);
  }
  return *this;
}

WorkDir::~WorkDir() { Remove(); }

void WorkDir::Close() {
  if (lock_fd_ >= 0) close(lock_fd_);
  lock_fd_ = -1;
}

void WorkDir::Remove() {
  if (path_.empty()) return;
  // Unlinked while still locked: a sweep that opens it now finds no file to lock.
  RemoveFilesAndDir(path_);
  Close();
  path_.clear();
}

void WorkDir::Keep() {
  if (path_.empty()) return;
  unlink(absl::StrCat(path_, kLock).c_str());
  Close();
  path_.clear();
}

std::vector<std::string> SweepStaleWorkDirs(const std::string& base) {
  std::vector<std::string> removed;
  const std::string root = base.empty() ? "/tmp" : base;
  DIR* d = opendir(root.c_str());
  if (d == nullptr) return removed;
  while (const dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    // mkdtemp's names only: memtrace-run-XXXXXX.
    if (!absl::StartsWith(name, kPrefix) || name.size() != sizeof(kPrefix) - 1 + 6) continue;
    const std::string dir = absl::StrCat(root, "/", name);
    const int fd = open(absl::StrCat(dir, kLock).c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;  // no lock file: kept, or not ours to judge
    const bool stale = flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (stale) {
      RemoveFilesAndDir(dir);
      removed.push_back(dir);
    }
    close(fd);
  }
  closedir(d);
  return removed;
}

}  // namespace memtrace::launch
