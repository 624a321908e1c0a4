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

std::string ThisHost() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

}  // namespace

absl::StatusOr<WorkDir> WorkDir::Create(const std::string& base) {
  // Another run's sweep may open the lock file between its creation and its flock(): it holds
  // it a moment (our flock fails) or takes the directory for a dead run's (the file locked is
  // not the one at the path). Either way, again in a new directory.
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
    if (dir.lock_fd_ < 0) {
      const int error = errno;
      dir.Remove();
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot create ", lock, " in the temporary directory: ", std::strerror(error)));
    }
    if (flock(dir.lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) {
        // A file system without flock() (Lustre's noflock, some FUSE): the run goes on, its
        // directory unlocked and without a lock file, so that no sweep ever takes it.
        unlink(lock.c_str());
        dir.Close();
        return dir;
      }
    } else {
      // The host, so that a sweep on another node sharing TMPDIR (whose locks may be its own
      // node's only) leaves the directory alone; a sweep reads no host before this is written.
      const std::string host = ThisHost();
      struct stat locked, at_path;
      if (write(dir.lock_fd_, host.data(), host.size()) == static_cast<ssize_t>(host.size()) &&
          fstat(dir.lock_fd_, &locked) == 0 && stat(lock.c_str(), &at_path) == 0 &&
          locked.st_ino == at_path.st_ino && locked.st_dev == at_path.st_dev) {
        return dir;
      }
    }
    dir.Remove();
    if (tries == 3) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot keep a locked temporary directory under ", base, " (another run's sweep?)"));
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
  const std::string this_host = ThisHost();
  while (const dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    // mkdtemp's names only: memtrace-run-XXXXXX.
    if (!absl::StartsWith(name, kPrefix) || name.size() != sizeof(kPrefix) - 1 + 6) continue;
    const std::string dir = absl::StrCat(root, "/", name);
    // A directory of this user's, not a link to one elsewhere.
    struct stat st;
    if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) continue;
    const int fd = open(absl::StrCat(dir, kLock).c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;  // no lock file: kept, or not ours to judge
    // A run on this host: another node's lock (a TMPDIR shared by nodes) may not be seen here.
    char host[256];
    const ssize_t n = pread(fd, host, sizeof(host), 0);
    const bool here = n > 0 && std::string(host, static_cast<size_t>(n)) == this_host;
    const bool stale = here && flock(fd, LOCK_EX | LOCK_NB) == 0;
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
