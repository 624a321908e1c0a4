// kill -9 of the collector while 8 ranks stream 1M events each through the real Transport (8
// agent processes), restart on the same data directory and port: after the agents drain,
// every rank's stored events are exactly seq 1..1M, once each.
#include <dirent.h>
#include <signal.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/reliability/harness.h"

namespace memtrace::reliability {
namespace {

constexpr int kRanks = 8;
constexpr uint64_t kEventsPerRank = 1'000'000;
// Paced so that streaming takes several seconds and the kills land mid-stream.
constexpr uint64_t kRatePerRank = 125'000;
constexpr char kJob[] = "crash-job";

uint64_t StoredTotal(const std::string& address) {
  absl::StatusOr<v1::ListRanksResponse> ranks = ListRanks(address, kJob);
  if (!ranks.ok()) return 0;
  uint64_t total = 0;
  for (const v1::RankSummary& r : ranks->ranks()) total += r.events_stored();
  return total;
}

// Waits until the job has `target` events stored; false after 60 s.
bool WaitStored(const std::string& address, uint64_t target) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    if (StoredTotal(address) >= target) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

TEST(CollectorCrashTest, KillNineTwiceMidStreamLosesAndDuplicatesNothing) {
  const absl::Time start = absl::Now();
  CollectorProcess collector(FreshDir("crash-db"), {"--durability=sync"});
  ASSERT_TRUE(collector.Start(0).ok());
  std::vector<std::unique_ptr<Child>> agents;
  for (int r = 0; r < kRanks; ++r) {
    auto agent = Child::Spawn({kAgentBin, absl::StrCat("--events=", kEventsPerRank),
                               absl::StrCat("--rate=", kRatePerRank), "--flush_timeout_ms=120000"},
                              AgentEnv(collector.address(), kJob, r, kRanks),
                              absl::StrCat("crash-agent", r));
    ASSERT_TRUE(agent.ok()) << agent.status();
    agents.push_back(*std::move(agent));
  }
  const uint64_t total = kRanks * kEventsPerRank;
  // First kill at ~25% stored, restart after 1 s; second at ~60%, restart at once.
  ASSERT_TRUE(WaitStored(collector.address(), total / 4));
  const uint64_t before_first = StoredTotal(collector.address());
  collector.Kill9();
  absl::SleepFor(absl::Seconds(1));
  ASSERT_TRUE(collector.Start().ok());
  const uint64_t after_first = StoredTotal(collector.address());
  EXPECT_GE(after_first, before_first) << "acknowledged events vanished in the crash";
  ASSERT_TRUE(WaitStored(collector.address(), total * 6 / 10));
  collector.Kill9();
  ASSERT_TRUE(collector.Start().ok());

  uint64_t reconnects = 0, resent = 0;
  for (int r = 0; r < kRanks; ++r) {
    const int code = agents[r]->Wait(absl::Seconds(150));
    const auto result = LastLine(agents[r]->Stdout(), "RESULT");
    EXPECT_EQ(code, 0) << "rank " << r << ": " << agents[r]->Stderr();
    EXPECT_EQ(U64(result, "recorded"), kEventsPerRank) << r;
    EXPECT_EQ(U64(result, "durable"), kEventsPerRank) << r;
    EXPECT_EQ(U64(result, "lost"), 0u) << r;
    EXPECT_GE(U64(result, "reconnects"), 2u) << r;
    reconnects += U64(result, "reconnects");
    resent += U64(result, "resent");
  }
  const absl::Duration streamed = absl::Now() - start;

  absl::StatusOr<v1::ListRanksResponse> ranks = ListRanks(collector.address(), kJob);
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  ASSERT_EQ(ranks->ranks_size(), kRanks);
  for (const v1::RankSummary& r : ranks->ranks()) {
    EXPECT_EQ(r.events_stored(), kEventsPerRank) << "rank " << r.rank();
    EXPECT_EQ(r.durable_seq(), kEventsPerRank) << "rank " << r.rank();
    EXPECT_TRUE(r.complete()) << "rank " << r.rank();
  }
  // The events themselves: seq 1..N exactly once, in order, per rank.
  for (int r = 0; r < kRanks; ++r) {
    absl::StatusOr<std::vector<Event>> events = ReadAllEvents(collector.address(), kJob, r);
    ASSERT_TRUE(events.ok()) << events.status();
    ASSERT_EQ(events->size(), kEventsPerRank) << "rank " << r;
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < events->size(); ++i) wrong += (*events)[i].seq != i + 1;
    EXPECT_EQ(wrong, 0u) << "rank " << r << ": events out of place (duplicates or gaps)";
  }
  EXPECT_TRUE(Healthy(collector.address()));
  std::printf("collector kill -9 x2: %d ranks x %llu events stored exactly once; %llu reconnects, "
              "%llu batches resent, %.1f s streaming+drain, %.1f s total\n",
              kRanks, static_cast<unsigned long long>(kEventsPerRank),
              static_cast<unsigned long long>(reconnects), static_cast<unsigned long long>(resent),
              absl::ToDoubleSeconds(streamed), absl::ToDoubleSeconds(absl::Now() - start));
}

// A write-ahead log damaged in the middle (a bad disk block): RocksDB recovers up to the damage,
// drops the rest and opens without an error. The collector said nothing, and the loss did not
// show as `missing` (the ranks' high-water marks went with it). It now says so on stderr.
TEST(CollectorCrashTest, ADamagedWriteAheadLogIsSaidAtStart) {
  const std::string dir = FreshDir("damaged-wal-db");
  CollectorProcess collector(dir, {"--durability=sync"});
  ASSERT_TRUE(collector.Start(0).ok());
  auto agent = Child::Spawn({kAgentBin, "--events=200000", "--flush_timeout_ms=60000"},
                            AgentEnv(collector.address(), "wal-job", 0, 1), "wal-agent");
  ASSERT_TRUE(agent.ok()) << agent.status();
  ASSERT_EQ((*agent)->Wait(absl::Seconds(60)), 0) << (*agent)->Stderr();
  ASSERT_EQ(collector.Stop(), 0);
  // Every write is still in the log (no flush of 200 k events' memtables): damage its middle.
  std::string wal;  // the largest NNNNNN.log
  if (DIR* d = opendir(dir.c_str())) {
    size_t largest = 0;
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() < 5 || name.substr(name.size() - 4) != ".log") continue;
      const size_t bytes = ReadFileOr(dir + "/" + name).size();
      if (bytes > largest) {
        largest = bytes;
        wal = dir + "/" + name;
      }
    }
    closedir(d);
  }
  ASSERT_FALSE(wal.empty()) << "no write-ahead log in " << dir;
  FILE* f = std::fopen(wal.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::fseek(f, 0, SEEK_END);
  const long size = std::ftell(f);
  ASSERT_GT(size, 64 * 1024);
  std::fseek(f, size / 3, SEEK_SET);
  const std::string junk(4096, '\x5a');
  ASSERT_EQ(std::fwrite(junk.data(), 1, junk.size(), f), junk.size());
  std::fclose(f);

  ASSERT_TRUE(collector.Start().ok());
  EXPECT_NE(collector.child()->Stderr().find("the write-ahead log of " + dir +
                                             " was damaged: RocksDB kept what came before"),
            std::string::npos)
      << collector.child()->Stderr();
  EXPECT_TRUE(Healthy(collector.address()));
}

}  // namespace
}  // namespace memtrace::reliability
