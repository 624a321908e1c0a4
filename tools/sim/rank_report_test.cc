#include "tools/sim/rank_report.h"

#include "gtest/gtest.h"

namespace memtrace::sim {
namespace {

TEST(RankReportTest, SaysEventsDurableAndLost) {
  RankOutcome o;
  o.rank = 3;
  o.stats.last_seq = 20000;
  o.stats.durable_seq = 20000;
  RankReport r = ReportRank(WorkloadOptions(), o);
  EXPECT_EQ(r.durable, 20000u);
  EXPECT_EQ(r.line, "rank 3: 20000 events, 20000 durable, 0 lost");
}

// An async collector killed and its write-ahead log cut: it acknowledged 19526 events, then
// answered the reconnect with a lower durable mark. Those are not durable.
TEST(RankReportTest, EventsTheCollectorLostAfterAcknowledgingThemAreNotDurable) {
  RankOutcome o;
  o.rank = 0;
  o.stats.last_seq = 19526;
  o.stats.durable_seq = 19526;
  o.stats.events_lost_collector = 5877;
  o.stats.events_lost = 5877;
  o.status = absl::DataLossError("flush: 5877 events lost");
  RankReport r = ReportRank(WorkloadOptions(), o);
  EXPECT_EQ(r.durable, 13649u);
  EXPECT_EQ(r.line,
            "rank 0: 19526 events, 13649 durable, 5877 lost (5877 of them acknowledged, then "
            "lost by the collector) -- FAILED: flush: 5877 events lost");
}

TEST(RankReportTest, SaysWhetherAnOutOfMemoryWasPlanted) {
  WorkloadOptions w;
  w.oom_rank = 2;
  RankOutcome o;
  o.rank = 2;
  o.oom_step = 40;
  EXPECT_NE(ReportRank(w, o).line.find("ran out of memory in step 40 (planted)"),
            std::string::npos);
  o.rank = 1;
  EXPECT_NE(ReportRank(w, o).line.find("(NOT planted"), std::string::npos);
}

}  // namespace
}  // namespace memtrace::sim
