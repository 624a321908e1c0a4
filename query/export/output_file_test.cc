#include "query/export/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"

namespace memtrace::exporter {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

TEST(OutputFileTest, WritesAndCommitsTheFile) {
  std::string path = test_util::TmpPath("out.json");
  std::ostringstream unused;
  ASSERT_TRUE(WriteOutputFile(path, unused, [](std::ostream& out) {
                out << "{}";
                return absl::OkStatus();
              }).ok());
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "{}");
  EXPECT_FALSE(Exists(path + ".tmp"));
}

TEST(OutputFileTest, AFailedWriteLeavesTheOldFileAlone) {
  std::string path = test_util::TmpPath("keep.json");
  std::ofstream(path) << "old";
  std::ostringstream unused;
  absl::Status s = WriteOutputFile(path, unused, [](std::ostream& out) {
    out << "partial";
    return absl::UnavailableError("collector went away");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "old");
  EXPECT_FALSE(Exists(path + ".tmp"));
}

TEST(OutputFileTest, DashMeansStdout) {
  std::ostringstream out;
  ASSERT_TRUE(WriteOutputFile("-", out, [](std::ostream& o) {
                o << "svg";
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(out.str(), "svg");
}

TEST(OutputFileTest, AnUnwritableDirectoryIsNamed) {
  std::ostringstream unused;
  absl::Status s = WriteOutputFile("/nonexistent/dir/out.svg", unused,
                                   [](std::ostream&) { return absl::OkStatus(); });
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/dir/out.svg: cannot write"), std::string::npos) << s;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ostringstream unused;
  return WriteOutputFile(path, unused, [&](std::ostream& out) {
    out << text;
    return absl::OkStatus();
  });
}

// A symlink stays a symlink; its target gets the content.
TEST(OutputFileTest, ASymlinkIsFollowedNotReplaced) {
  const std::string target = test_util::TmpPath("target.json");
  const std::string link = test_util::TmpPath("link.json");
  std::ofstream(target) << "old";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  ASSERT_TRUE(WriteText(link, "new").ok());
  struct stat st;
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(Read(target), "new");
}

// A FIFO is written in place: its reader gets the content and it stays a FIFO.
TEST(OutputFileTest, AFifoIsWrittenInPlace) {
  const std::string fifo = test_util::TmpPath("out.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = Read(fifo); });
  ASSERT_TRUE(WriteText(fifo, "streamed").ok());
  reader.join();
  EXPECT_EQ(received, "streamed");
  struct stat st;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

// The file keeps its mode, and the user's own PATH.tmp is left alone.
TEST(OutputFileTest, KeepsTheModeAndLeavesOtherFilesAlone) {
  const std::string path = test_util::TmpPath("moded.json");
  std::ofstream(path) << "old";
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  std::ofstream(path + ".tmp") << "mine";
  ASSERT_TRUE(WriteText(path, "new").ok());
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(Read(path), "new");
  EXPECT_EQ(Read(path + ".tmp"), "mine");
}

TEST(OutputFileTest, AFailedWriteToStandardOutputIsAnError) {
  std::ostringstream out;
  out.setstate(std::ios::badbit);  // as a write to a full disk leaves it
  absl::Status s = WriteOutputFile("-", out, [](std::ostream& o) {
    o << "svg";
    return absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace memtrace::exporter
