#include "query/cli/commands/ranks.h"

#include <sstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace memtrace::cli {
namespace {

v1::ListRanksResponse OneRank() {
  v1::ListRanksResponse response;
  v1::RankSummary* rank = response.add_ranks();
  rank->set_rank(5);
  v1::RankIdentity* id = rank->mutable_identity();
  id->set_job_id("j");
  id->set_rank(5);
  id->set_local_rank(5);
  id->set_world_size(8);
  id->set_host("sim-node-0");
  id->set_pid(4242);
  id->set_device_index(5);
  id->set_launcher("simulator");
  rank->set_identified_by("env");
  rank->set_events_stored(900);
  rank->set_durable_seq(1000);
  rank->set_complete(true);
  rank->mutable_counters()->set_events_lost(3);
  rank->mutable_counters()->set_spool_bytes(4096);
  rank->set_last_ack_unix_ns(1'700'000'000'000'000'000);
  rank->set_live_bytes(3ull << 30);
  rank->set_current_step(99);
  rank->set_anomalies(2);
  rank->mutable_anomaly_counts()->set_free_unknown(1);
  rank->mutable_anomaly_counts()->set_time_future(1);
  rank->set_ooms(1);
  return response;
}

TEST(RanksTableTest, TextTableShowsIdentityStorageAndHealthInHumanUnits) {
  std::ostringstream out;
  WriteText(RanksTable(OneRank(), /*detailed=*/false), out);
  EXPECT_EQ(
      out.str(),
      "rank  host        local  attempt  identified_by  events  durable_seq  state  complete"
      "  lost   unacked  missing  last_ack                     live  step  anomalies  ooms\n"
      "   5  sim-node-0      5        0  env               900         1000  ended  yes     "
      "     3  4.00 KiB      100  2023-11-14 22:13:20.000  3.00 GiB    99          2     1\n");
}

TEST(RanksTableTest, DetailedFormAddsTheWholeIdentityWithRawValues) {
  std::ostringstream out;
  WriteCsv(RanksTable(OneRank(), /*detailed=*/true), out);
  EXPECT_EQ(out.str(),
            "rank,host,local,attempt,world_size,pid,device,launcher,first_event,last_event,"
            "clock_offset_ns,clock_round_trip_ns,"
            "identified_by,events,durable_seq,state,complete,lost,unacked,missing,last_ack,live,"
            "step,anomalies,ooms,anomaly_kinds\n"
            "5,sim-node-0,5,0,8,4242,5,simulator,0,0,,,env,900,1000,ended,true,3,4096,100,"
            "1700000000000000000,3221225472,99,2,1,free_unknown=1 time_future=1\n");
}

// Running (its agent connected), ended (closed cleanly) or vanished (neither): `complete` alone
// read "no" for a rank still running and for one whose process was killed alike.
TEST(RanksTableTest, StateTellsARunningRankFromAVanishedOne) {
  v1::ListRanksResponse response = OneRank();
  *response.add_ranks() = response.ranks(0);
  *response.add_ranks() = response.ranks(0);
  response.mutable_ranks(1)->set_complete(false);
  response.mutable_ranks(1)->set_connected(true);
  response.mutable_ranks(2)->set_complete(false);
  const Table table = RanksTable(response, /*detailed=*/false);
  size_t state = 0;
  while (table.columns()[state].name != "state") ++state;
  std::vector<std::string> states;
  for (const auto& row : table.rows()) states.push_back(std::get<std::string>(row[state]));
  EXPECT_EQ(states, (std::vector<std::string>{"ended", "running", "vanished"}));
}

TEST(RanksTableTest, DetailedFormHasTheAgentsClockEstimateWhenThereIsOne) {
  v1::ListRanksResponse response = OneRank();
  response.mutable_ranks(0)->mutable_clock()->set_offset_ns(-30'000'123'456);
  response.mutable_ranks(0)->mutable_clock()->set_round_trip_ns(180'000);
  std::ostringstream out;
  WriteJson(RanksTable(response, /*detailed=*/true), out);
  EXPECT_TRUE(absl::StrContains(out.str(),
                                "\"clock_offset_ns\": -30000123456, \"clock_round_trip_ns\": 180000"))
      << out.str();
}

TEST(RanksTableTest, ARankWithoutStepMarkersHasNoStep) {
  v1::ListRanksResponse response = OneRank();
  response.mutable_ranks(0)->set_current_step(0);
  response.mutable_ranks(0)->set_no_step_markers(true);
  std::ostringstream text, csv;
  WriteText(RanksTable(response, /*detailed=*/false), text);
  EXPECT_TRUE(absl::StrContains(text.str(), "3.00 GiB     -          2")) << text.str();
  WriteCsv(RanksTable(response, /*detailed=*/true), csv);
  EXPECT_TRUE(absl::StrContains(csv.str(), ",3221225472,,2,1,")) << csv.str();
}

// A rank whose stream opened and stored nothing yet: its summary was never updated, and its
// step read 0.
TEST(RanksTableTest, ARankWithNoEventYetHasNoStep) {
  v1::ListRanksResponse response = OneRank();
  response.mutable_ranks(0)->set_current_step(0);
  response.mutable_ranks(0)->set_events_stored(0);
  response.mutable_ranks(0)->set_live_bytes(0);
  std::ostringstream csv;
  WriteCsv(RanksTable(response, /*detailed=*/true), csv);
  EXPECT_TRUE(absl::StrContains(csv.str(), ",0,,2,1,")) << csv.str();
}

TEST(RanksCommandTest, RequiresAJob) {
  std::ostringstream out, err;
  CommandIo io{out, err, "127.0.0.1:1"};
  EXPECT_EQ(RanksCommand().run({}, io), kExitUsage);
  EXPECT_EQ(err.str(), "memtrace ranks: --job is required\n");
}

TEST(RanksCommandTest, RefusesTwoJobsInsteadOfUsingTheLast) {
  std::ostringstream out, err;
  CommandIo io{out, err, "127.0.0.1:1"};
  EXPECT_EQ(RanksCommand().run({"--job", "a", "--job", "b"}, io), kExitUsage);
  EXPECT_EQ(err.str(), "memtrace ranks: --job given more than once (it takes one value)\n");
}

TEST(RanksCommandTest, ReportsAnUnreachableCollector) {
  std::ostringstream out, err;
  CommandIo io{out, err, "127.0.0.1:1"};
  EXPECT_EQ(RanksCommand().run({"--job", "j"}, io), kExitError);
  EXPECT_TRUE(absl::StartsWith(err.str(), "memtrace ranks: cannot reach collector at 127.0.0.1:1"));
}

}  // namespace
}  // namespace memtrace::cli
