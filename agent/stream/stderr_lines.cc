#include "agent/stream/stderr_lines.h"

#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include <system_error>
#include <utility>

namespace memtrace {
namespace {

// The whole of `text`, through short writes and signals; gives up on any other error (stderr
// closed: nothing to tell anyone).
void WriteAll(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

BackgroundLineWriter::BackgroundLineWriter(int fd, size_t max_pending_bytes)
    : fd_(fd), max_pending_bytes_(max_pending_bytes), owner_pid_(::getpid()) {}

BackgroundLineWriter::~BackgroundLineWriter() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void BackgroundLineWriter::Write(std::string_view line) {
  std::string text;
  text.reserve(line.size() + 1);
  text.append(line);
  text.push_back('\n');
  if (::getpid() != owner_pid_) {
    WriteAll(fd_, text);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    if (!no_thread_ && (started_ || StartLocked())) {
      if (pending_bytes_ + text.size() > max_pending_bytes_) {
        ++dropped_;
        return;
      }
      pending_bytes_ += text.size();
      ++queued_;
      queue_.push_back(std::move(text));
      return;
    }
  }
  WriteAll(fd_, text);
}

bool BackgroundLineWriter::StartLocked() {
  try {
    thread_ = std::thread([this] { Run(); });
  } catch (const std::system_error&) {
    no_thread_ = true;  // thread limits: the lines are written by their callers, as before
    return false;
  }
  started_ = true;
  return true;
}

void BackgroundLineWriter::Run() {
  pthread_setname_np(pthread_self(), "memtrace-log");
  for (;;) {
    std::string text;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](BackgroundLineWriter* w)
               ABSL_NO_THREAD_SAFETY_ANALYSIS { return !w->queue_.empty() || w->stop_; },
          this));
      if (queue_.empty()) return;  // stop_, and everything written
      text = std::move(queue_.front());
      queue_.pop_front();
    }
    WriteAll(fd_, text);
    absl::MutexLock lock(&mu_);
    pending_bytes_ -= text.size();
    ++written_;
  }
}

bool BackgroundLineWriter::Flush(absl::Duration timeout) {
  if (::getpid() != owner_pid_) return true;  // written directly
  absl::MutexLock lock(&mu_);
  std::pair<BackgroundLineWriter*, uint64_t> wait(this, queued_);
  return mu_.AwaitWithTimeout(
      absl::Condition(
          +[](std::pair<BackgroundLineWriter*, uint64_t>* w)
               ABSL_NO_THREAD_SAFETY_ANALYSIS { return w->first->written_ >= w->second; },
          &wait),
      timeout);
}

uint64_t BackgroundLineWriter::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

BackgroundLineWriter& AgentStderr() {
  static BackgroundLineWriter* const writer = new BackgroundLineWriter(STDERR_FILENO);
  return *writer;
}

}  // namespace memtrace
