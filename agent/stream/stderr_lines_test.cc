#include "agent/stream/stderr_lines.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace memtrace {
namespace {

struct Pipe {
  Pipe() { EXPECT_EQ(pipe(fds), 0); }
  ~Pipe() {
    close(fds[0]);
    close(fds[1]);
  }
  // Everything in the pipe now, without waiting.
  std::string Drain() {
    const int flags = fcntl(fds[0], F_GETFL);
    fcntl(fds[0], F_SETFL, flags | O_NONBLOCK);
    std::string out;
    char buffer[65536];
    for (;;) {
      const ssize_t n = read(fds[0], buffer, sizeof(buffer));
      if (n <= 0) break;
      out.append(buffer, static_cast<size_t>(n));
    }
    fcntl(fds[0], F_SETFL, flags);
    return out;
  }
  int fds[2] = {-1, -1};
};

TEST(BackgroundLineWriterTest, WritesEachLineInOrder) {
  Pipe pipe;
  BackgroundLineWriter writer(pipe.fds[1]);
  writer.Write("memtrace-agent: one");
  writer.Write("memtrace-agent: two");
  ASSERT_TRUE(writer.Flush(absl::Seconds(10)));
  EXPECT_EQ(pipe.Drain(), "memtrace-agent: one\nmemtrace-agent: two\n");
  EXPECT_EQ(writer.dropped(), 0u);
}

// The pipe nobody drains: a direct write blocks once its 64 KiB are full. Writing through the
// writer returns at once, lines past the bound are dropped and counted, and once the pipe drains
// the lines that were kept come out whole and in order.
TEST(BackgroundLineWriterTest, NeverWaitsOnAFullPipe) {
  Pipe pipe;
  BackgroundLineWriter writer(pipe.fds[1], /*max_pending_bytes=*/64 * 1024);
  const std::string filler(1000, 'x');
  const absl::Time start = absl::Now();
  for (int i = 0; i < 1000; ++i) writer.Write(absl::StrCat(i, " ", filler));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));  // ~1 MB into a 64 KiB pipe
  EXPECT_FALSE(writer.Flush(absl::Milliseconds(200)));
  EXPECT_GT(writer.dropped(), 800u);
  std::string out;
  while (!writer.Flush(absl::Milliseconds(10))) out += pipe.Drain();
  out += pipe.Drain();
  const uint64_t kept = 1000 - writer.dropped();
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), kept);
  int previous = -1;
  for (const std::string& line : lines) {
    const std::vector<std::string> parts = absl::StrSplit(line, ' ');
    ASSERT_EQ(parts.size(), 2u) << line.substr(0, 20);
    int index = 0;
    ASSERT_TRUE(absl::SimpleAtoi(parts[0], &index));
    EXPECT_GT(index, previous);
    EXPECT_EQ(parts[1], filler);
    previous = index;
  }
}

}  // namespace
}  // namespace memtrace
