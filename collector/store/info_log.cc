#include "collector/store/info_log.h"

#include <sys/time.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <ctime>

namespace memtrace::collector {
namespace {

class StdioInfoLog : public rocksdb::Logger {
 public:
  // `file` may be nullptr: every line is dropped.
  StdioInfoLog(std::FILE* file, rocksdb::InfoLogLevel level) : Logger(level), file_(file) {}
  ~StdioInfoLog() override {
    if (file_ != nullptr) std::fclose(file_);
  }

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    if (file_ == nullptr) return;
    // One fwrite per line (stdio locks the stream for it), as RocksDB's EnvLogger dates them.
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
    // A full disk fails these; the line is dropped, which is all a log can do then.
    if (std::fwrite(line, 1, size, file_) == size) std::fflush(file_);
  }

 private:
  std::FILE* file_;
};

}  // namespace

std::shared_ptr<rocksdb::Logger> OpenInfoLog(const std::string& dir, rocksdb::InfoLogLevel level) {
  return std::make_shared<StdioInfoLog>(std::fopen((dir + "/LOG").c_str(), "ae"), level);
}

}  // namespace memtrace::collector
