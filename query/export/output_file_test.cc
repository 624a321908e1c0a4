#include "query/export/output_file.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "gtest/gtest.h"

namespace memtrace::exporter {
namespace {

std::string TempPath(const std::string& name) { return std::string(std::getenv("TEST_TMPDIR")) + "/" + name; }

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

TEST(OutputFileTest, WritesAndCommitsTheFile) {
  std::string path = TempPath("out.json");
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
  std::string path = TempPath("keep.json");
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

}  // namespace
}  // namespace memtrace::exporter
