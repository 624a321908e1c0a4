#include "query/export/output_file.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"

namespace memtrace::exporter {
namespace {

absl::Status CannotWrite(const std::string& path, int err) {
  return absl::FailedPreconditionError(absl::StrCat(path, ": cannot write: ", std::strerror(err)));
}

// Runs `write` into an open stream and reports a failed write (disk full) by `path`'s name.
absl::Status WriteAndCheck(std::ofstream& out, const std::string& path,
                           const std::function<absl::Status(std::ostream&)>& write) {
  absl::Status written = write(out);
  out.close();
  if (written.ok() && !out) {
    written = absl::DataLossError(absl::StrCat(path, ": write failed: ", std::strerror(errno)));
  }
  return written;
}

// A device, FIFO or socket is written in place: replacing it with a regular file (as a rename
// would) broke /dev/null for everyone and left a FIFO's reader waiting forever.
absl::Status WriteInPlace(const std::string& path,
                          const std::function<absl::Status(std::ostream&)>& write) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return CannotWrite(path, errno);
  return WriteAndCheck(out, path, write);
}

// The mode a new file gets: 0666 less the umask (the umask can only be read by setting it).
mode_t NewFileMode() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

// A regular file (or none yet) is written to a fresh temporary file next to it and renamed over
// it once complete, so a failed export never leaves a truncated file where a viewer would open
// it. The temporary name is unique (a file of the user's named PATH.tmp is left alone), and the
// file keeps the mode it had.
absl::Status WriteAndRename(const std::string& path, std::optional<mode_t> existing_mode,
                            const std::function<absl::Status(std::ostream&)>& write) {
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return CannotWrite(path, errno);
  const mode_t mode = existing_mode.has_value() ? (*existing_mode & 07777) : NewFileMode();
  const bool chmod_ok = ::fchmod(fd, mode) == 0;
  const int chmod_errno = errno;
  ::close(fd);
  if (!chmod_ok) {
    std::remove(tmp.c_str());
    return CannotWrite(path, chmod_errno);
  }
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  absl::Status written = out ? WriteAndCheck(out, path, write) : CannotWrite(path, errno);
  if (!written.ok()) {
    std::remove(tmp.c_str());
    return written;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return CannotWrite(path, err);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteOutputFile(const std::string& path, std::ostream& stdout_stream,
                             const std::function<absl::Status(std::ostream&)>& write) {
  if (path.empty()) return absl::InvalidArgumentError("-o: an output file is required");
  if (path == "-") {
    absl::Status written = write(stdout_stream);
    stdout_stream.flush();
    if (written.ok() && !stdout_stream) {
      return absl::DataLossError("writing to standard output failed");
    }
    return written;
  }
  // A symlink is followed: its target is what gets written (and replaced, when regular).
  std::string target = path;
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved) == nullptr) return WriteInPlace(path, write);  // dangling
    target = resolved;
  }
  if (::stat(target.c_str(), &st) != 0) {
    if (errno != ENOENT) return CannotWrite(path, errno);
    return WriteAndRename(target, std::nullopt, write);
  }
  if (!S_ISREG(st.st_mode)) return WriteInPlace(target, write);
  return WriteAndRename(target, st.st_mode, write);
}

}  // namespace memtrace::exporter
