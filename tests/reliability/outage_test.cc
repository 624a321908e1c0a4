// The collector is down for the first seconds of a job. With a spool big enough, nothing is
// lost: batches beyond the agent's memory bound go to MEMTRACE_SPOOL_DIR and are resent after
// the collector comes up. With a spool smaller than the outage, the oldest batches are dropped
// and exactly their events are reported lost (LOSS_REASON_SPOOL_FULL markers, agent counters).
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/reliability/harness.h"

namespace memtrace::reliability {
namespace {

// A loopback port nothing listens on yet: bound by the OS, then closed.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// Spilled batch files anywhere under `dir` (one level of per-transport directories).
int SpoolFiles(const std::string& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    if (DIR* sub = opendir((dir + "/" + e->d_name).c_str())) {
      while (dirent* f = readdir(sub)) n += absl::EndsWith(f->d_name, ".batch");
      closedir(sub);
    }
  }
  closedir(d);
  return n;
}

struct OutageRun {
  std::vector<std::unique_ptr<Child>> agents;
  int max_spool_files = 0;
};

// Starts `ranks` agents against a port with no collector, keeps it down for `outage` while
// watching the spool directory, then starts the collector there.
OutageRun StartWithOutage(CollectorProcess* collector, const std::string& job, int ranks,
                    uint64_t events, uint64_t rate, absl::Duration outage, const Env& extra) {
  OutageRun run;
  const int port = FreePort();
  const std::string address = absl::StrCat("127.0.0.1:", port);
  for (int r = 0; r < ranks; ++r) {
    Env env = AgentEnv(address, job, r, ranks);
    env.insert(env.end(), extra.begin(), extra.end());
    auto agent = Child::Spawn({kAgentBin, absl::StrCat("--events=", events),
                               absl::StrCat("--rate=", rate), "--flush_timeout_ms=90000"},
                              env, absl::StrCat(job, "-agent", r));
    EXPECT_TRUE(agent.ok()) << agent.status();
    if (agent.ok()) run.agents.push_back(*std::move(agent));
  }
  const std::string spool = extra.empty() ? "" : extra.front().second;
  const absl::Time up_at = absl::Now() + outage;
  while (absl::Now() < up_at) {
    run.max_spool_files = std::max(run.max_spool_files, SpoolFiles(spool));
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(collector->Start(port).ok());
  return run;
}

TEST(OutageTest, CollectorDownForTheFirstSecondsLosesNothingWithTheSpool) {
  constexpr int kRanks = 4;
  constexpr uint64_t kEvents = 400'000;
  const std::string spool = FreshDir("outage-spool");
  CollectorProcess collector(FreshDir("outage-db"), {});
  // 256 KiB of batches in memory (~20 k events); everything older goes to the spool.
  const Env env = {{"MEMTRACE_SPOOL_DIR", spool}, {"MEMTRACE_UNACKED_MAX_BYTES", "262144"}};
  OutageRun run = StartWithOutage(&collector, "outage-job", kRanks, kEvents, 100'000,
                            absl::Seconds(3), env);
  EXPECT_GT(run.max_spool_files, 0) << "the outage never reached the disk spool";
  uint64_t max_unacked = 0;
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(run.agents[r]->Wait(absl::Seconds(120)), 0) << run.agents[r]->Stderr();
    const auto result = LastLine(run.agents[r]->Stdout(), "RESULT");
    EXPECT_EQ(U64(result, "lost"), 0u) << r;
    EXPECT_EQ(U64(result, "durable"), kEvents) << r;
    max_unacked = std::max(max_unacked, U64(result, "max_unacked_bytes"));
  }
  absl::StatusOr<v1::ListRanksResponse> ranks = ListRanks(collector.address(), "outage-job");
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  ASSERT_EQ(ranks->ranks_size(), kRanks);
  for (const v1::RankSummary& r : ranks->ranks()) {
    EXPECT_EQ(r.events_stored(), kEvents) << r.rank();
    EXPECT_TRUE(r.complete()) << r.rank();
    absl::StatusOr<std::vector<Event>> events =
        ReadAllEvents(collector.address(), "outage-job", r.rank());
    ASSERT_TRUE(events.ok()) << events.status();
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < events->size(); ++i) wrong += (*events)[i].seq != i + 1;
    EXPECT_EQ(wrong, 0u) << r.rank();
  }
  EXPECT_EQ(SpoolFiles(spool), 0) << "the spool keeps files after the agents exited";
  std::printf("outage 3 s, spool 1 GiB, memory 256 KiB: %d ranks x %llu events, 0 lost; up to "
              "%d spilled batch files at once, peak unacked %llu bytes per rank\n",
              kRanks, static_cast<unsigned long long>(kEvents), run.max_spool_files,
              static_cast<unsigned long long>(max_unacked));
}

TEST(OutageTest, ASpoolSmallerThanTheOutageLosesExactlyTheReportedEvents) {
  constexpr int kRanks = 2;
  constexpr uint64_t kEvents = 300'000;
  const std::string spool = FreshDir("small-spool");
  CollectorProcess collector(FreshDir("small-spool-db"), {});
  // 128 KiB in memory + 512 KiB on disk: about 50 k of the 300 k events fit.
  const Env env = {{"MEMTRACE_SPOOL_DIR", spool},
                   {"MEMTRACE_UNACKED_MAX_BYTES", "131072"},
                   {"MEMTRACE_SPOOL_MAX_BYTES", "524288"}};
  OutageRun run = StartWithOutage(&collector, "small-spool-job", kRanks, kEvents, 100'000,
                            absl::Seconds(4), env);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(run.agents[r]->Wait(absl::Seconds(120)), 0) << run.agents[r]->Stderr();
    const auto result = LastLine(run.agents[r]->Stdout(), "RESULT");
    const uint64_t reported = U64(result, "lost_spool");
    EXPECT_GT(reported, 0u) << "rank " << r << ": the spool bound was never reached";
    EXPECT_EQ(U64(result, "lost"), reported) << r;

    absl::StatusOr<std::vector<Event>> events =
        ReadAllEvents(collector.address(), "small-spool-job", r);
    ASSERT_TRUE(events.ok()) << events.status();
    uint64_t kept = 0, markers_lost = 0, markers = 0, not_increasing = 0;
    for (size_t i = 0; i < events->size(); ++i) {
      const Event& e = (*events)[i];
      if (i > 0 && e.seq <= (*events)[i - 1].seq) ++not_increasing;
      if (e.kind == EventKind::kLoss) {
        ++markers;
        EXPECT_EQ(e.memory_kind, kLossSpoolFull);
        markers_lost += e.aux;
      } else {
        ++kept;
      }
    }
    EXPECT_EQ(not_increasing, 0u) << r;
    // Exact accounting: what is stored plus what the markers say was lost is what was sent.
    EXPECT_EQ(kept + markers_lost, kEvents) << "rank " << r;
    EXPECT_EQ(markers_lost, reported) << "rank " << r;
    absl::StatusOr<v1::ListRanksResponse> ranks = ListRanks(collector.address(), "small-spool-job");
    ASSERT_TRUE(ranks.ok());
    for (const v1::RankSummary& s : ranks->ranks()) {
      if (s.rank() != static_cast<uint32_t>(r)) continue;
      EXPECT_EQ(s.counters().events_lost(), reported) << r;
      EXPECT_TRUE(s.complete()) << r;
    }
    std::printf("outage 4 s, spool 512 KiB + memory 128 KiB, rank %d: %llu of %llu events "
                "stored, %llu reported lost in %llu SPOOL_FULL marker(s); stored + lost = sent\n",
                r, static_cast<unsigned long long>(kept), static_cast<unsigned long long>(kEvents),
                static_cast<unsigned long long>(markers_lost),
                static_cast<unsigned long long>(markers));
  }
}

}  // namespace
}  // namespace memtrace::reliability
