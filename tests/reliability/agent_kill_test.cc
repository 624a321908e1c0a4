// kill -9 of one agent process in the middle of a job: that rank loses at most its unflushed
// tail (what was recorded but not yet acknowledged), is reported incomplete, and keeps a
// gap-free prefix; the other ranks are complete and intact.
#include <signal.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/reliability/harness.h"

namespace memtrace::reliability {
namespace {

constexpr int kRanks = 4;
constexpr int kVictim = 2;
constexpr uint64_t kEvents = 400'000;
constexpr uint64_t kRate = 80'000;
constexpr char kJob[] = "agent-kill-job";

TEST(AgentKillTest, KilledRankLosesOnlyItsUnflushedTailAndOthersAreIntact) {
  CollectorProcess collector(FreshDir("agent-kill-db"), {});
  ASSERT_TRUE(collector.Start(0).ok());
  std::vector<std::unique_ptr<Child>> agents;
  for (int r = 0; r < kRanks; ++r) {
    auto agent = Child::Spawn({kAgentBin, absl::StrCat("--events=", kEvents),
                               absl::StrCat("--rate=", kRate), "--progress_ms=50"},
                              AgentEnv(collector.address(), kJob, r, kRanks),
                              absl::StrCat("kill-agent", r));
    ASSERT_TRUE(agent.ok()) << agent.status();
    agents.push_back(*std::move(agent));
  }
  // Kill the victim once it has 100 k events acknowledged.
  std::map<std::string, std::string> progress;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    progress = LastLine(agents[kVictim]->Stdout(), "PROGRESS");
    if (!progress.empty() && U64(progress, "durable") >= 100'000) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_GE(U64(progress, "durable"), 100'000u);
  agents[kVictim]->Signal(SIGKILL);
  EXPECT_EQ(agents[kVictim]->Wait(absl::Seconds(10)), 128 + SIGKILL);
  // The last progress line written before the kill (read again: more may have come).
  progress = LastLine(agents[kVictim]->Stdout(), "PROGRESS");
  const uint64_t acked_before = U64(progress, "durable");
  const uint64_t recorded_before = U64(progress, "recorded");

  for (int r = 0; r < kRanks; ++r) {
    if (r == kVictim) continue;
    EXPECT_EQ(agents[r]->Wait(absl::Seconds(60)), 0) << agents[r]->Stderr();
  }
  absl::StatusOr<v1::ListRanksResponse> ranks = ListRanks(collector.address(), kJob);
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  ASSERT_EQ(ranks->ranks_size(), kRanks);
  uint64_t victim_stored = 0;
  for (const v1::RankSummary& r : ranks->ranks()) {
    absl::StatusOr<std::vector<Event>> events = ReadAllEvents(collector.address(), kJob, r.rank());
    ASSERT_TRUE(events.ok()) << events.status();
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < events->size(); ++i) wrong += (*events)[i].seq != i + 1;
    EXPECT_EQ(wrong, 0u) << "rank " << r.rank() << " has gaps or duplicates";
    EXPECT_EQ(r.events_stored(), events->size());
    EXPECT_EQ(r.durable_seq(), events->size());
    if (r.rank() == kVictim) {
      victim_stored = r.events_stored();
      EXPECT_FALSE(r.complete()) << "a killed rank must be reported incomplete";
      EXPECT_GE(victim_stored, acked_before) << "acknowledged events were lost";
      EXPECT_LT(victim_stored, kEvents);
    } else {
      EXPECT_TRUE(r.complete()) << r.rank();
      EXPECT_EQ(r.events_stored(), kEvents) << r.rank();
    }
  }
  EXPECT_TRUE(Healthy(collector.address()));
  // The tail: events recorded (by the last progress line, <= 50 ms before the kill) beyond
  // those stored. Bounded by what the batcher holds (max_batch_delay 100 ms) plus the batch in
  // flight.
  const int64_t tail = static_cast<int64_t>(recorded_before) - static_cast<int64_t>(victim_stored);
  EXPECT_LT(tail, static_cast<int64_t>(kRate / 2)) << "more than 0.5 s of events lost";
  std::printf("agent kill -9 at %llu acked / %llu recorded: %llu stored (prefix 1..%llu, "
              "incomplete), unflushed tail ~%lld events (~%.0f ms at %llu ev/s); %d other ranks "
              "complete with %llu each\n",
              static_cast<unsigned long long>(acked_before),
              static_cast<unsigned long long>(recorded_before),
              static_cast<unsigned long long>(victim_stored),
              static_cast<unsigned long long>(victim_stored), static_cast<long long>(tail),
              1000.0 * static_cast<double>(tail) / kRate, static_cast<unsigned long long>(kRate),
              kRanks - 1, static_cast<unsigned long long>(kEvents));
}

}  // namespace
}  // namespace memtrace::reliability
