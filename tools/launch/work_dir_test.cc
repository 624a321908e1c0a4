#include "tools/launch/work_dir.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"

namespace memtrace::launch {
namespace {

namespace fs = std::filesystem;

// A run killed with SIGKILL: its directory made and locked, then the process gone without a
// word. Returns the directory.
std::string DirOfAKilledRun(const std::string& base) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return "";
  const pid_t pid = fork();
  if (pid == 0) {
    absl::StatusOr<WorkDir> dir = WorkDir::Create(base);
    const std::string path = dir.ok() ? dir->path() : "";
    std::ofstream(path + "/collector.log") << "the collector's log\n";
    (void)!write(pipe_fds[1], path.data(), path.size());
    _exit(0);  // no destructor: as SIGKILL leaves it
  }
  close(pipe_fds[1]);
  char buf[4096];
  const ssize_t n = read(pipe_fds[0], buf, sizeof(buf));
  close(pipe_fds[0]);
  waitpid(pid, nullptr, 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

TEST(WorkDirTest, ALiveRunsDirectoryStaysAndAKilledRunsIsSwept) {
  const std::string base = test_util::UniqueDir("work_dir_sweep");
  absl::StatusOr<WorkDir> mine = WorkDir::Create(base);
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ(fs::path(mine->path()).filename().string().rfind("memtrace-run-", 0), 0u);
  const std::string killed = DirOfAKilledRun(base);
  ASSERT_FALSE(killed.empty());
  ASSERT_TRUE(fs::exists(killed + "/collector.log"));

  EXPECT_EQ(SweepStaleWorkDirs(base), std::vector<std::string>{killed});
  EXPECT_FALSE(fs::exists(killed));
  EXPECT_TRUE(fs::exists(mine->path() + "/lock")) << "a live run's lock is held";

  const std::string path = mine->path();
  mine->Remove();
  EXPECT_FALSE(fs::exists(path));
}

TEST(WorkDirTest, AKeptDirectoryAndOnesWithoutALockAreNotSwept) {
  const std::string base = test_util::UniqueDir("work_dir_keep");
  std::string kept;
  {
    absl::StatusOr<WorkDir> dir = WorkDir::Create(base);
    ASSERT_TRUE(dir.ok()) << dir.status();
    kept = dir->path();
    std::ofstream(kept + "/collector.log") << "why the collector died\n";
    dir->Keep();
  }  // kept: the destructor leaves it
  // An older memtrace's directory, and someone else's that only looks like one.
  fs::create_directories(base + "/memtrace-run-abcdef");
  fs::create_directories(base + "/memtrace-run-notsix/x");
  EXPECT_TRUE(SweepStaleWorkDirs(base).empty());
  EXPECT_TRUE(fs::exists(kept + "/collector.log"));
  EXPECT_FALSE(fs::exists(kept + "/lock"));
  EXPECT_TRUE(fs::exists(base + "/memtrace-run-abcdef"));
}

// A TMPDIR shared by nodes: another node's run, whose lock this node may not see, is left
// alone; so is a link named like a run's directory, which leads elsewhere.
TEST(WorkDirTest, AnotherHostsDirectoryAndALinkAreNotSwept) {
  const std::string base = test_util::UniqueDir("work_dir_hosts");
  const std::string other = base + "/memtrace-run-abc123";
  fs::create_directories(other);
  std::ofstream(other + "/lock") << "another-node";
  std::ofstream(other + "/collector.log") << "its log\n";
  const std::string elsewhere = test_util::UniqueDir("work_dir_elsewhere");
  const std::string killed = DirOfAKilledRun(elsewhere);  // this host's, unlocked
  ASSERT_FALSE(killed.empty());
  fs::create_directory_symlink(killed, base + "/memtrace-run-link00");
  EXPECT_TRUE(SweepStaleWorkDirs(base).empty());
  EXPECT_TRUE(fs::exists(other + "/collector.log"));
  EXPECT_TRUE(fs::exists(killed + "/lock"));
  // Swept where it lies, it goes.
  EXPECT_EQ(SweepStaleWorkDirs(elsewhere), std::vector<std::string>{killed});
}

TEST(WorkDirTest, RemoveTakesOnlyWhatARunPutThere) {
  const std::string base = test_util::UniqueDir("work_dir_remove");
  absl::StatusOr<WorkDir> dir = WorkDir::Create(base);
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string path = dir->path();
  std::ofstream(path + "/collector.port") << "7431\n";
  fs::create_directories(path + "/data");  // a store made there (no $HOME)
  dir->Remove();
  EXPECT_FALSE(fs::exists(path + "/collector.port"));
  EXPECT_FALSE(fs::exists(path + "/lock"));
  EXPECT_TRUE(fs::exists(path + "/data"));
  EXPECT_TRUE(SweepStaleWorkDirs(base).empty()) << "without its lock file, never swept";
}

TEST(WorkDirTest, AnUnwritableBaseIsAnErrorNamingIt) {
  absl::StatusOr<WorkDir> dir = WorkDir::Create("/nonexistent/memtrace-base");
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("/nonexistent/memtrace-base/memtrace-run-"),
            std::string::npos)
      << dir.status();
}

}  // namespace
}  // namespace memtrace::launch
