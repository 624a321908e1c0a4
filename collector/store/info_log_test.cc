#include "collector/store/info_log.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"

namespace memtrace::collector {
namespace {

std::string FreshDir(const std::string& name) { return test_util::FreshDir("info_log/" + name); }

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(InfoLogTest, AppendsDatedLinesAtTheLevelAndAbove) {
  const std::string dir = FreshDir("lines");
  {
    std::shared_ptr<rocksdb::Logger> log = OpenInfoLog(dir, rocksdb::InfoLogLevel::INFO_LEVEL);
    ASSERT_NE(log, nullptr);
    rocksdb::Log(rocksdb::InfoLogLevel::INFO_LEVEL, log, "opened %s with %d families", "store", 6);
    rocksdb::Log(rocksdb::InfoLogLevel::DEBUG_LEVEL, log, "not at this level");
  }
  const std::string text = Read(dir + "/LOG");
  EXPECT_NE(text.find("opened store with 6 families\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("not at this level"), std::string::npos) << text;
  // Dated as RocksDB's own LOG lines: "2026/12/04-00:57:28.205825 ".
  ASSERT_GE(text.size(), 27u);
  EXPECT_EQ(text[4], '/');
  EXPECT_EQ(text[10], '-');
  EXPECT_EQ(text[26], ' ');
}

// RocksDB opens a store whose write-ahead log is damaged in its middle without an error; the
// line its recovery writes here is the only sign. A torn last record (a write a crash cut short,
// never acknowledged) is no damage to speak of.
TEST(InfoLogTest, KeepsTheFirstLineAboutDroppedLogRecordsButNotATornTail) {
  const std::string dir = FreshDir("dropped");
  std::shared_ptr<rocksdb::Logger> log = OpenInfoLog(dir, rocksdb::InfoLogLevel::INFO_LEVEL);
  rocksdb::Log(rocksdb::InfoLogLevel::WARN_LEVEL, log, "%s: dropping %d bytes; %s", "/d/000004.log",
               32, "Corruption: truncated record body");
  EXPECT_EQ(FirstDroppedRecordsLine(*log), "");
  rocksdb::Log(rocksdb::InfoLogLevel::WARN_LEVEL, log, "%s: dropping %d bytes; %s", "/d/000004.log",
               32768, "Corruption: checksum mismatch");
  rocksdb::Log(rocksdb::InfoLogLevel::WARN_LEVEL, log, "%s: dropping %d bytes; %s", "/d/000004.log",
               7, "Corruption: checksum mismatch");
  EXPECT_EQ(FirstDroppedRecordsLine(*log),
            "[WARN] /d/000004.log: dropping 32768 bytes; Corruption: checksum mismatch");
}

TEST(InfoLogTest, ALogWhoseWritesFailDropsLinesAndCarriesOn) {
  // /dev/full fails every write with ENOSPC, as a full disk does: RocksDB's own writer asserted
  // on the write after a failed one.
  const std::string dir = FreshDir("full");
  ASSERT_EQ(symlink("/dev/full", (dir + "/LOG").c_str()), 0);
  std::shared_ptr<rocksdb::Logger> log = OpenInfoLog(dir, rocksdb::InfoLogLevel::INFO_LEVEL);
  ASSERT_NE(log, nullptr);
  for (int i = 0; i < 3; ++i) {
    rocksdb::Log(rocksdb::InfoLogLevel::ERROR_LEVEL, log, "cannot clear error %d", i);
  }
  SUCCEED() << "three failed writes, no abort";
}

TEST(InfoLogTest, AnUnwritableDirectoryGivesALoggerThatDropsLines) {
  // Not nullptr: RocksDB would then open its own logger, the one that asserts.
  std::shared_ptr<rocksdb::Logger> log =
      OpenInfoLog("/nonexistent/dir", rocksdb::InfoLogLevel::INFO_LEVEL);
  ASSERT_NE(log, nullptr);
  rocksdb::Log(rocksdb::InfoLogLevel::ERROR_LEVEL, log, "dropped");
}

TEST(InfoLogTest, AFullLogMovesToLogOldAndANewOneBegins) {
  const std::string dir = FreshDir("rotate");
  // Each line: a 27-byte date, "line N padded to 40", newline: 68 bytes; 3 fit in 210.
  const auto write_lines = [&dir](int from, int to) {
    std::shared_ptr<rocksdb::Logger> log =
        OpenInfoLog(dir, rocksdb::InfoLogLevel::INFO_LEVEL, /*max_bytes=*/210);
    for (int i = from; i < to; ++i) {
      rocksdb::Log(rocksdb::InfoLogLevel::INFO_LEVEL, log, "line %d %-33s", i, "padded");
    }
  };
  write_lines(0, 2);
  EXPECT_FALSE(std::filesystem::exists(dir + "/LOG.old"));
  // Reopened, it counts what LOG already holds: the 4th line overall is the one that moves it.
  write_lines(2, 8);
  const std::string log = Read(dir + "/LOG");
  const std::string old = Read(dir + "/LOG.old");
  EXPECT_LE(log.size(), 210u);
  EXPECT_LE(old.size(), 210u);
  EXPECT_NE(log.find("line 7 "), std::string::npos) << log;
  EXPECT_NE(log.find("line 6 "), std::string::npos) << log;
  EXPECT_NE(old.find("line 5 "), std::string::npos) << old;
  EXPECT_NE(old.find("line 3 "), std::string::npos) << old;
  // The first LOG.old (lines 0-2) was replaced by the second.
  EXPECT_EQ(old.find("line 2 "), std::string::npos) << old;
  EXPECT_EQ(old.find("line 0 "), std::string::npos) << old;
}

}  // namespace
}  // namespace memtrace::collector
