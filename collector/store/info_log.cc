#include "collector/store/info_log.h"

#include <sys/stat.h>
#include <sys/time.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace memtrace::collector {
namespace {

class StdioInfoLog : public rocksdb::Logger {
 public:
  // Appends to `path` (dropping every line when it cannot be opened), moving it to
  // `path`.old once it holds `max_bytes`.
  StdioInfoLog(std::string path, uint64_t max_bytes, rocksdb::InfoLogLevel level)
      : Logger(level), path_(std::move(path)), max_bytes_(max_bytes) {
    absl::MutexLock lock(&mu_);
    Open();
  }
  ~StdioInfoLog() override {
    absl::MutexLock lock(&mu_);
    if (file_ != nullptr) std::fclose(file_);
  }

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    // Dated as RocksDB's EnvLogger dates its lines.
    char line[4096];
    timeval now;
    gettimeofday(&now, nullptr);
    tm t;
    localtime_r(&now.tv_sec, &t);
    int n = std::snprintf(line, sizeof(line), "%04d/%02d/%02d-%02d:%02d:%02d.%06ld ",
                          t.tm_year + 1900, t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec,
                          static_cast<long>(now.tv_usec));
    if (n < 0) return;
    va_list copy;
    va_copy(copy, ap);
    const int m = std::vsnprintf(line + n, sizeof(line) - n - 1, format, copy);
    va_end(copy);
    if (m < 0) return;
    size_t size = std::min(sizeof(line) - 2, static_cast<size_t>(n) + static_cast<size_t>(m));
    if (size == 0 || line[size - 1] != '\n') line[size++] = '\n';

    absl::MutexLock lock(&mu_);
    // WAL recovery's reporter: "<file>: dropping <n> bytes; <why>". (The buffer holds no NUL
    // after the '\n' just written: the text is searched as the view it is.) A torn last record
    // ("truncated header", "truncated record body", trailing data: a write cut by a crash) was
    // never acknowledged under sync durability and is no damage to speak of.
    const absl::string_view text(line + n, size - n - 1);
    if (first_dropped_.empty() && absl::StrContains(text, "dropping ") &&
        absl::StrContains(text, " bytes; ") && !absl::StrContains(text, "truncated") &&
        !absl::StrContains(text, "trailing data")) {
      first_dropped_ = std::string(text);
    }
    if (file_ == nullptr) Open();  // it could not be opened before, or after a rotation
    if (bytes_ > 0 && bytes_ + size > max_bytes_) Rotate();
    if (file_ == nullptr) return;
    // A full disk fails these; the line is dropped, which is all a log can do then.
    if (std::fwrite(line, 1, size, file_) == size) {
      std::fflush(file_);
      bytes_ += size;
    }
  }

 private:
  void Open() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    file_ = std::fopen(path_.c_str(), "ae");
    struct stat st;
    bytes_ = file_ != nullptr && fstat(fileno(file_), &st) == 0 ? st.st_size : 0;
  }

  // RocksDB's own logger rolls its LOG by size too (max_log_file_size); one old file is kept.
  // When LOG cannot be renamed it is kept and written on, and renaming is tried again after
  // another max_bytes (not on every line).
  void Rotate() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (std::rename(path_.c_str(), (path_ + ".old").c_str()) != 0) {
      bytes_ = 0;
      return;
    }
    if (file_ != nullptr) std::fclose(file_);
    Open();
  }

 public:
  std::string first_dropped() const {
    absl::MutexLock lock(&mu_);
    return first_dropped_;
  }

 private:
  const std::string path_;
  const uint64_t max_bytes_;
  mutable absl::Mutex mu_;
  std::string first_dropped_ ABSL_GUARDED_BY(mu_);
  std::FILE* file_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

std::shared_ptr<rocksdb::Logger> OpenInfoLog(const std::string& dir, rocksdb::InfoLogLevel level,
                                             uint64_t max_bytes) {
  return std::make_shared<StdioInfoLog>(dir + "/LOG", max_bytes, level);
}

std::string FirstDroppedRecordsLine(const rocksdb::Logger& log) {
  const auto* ours = dynamic_cast<const StdioInfoLog*>(&log);
  return ours != nullptr ? ours->first_dropped() : std::string();
}

}  // namespace memtrace::collector
