#include "agent/stream/spool.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/stream/stderr_lines.h"
#include "proto/memtrace/v1/events.pb.h"

namespace memtrace {

namespace {

uint64_t SizeOf(const SealedBatch& b) { return b.bytes ? b.bytes->size() : 0; }

// mkdir -p; OK when it exists already.
absl::Status MakeDirs(const std::string& path) {
  std::string partial;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    partial += std::string(part) + "/";
    if (part.empty()) continue;
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::UnavailableError(
          absl::StrCat("cannot create spool directory ", partial, ": ", std::strerror(errno)));
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::UnavailableError(absl::StrCat("spool path ", path, " is not a directory"));
  }
  return absl::OkStatus();
}

// Removes the files in `dir` (one level: the spool writes no subdirectories) and `dir`.
void RemoveDir(const std::string& dir) {
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      ::unlink((dir + "/" + e->d_name).c_str());
    }
    ::closedir(d);
  }
  ::rmdir(dir.c_str());
}

// Job ids are free text; a directory name keeps [A-Za-z0-9_-], at most 64 of them.
std::string Sanitize(absl::string_view s) {
  std::string out;
  for (char c : s) {
    if (out.size() == 64) break;
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    out.push_back(ok ? c : '_');
  }
  return out.empty() ? "job" : out;
}

// The pid in a spool directory name "<job>.r<rank>.a<attempt>.p<pid>.<n>", or 0.
pid_t PidOf(absl::string_view name) {
  std::vector<absl::string_view> parts = absl::StrSplit(name, '.');
  if (parts.size() < 5) return 0;
  absl::string_view p = parts[parts.size() - 2];
  int pid = 0;
  if (p.size() < 2 || p[0] != 'p' || !absl::SimpleAtoi(p.substr(1), &pid) || pid <= 0) return 0;
  return pid;
}

// Each spool directory holds this file, flock()ed by its process for as long as it lives.
constexpr char kLockFile[] = "lock";
// A directory being made (SpoolBatchStore::Create) has this name until it is locked.
constexpr absl::string_view kStagingPrefix = "staging-";

// Whether the process that made spool directory `dir` is gone. Its lock says so across PID
// namespaces (containers on one node sharing a host spool directory), where the pid in the name
// is another namespace's: probed with kill(), a live neighbour's directory read as dead and was
// removed under it. A directory without a lock file (an older agent's, or one being made this
// moment) falls back to that probe.
bool OwnerIsGone(const std::string& dir, pid_t pid) {
  const int fd = ::open((dir + "/" + kLockFile).c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return ::kill(pid, 0) != 0 && errno == ESRCH;
  const bool gone = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);  // releases the lock, if taken
  return gone;
}

// Spool directories of processes that are gone (kill -9, OOM kill) would otherwise stay forever.
void RemoveStaleSiblings(const std::string& spool_dir) {
  DIR* d = ::opendir(spool_dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> stale;
  while (dirent* e = ::readdir(d)) {
    const std::string dir = spool_dir + "/" + e->d_name;
    if (absl::StartsWith(e->d_name, kStagingPrefix)) {
      // Left by a process that died while making its directory: gone once its lock is free
      // and a minute has passed (a live one holds it within microseconds of making the file;
      // one that died before taking it leaves an empty directory behind).
      struct stat st;
      if (::stat(dir.c_str(), &st) != 0 || st.st_mtime > ::time(nullptr) - 60) continue;
      const int fd = ::open((dir + "/" + kLockFile).c_str(), O_RDWR | O_CLOEXEC);
      if (fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0) stale.push_back(dir);
      if (fd >= 0) ::close(fd);
      // Without a lock file (no flock there, or a process that died before making it): an
      // hour old, it is no process's any more.
      if (fd < 0 && st.st_mtime < ::time(nullptr) - 3600) stale.push_back(dir);
      continue;
    }
    const pid_t pid = PidOf(e->d_name);
    if (pid == 0) continue;
    if (pid != ::getpid() && OwnerIsGone(dir, pid)) stale.push_back(dir);
  }
  ::closedir(d);
  for (const std::string& dir : stale) RemoveDir(dir);
}

bool WriteFile(const std::string& path, const std::string& data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      ::unlink(path.c_str());
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return ::close(fd) == 0;
}

// WriteFile to a new file, then renamed over `path`: a failed write (disk full) leaves the old
// file as it was, where writing `path` itself would have truncated it.
bool ReplaceFile(const std::string& path, const std::string& data) {
  const std::string next = path + ".next";
  if (!WriteFile(next, data)) return false;
  if (::rename(next.c_str(), path.c_str()) == 0) return true;
  const int error = errno;
  ::unlink(next.c_str());
  errno = error;
  return false;
}

bool ReadFile(const std::string& path, uint64_t size, std::string* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out->resize(size);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, out->data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return done == size;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SpoolBatchStore>> SpoolBatchStore::Create(
    const std::string& spool_dir, const v1::RankIdentity& identity, uint64_t memory_bytes,
    uint64_t disk_bytes, bool log_failures) {
  if (spool_dir.empty()) return absl::InvalidArgumentError("empty spool directory");
  if (absl::Status s = MakeDirs(spool_dir); !s.ok()) return s;
  RemoveStaleSiblings(spool_dir);
  // Several transports of one process (tests, importers) each get their own directory.
  const std::string base =
      absl::StrCat(spool_dir, "/", Sanitize(identity.job_id()), ".r", identity.rank(), ".a",
                   identity.attempt(), ".p", ::getpid(), ".");
  // Made under a name no sweep reads (no ".p<pid>." part), locked, then renamed into place: a
  // directory of the final name without its lock yet was, to a neighbour's sweep in another PID
  // namespace, a dead process's, and removed (containers start together: the busiest moment).
  const std::string staging =
      absl::StrCat(spool_dir, "/", kStagingPrefix, ::getpid(), "-", absl::GetCurrentTimeNanos(),
                   "-", reinterpret_cast<uintptr_t>(&identity));
  if (::mkdir(staging.c_str(), 0700) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot create spool directory ", staging, ": ", std::strerror(errno)));
  }
  // Held until the store is destroyed or the process ends (see OwnerIsGone). Without it (a file
  // system without flock) the pid in the name is what others go by.
  int lock = ::open((staging + "/" + kLockFile).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock >= 0 && ::flock(lock, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock);
    ::unlink((staging + "/" + kLockFile).c_str());
    lock = -1;
  }
  for (int n = 0; n < 1000; ++n) {
    const std::string dir = absl::StrCat(base, n);
    // Never onto a name that exists: rename(2) would replace an empty directory (another
    // store's, made a moment before, on a file system without flock).
    if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, dir.c_str(), RENAME_NOREPLACE) == 0) {
      return absl::WrapUnique(
          new SpoolBatchStore(dir, memory_bytes, disk_bytes, log_failures, lock));
    }
  }
  if (lock >= 0) ::close(lock);
  RemoveDir(staging);
  return absl::UnavailableError(absl::StrCat("no free spool directory name at ", base, "N"));
}

SpoolBatchStore::SpoolBatchStore(std::string dir, uint64_t memory_bytes, uint64_t disk_limit,
                                 bool log, int lock_fd)
    : dir_(std::move(dir)),
      memory_limit_(memory_bytes),
      disk_limit_(disk_limit),
      log_(log),
      lock_fd_(lock_fd) {}

SpoolBatchStore::~SpoolBatchStore() {
  RemoveDir(dir_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void SpoolBatchStore::Report(Problem problem, const std::string& message) const {
  bool& reported = reported_[static_cast<int>(problem)];
  if (reported) return;
  reported = true;
  if (log_)
    AgentStderr().Write(absl::StrCat("memtrace-agent: spool: ", message, " (reported once)"));
}

bool SpoolBatchStore::SpillOldest() {
  SealedBatch& oldest = memory_.front();
  const uint64_t size = SizeOf(oldest);
  DiskBatch disk;
  disk.path = absl::StrCat(dir_, "/", next_file_++, ".batch");
  disk.size = size;
  if (!WriteFile(disk.path, oldest.bytes ? *oldest.bytes : std::string())) {
    Report(Problem::kWrite, absl::StrCat("cannot write ", disk.path, ": ", std::strerror(errno),
                                         "; batches beyond the memory bound are dropped"));
    return false;
  }
  disk.meta = std::move(oldest);
  disk.meta.bytes = nullptr;
  memory_.pop_front();
  memory_bytes_ -= size;
  disk_bytes_ += size;
  disk_.push_back(std::move(disk));
  ++spilled_;
  return true;
}

void SpoolBatchStore::DropFromDisk(uint64_t keep_through, std::vector<SealedBatch>* dropped) {
  auto victim =
      BatchToDrop(disk_, keep_through, [](const DiskBatch& b) { return b.meta.last_seq; });
  DiskBatch& oldest = *victim;
  SealedBatch batch = oldest.meta;
  // The Transport re-sends the string definitions of a dropped batch; only then are its bytes
  // needed.
  if (batch.has_strings) batch.bytes = ReadBatch(oldest);
  if (::unlink(oldest.path.c_str()) != 0) {
    Report(Problem::kRemove, absl::StrCat("cannot remove ", oldest.path, ": ",
                                          std::strerror(errno)));
  }
  disk_bytes_ -= oldest.size;
  disk_.erase(victim);
  dropped->push_back(std::move(batch));
}

void SpoolBatchStore::Append(SealedBatch batch, uint64_t keep_through,
                             std::vector<SealedBatch>* dropped) {
  memory_bytes_ += SizeOf(batch);
  memory_.push_back(std::move(batch));
  // The newest batch always stays in memory (the bound may be exceeded by that one batch).
  while (memory_.size() > 1 && memory_bytes_ > memory_limit_) {
    if (!SpillOldest()) {
      // Disk refused: behave like the memory store (the newest batch is never dropped).
      auto victim =
          BatchToDrop(memory_, keep_through, [](const SealedBatch& b) { return b.last_seq; });
      if (victim == memory_.end() - 1) victim = memory_.begin();
      memory_bytes_ -= SizeOf(*victim);
      dropped->push_back(std::move(*victim));
      memory_.erase(victim);
    }
  }
  while (!disk_.empty() && disk_bytes_ > disk_limit_) DropFromDisk(keep_through, dropped);
}

void SpoolBatchStore::Acknowledge(uint64_t durable_seq) {
  while (!disk_.empty() && disk_.front().meta.last_seq <= durable_seq) {
    ::unlink(disk_.front().path.c_str());
    disk_bytes_ -= disk_.front().size;
    disk_.pop_front();
  }
  while (!memory_.empty() && memory_.front().last_seq <= durable_seq) {
    memory_bytes_ -= SizeOf(memory_.front());
    memory_.pop_front();
  }
}

std::shared_ptr<const std::string> SpoolBatchStore::ReadBatch(const DiskBatch& b) const {
  auto bytes = std::make_shared<std::string>();
  if (!ReadFile(b.path, b.size, bytes.get())) return nullptr;
  return bytes;
}

std::optional<SealedBatch> SpoolBatchStore::NextAfter(uint64_t seq) const {
  auto on_disk = std::upper_bound(disk_.begin(), disk_.end(), seq,
                                  [](uint64_t s, const DiskBatch& b) { return s < b.meta.last_seq; });
  while (on_disk != disk_.end()) {
    SealedBatch batch = on_disk->meta;
    batch.bytes = ReadBatch(*on_disk);
    if (batch.bytes != nullptr) return batch;
    Report(Problem::kRead, absl::StrCat("cannot read back ", on_disk->path, ": ",
                                        std::strerror(errno), "; its ", on_disk->meta.events,
                                        " events are lost"));
    read_lost_ += on_disk->meta.events;
    disk_bytes_ -= on_disk->size;
    ::unlink(on_disk->path.c_str());
    on_disk = disk_.erase(on_disk);
  }
  auto in_memory = std::upper_bound(
      memory_.begin(), memory_.end(), seq,
      [](uint64_t s, const SealedBatch& b) { return s < b.last_seq; });
  if (in_memory == memory_.end()) return std::nullopt;
  return *in_memory;
}

void SpoolBatchStore::AddStringsAfter(uint64_t seq, absl::Span<const StringDef> defs) {
  if (defs.empty()) return;
  auto on_disk = std::find_if(disk_.begin(), disk_.end(),
                              [seq](const DiskBatch& b) { return b.meta.first_seq > seq; });
  if (on_disk != disk_.end()) {
    std::shared_ptr<const std::string> old = ReadBatch(*on_disk);
    if (old == nullptr) return;
    std::shared_ptr<std::string> bytes = WithStringDefs(*old, defs);
    if (bytes == nullptr) return;
    if (!ReplaceFile(on_disk->path, *bytes)) {
      Report(Problem::kWrite,
             absl::StrCat("cannot rewrite ", on_disk->path, ": ", std::strerror(errno),
                          "; kept it without the ", defs.size(), " string definitions"));
      return;
    }
    disk_bytes_ += bytes->size() - on_disk->size;
    on_disk->size = bytes->size();
    on_disk->meta.has_strings = true;
    return;
  }
  auto in_memory = std::find_if(memory_.begin(), memory_.end(),
                                [seq](const SealedBatch& b) { return b.first_seq > seq; });
  if (in_memory == memory_.end() || in_memory->bytes == nullptr) return;
  std::shared_ptr<std::string> bytes = WithStringDefs(*in_memory->bytes, defs);
  if (bytes == nullptr) return;
  memory_bytes_ += bytes->size() - SizeOf(*in_memory);
  in_memory->bytes = std::move(bytes);
  in_memory->has_strings = true;
}

std::unique_ptr<BatchStore> MakeBatchStore(const TransportOptions& options) {
  if (!options.spool_dir.empty()) {
    const uint64_t disk =
        options.spool_max_bytes == 0 ? kDefaultSpoolMaxBytes : options.spool_max_bytes;
    absl::StatusOr<std::unique_ptr<SpoolBatchStore>> spool = SpoolBatchStore::Create(
        options.spool_dir, options.identity, options.max_unacked_bytes, disk,
        options.log_failures);
    if (spool.ok()) return *std::move(spool);
    if (options.log_failures) {
      AgentStderr().Write(absl::StrCat("memtrace-agent: spool: ", spool.status().message(),
                                       "; keeping unacknowledged batches in memory only (",
                                       options.max_unacked_bytes, " bytes)"));
    }
  }
  return std::make_unique<MemoryBatchStore>(options.max_unacked_bytes);
}

uint64_t SpoolBatchStore::BytesAfter(uint64_t seq) const {
  uint64_t out = 0;
  // Newest first: memory holds the newer batches, the disk the older ones.
  for (auto it = memory_.rbegin(); it != memory_.rend(); ++it) {
    if (it->first_seq <= seq) return out;
    out += SizeOf(*it);
  }
  for (auto it = disk_.rbegin(); it != disk_.rend() && it->meta.first_seq > seq; ++it) {
    out += it->size;
  }
  return out;
}

}  // namespace memtrace
