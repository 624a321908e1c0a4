// Runs the real memtrace-emit binary against an in-process fake collector.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/stream/fake_collector.h"
#include "gtest/gtest.h"


namespace memtrace {
namespace {

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string EmitPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir ? srcdir : ".", "/memtrace/agent/stream/memtrace-emit");
}

// Runs memtrace-emit with exactly `env` (plus nothing inherited) and `args`.
Result RunEmit(const std::map<std::string, std::string>& env, std::vector<std::string> args) {
  int out_pipe[2], err_pipe[2];
  EXPECT_EQ(pipe(out_pipe), 0);
  EXPECT_EQ(pipe(err_pipe), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
  posix_spawn_file_actions_addclose(&actions, err_pipe[0]);
  std::string path = EmitPath();
  std::vector<std::string> argv_store = {path};
  for (std::string& a : args) argv_store.push_back(std::move(a));
  std::vector<char*> argv;
  for (std::string& a : argv_store) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_store;
  for (const auto& [k, v] : env) env_store.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, path.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  Result result;
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn " << path << ": " << rc;
    return result;
  }
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, 20000) <= 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? result.out : result.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

size_t Lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(MemtraceEmitTest, DeliversItsEventsUnderTheEnvironmentsIdentityAndExitsZero) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  Result r = RunEmit({{"MEMTRACE_COLLECTOR", collector.address()},
                  {"TORCHELASTIC_RUN_ID", "run-42"},
                  {"RANK", "1"},
                  {"LOCAL_RANK", "1"},
                  {"WORLD_SIZE", "2"},
                  {"TORCHELASTIC_RESTART_COUNT", "0"}},
                 {"--events=500", "--tag", "emit:test"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("job run-42 rank 1 attempt 0: 500 events acknowledged"), std::string::npos)
      << r.out;
  ASSERT_TRUE(collector.WaitFor([](const FakeCollector::Stream& s) { return s.clean_closes == 1; },
                                absl::Seconds(2)));
  FakeCollector::Stream s = collector.Snapshot();
  EXPECT_EQ(s.identity.job_id(), "run-42");
  EXPECT_EQ(s.identity.rank(), 1);
  EXPECT_EQ(s.identity.launcher(), "torchrun");
  EXPECT_EQ(s.identity.device_index(), 1);
  ASSERT_EQ(s.events.size(), 500u);
  EXPECT_EQ(s.events[0].kind, EventKind::kAlloc);
  EXPECT_EQ(s.events[1].kind, EventKind::kFree);
  EXPECT_EQ(s.events[1].address, s.events[0].address);
  EXPECT_EQ(s.strings.at(s.events[0].tag_id).value, "emit:test");
  EXPECT_EQ(s.undefined_string_uses, 0u);
}

// Found by a user: with the queue overflowing, it printed "3000000 events acknowledged" and
// exited 0 while the collector counted 985129 lost.
TEST(MemtraceEmitTest, DroppedEventsExitThreeSayingHowMany) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  Result r = RunEmit({{"MEMTRACE_COLLECTOR", collector.address()},
                      {"MEMTRACE_JOB_ID", "overflow"},
                      {"RANK", "0"},
                      {"WORLD_SIZE", "1"},
                      {"MEMTRACE_QUEUE_EVENTS", "16"}},
                     {"--events=200000"});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_EQ(r.out.find("acknowledged by"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find(" of 200000 events were dropped, not delivered (queue full: "),
            std::string::npos)
      << r.err;
}

// A rerun whose attempt the collector holds from a run that ended is stored as the next one:
// the summary said "attempt 0" after the agent had said it was stored as attempt 1.
TEST(MemtraceEmitTest, TheSummaryNamesTheAttemptTheCollectorStoredItAs) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  collector.AckHellosAsAttempt(1);
  Result r = RunEmit({{"MEMTRACE_COLLECTOR", collector.address()},
                      {"TORCHELASTIC_RUN_ID", "run-43"},
                      {"RANK", "0"},
                      {"WORLD_SIZE", "1"}},
                     {"--events=10"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("job run-43 rank 0 attempt 1: 10 events acknowledged"), std::string::npos)
      << r.out;
}

TEST(MemtraceEmitTest, BadRankExitsTwoWithOneLineNamingTheVariable) {
  Result r = RunEmit({{"MEMTRACE_JOB_ID", "j"}, {"RANK", "abc"}}, {});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("memtrace-emit: RANK='abc'"), std::string::npos) << r.err;
}

TEST(MemtraceEmitTest, MissingJobIdExitsTwoNamingWhereItLooked) {
  Result r = RunEmit({{"RANK", "0"}}, {});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("MEMTRACE_JOB_ID"), std::string::npos) << r.err;
}

TEST(MemtraceEmitTest, BadFlagOrAddressExitsTwo) {
  Result flag = RunEmit({{"MEMTRACE_JOB_ID", "j"}}, {"--events=many"});
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_NE(flag.err.find("--events='many'"), std::string::npos) << flag.err;
  Result address = RunEmit({{"MEMTRACE_JOB_ID", "j"}, {"MEMTRACE_COLLECTOR", "nohostport"}}, {});
  EXPECT_EQ(address.exit_code, 2);
  EXPECT_NE(address.err.find("MEMTRACE_COLLECTOR='nohostport'"), std::string::npos)
      << address.err;
}

// --help needs no environment and no collector ("flag --help needs a value", exit 2, before).
TEST(MemtraceEmitTest, HelpPrintsTheUsageAndExitsZero) {
  Result r = RunEmit({}, {"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Usage: memtrace-emit [--events=N]"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
}

TEST(MemtraceEmitTest, UnreachableCollectorExitsThreeInBoundedTime) {
  FakeCollector dead;
  ASSERT_TRUE(dead.Start().ok());
  const std::string address = dead.address();
  dead.Stop();
  const absl::Time start = absl::Now();
  Result r = RunEmit({{"MEMTRACE_JOB_ID", "j"}, {"MEMTRACE_COLLECTOR", address}},
                 {"--events=10", "--flush_timeout_ms=300"});
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("memtrace-emit: flush: 10 events not acknowledged"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace memtrace
