// `memtrace export --format perfetto` on a simulated job in a real collector: the trace parses
// and holds exactly one live-bytes counter track per rank, exact from the raw events.
#include "query/export/export_command.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "query/export/perfetto_trace.h"
#include "query/export/simulated_job.h"
#include "rapidjson/document.h"
#include "rapidjson/istreamwrapper.h"
#include "tests/util/test_dirs.h"

namespace memtrace::exporter {
namespace {

struct CommandRun {
  int code;
  std::string out;
  std::string err;
};

CommandRun Export(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  cli::CommandIo io{out, err};
  int code = ExportCommand().run(args, io);
  return {code, out.str(), err.str()};
}

rapidjson::Document ParseFile(const std::string& path) {
  std::ifstream in(path);
  rapidjson::IStreamWrapper stream(in);
  rapidjson::Document doc;
  doc.ParseStream(stream);
  EXPECT_FALSE(doc.HasParseError()) << path << ": error at byte " << doc.GetErrorOffset();
  return doc;
}

// Counter samples by (pid, track name).
std::map<std::pair<int64_t, std::string>, std::vector<uint64_t>> Counters(
    const rapidjson::Document& doc) {
  std::map<std::pair<int64_t, std::string>, std::vector<uint64_t>> out;
  for (const auto& e : doc["traceEvents"].GetArray()) {
    if (std::string(e["ph"].GetString()) != "C") continue;
    auto& values = out[{e["pid"].GetInt64(), e["name"].GetString()}];
    const auto& args = e["args"];
    values.push_back(args.HasMember("bytes") ? args["bytes"].GetUint64() : 0);
  }
  return out;
}

class ExportCommandTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // One simulated job for the whole suite: the tests only read it.
    server_ = testing::SimulateJob("export_sim", testing::SmallJob("sim-export", 4, 12));
  }
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override { ASSERT_NE(server_, nullptr); }

  static std::unique_ptr<collector::CollectorServer> server_;
};
std::unique_ptr<collector::CollectorServer> ExportCommandTest::server_;

TEST_F(ExportCommandTest, SimulatedJobRoundTripsToOneLiveBytesTrackPerRank) {
  std::string path = test_util::TmpPath("sim.perfetto.json");
  CommandRun run = Export({"--job", "sim-export", "--format", "perfetto", "-o", path, "--collector",
                           server_->address()});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.err.find("wrote " + path + ": 4 ranks"), std::string::npos) << run.err;
  rapidjson::Document doc = ParseFile(path);
  ASSERT_TRUE(doc.IsObject());
  auto counters = Counters(doc);
  std::map<int64_t, int> live_tracks;
  for (const auto& [key, values] : counters) {
    if (key.second == kLiveBytesTrack) ++live_tracks[key.first];
  }
  EXPECT_EQ(live_tracks, (std::map<int64_t, int>{{0, 1}, {1, 1}, {2, 1}, {3, 1}}));
  std::map<int64_t, int> step_slices;
  std::map<int64_t, std::string> process_names;
  for (const auto& e : doc["traceEvents"].GetArray()) {
    std::string ph = e["ph"].GetString();
    if (ph == "X") ++step_slices[e["pid"].GetInt64()];
    if (ph == "M" && std::string(e["name"].GetString()) == "process_name") {
      process_names[e["pid"].GetInt64()] = e["args"]["name"].GetString();
    }
  }
  for (int64_t pid = 0; pid < 4; ++pid) {
    EXPECT_GE(step_slices[pid], 12) << pid;
    EXPECT_EQ(process_names[pid], "rank " + std::to_string(pid) + " (sim-node-0)");
    // From raw events: far finer than two points a step, and every simulated rank's device
    // samples come through.
    EXPECT_GT((counters[{pid, kLiveBytesTrack}].size()), 24u * 4);
    EXPECT_FALSE((counters[{pid, kDeviceUsedTrack}].empty()));
  }
  // The sim tags its parameters; the top tags get their own tracks.
  EXPECT_FALSE((counters[{0, std::string(kTagTrackPrefix) + "fsdp:params"}].empty()));
}

// Without step markers every rollup is one "step 0": exported by step, the whole run was one
// slice, and nothing said why. Without --axis it is exported by time bucket, as plot and the
// analyses read such a job, and one line says so.
TEST(ExportUnmarkedTest, AJobWithoutStepMarkersIsExportedByTimeBucket) {
  sim::SimulationOptions job = testing::SmallJob("sim-unmarked", 2, 12);
  job.workload.step_markers = false;
  auto server = testing::SimulateJob("export_unmarked", job);
  ASSERT_NE(server, nullptr);
  const auto slices = [](const std::string& path) {
    std::map<int64_t, int> out;
    rapidjson::Document doc = ParseFile(path);
    for (const auto& e : doc["traceEvents"].GetArray()) {
      if (std::string(e["ph"].GetString()) == "X") ++out[e["pid"].GetInt64()];
    }
    return out;
  };
  const std::string by_time = test_util::TmpPath("unmarked.json");
  CommandRun run = Export({"--job", "sim-unmarked", "--format", "perfetto", "-o", by_time,
                           "--collector", server->address()});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.err.find("memtrace export: job 'sim-unmarked' has no step markers: exporting 1s "
                         "time buckets (--axis step for its single step)"),
            std::string::npos)
      << run.err;
  EXPECT_GT(slices(by_time)[0], 1);
  const std::string by_step = test_util::TmpPath("unmarked-step.json");
  run = Export({"--job", "sim-unmarked", "--format", "perfetto", "-o", by_step, "--axis", "step",
                "--collector", server->address()});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(run.err.find("no step markers"), std::string::npos) << run.err;
  EXPECT_EQ(slices(by_step)[0], 1);
}

// A rerun of the job is each rank's next attempt, a process of its own in the trace: the summary
// counts ranks, and the rank-attempts apart ("4 ranks" of a 2-rank job run twice).
TEST(ExportRestartTest, TheSummaryCountsRanksAndTheirAttemptsApart) {
  sim::SimulationOptions job = testing::SmallJob("sim-rerun", 2, 6);
  auto server = testing::SimulateJob("export_rerun", job);
  ASSERT_NE(server, nullptr);
  job.collector_address = server->address();
  job.attempt = 1;  // torchrun's restart (one process here: the same pid would resume attempt 0)
  ASSERT_TRUE(sim::RunSimulation(job, [](const std::string&) {}).ok());
  const std::string path = test_util::TmpPath("rerun.json");
  CommandRun run = Export(
      {"--job", "sim-rerun", "--format", "perfetto", "-o", path, "--collector", server->address()});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.err.find("wrote " + path + ": 2 ranks (4 rank-attempts), "), std::string::npos)
      << run.err;
  std::map<int64_t, int> processes;
  rapidjson::Document doc = ParseFile(path);
  for (const auto& e : doc["traceEvents"].GetArray()) {
    if (std::string(e["ph"].GetString()) == "M") ++processes[e["pid"].GetInt64()];
  }
  EXPECT_EQ(processes.size(), 4u);
  EXPECT_EQ(processes.count(10000001), 1u);  // rank 1's attempt 1: 1 + 10000000 x 1
}

TEST_F(ExportCommandTest, RawLiveBytesAgreeWithTheRollups) {
  std::string raw = test_util::TmpPath("raw.json");
  std::string rollup = test_util::TmpPath("rollup.json");
  ASSERT_EQ(Export({"--job", "sim-export", "--format", "perfetto", "-o", raw, "--collector",
                    server_->address()})
                .code,
            0);
  CommandRun from_rollups = Export({"--job", "sim-export", "--format", "perfetto", "-o", rollup,
                                    "--raw=false", "--collector", server_->address()});
  ASSERT_EQ(from_rollups.code, 0);
  // Phase runs and OOMs need the raw events: the line says they are left out (it said only
  // "from rollups").
  EXPECT_NE(from_rollups.err.find("from rollups (no phase runs or OOMs: those need --raw)"),
            std::string::npos)
      << from_rollups.err;
  auto fine = Counters(ParseFile(raw));
  auto coarse = Counters(ParseFile(rollup));
  for (int64_t pid = 0; pid < 4; ++pid) {
    const auto& f = fine[{pid, kLiveBytesTrack}];
    const auto& c = coarse[{pid, kLiveBytesTrack}];
    ASSERT_FALSE(f.empty());
    ASSERT_FALSE(c.empty());
    EXPECT_EQ(f.back(), c.back()) << "rank " << pid << ": live bytes at the end";
    EXPECT_GT(f.size(), c.size());
    // Every value the rollups show at a step boundary is one the raw series passes through.
    uint64_t fine_max = *std::max_element(f.begin(), f.end());
    EXPECT_GE(fine_max, *std::max_element(c.begin(), c.end()));
  }
}

TEST_F(ExportCommandTest, MaxPointsBoundsTheLiveSeries) {
  std::string path = test_util::TmpPath("bounded.json");
  ASSERT_EQ(Export({"--job", "sim-export", "--format", "perfetto", "-o", path, "--max-points",
                    "300", "--collector", server_->address()})
                .code,
            0);
  auto counters = Counters(ParseFile(path));
  for (int64_t pid = 0; pid < 4; ++pid) {
    EXPECT_LE((counters[{pid, kLiveBytesTrack}].size()), 300u);
  }
  for (int64_t max_points : {3, 10}) {
    ASSERT_EQ(Export({"--job", "sim-export", "--format", "perfetto", "-o", path, "--max-points",
                      absl::StrCat(max_points), "--collector", server_->address()})
                  .code,
              0);
    counters = Counters(ParseFile(path));
    for (int64_t pid = 0; pid < 4; ++pid) {
      EXPECT_LE((counters[{pid, kLiveBytesTrack}].size()), size_t(max_points)) << max_points;
    }
  }
}

// Ranks on hosts whose clocks run a minute apart: the trace puts each step at the same moment on
// every rank (the collector's clock), in the step slices and the raw live-bytes counters alike.
TEST(ExportSkewTest, RanksWhoseClocksDisagreeLineUpInTheTrace) {
  sim::SimulationOptions job = testing::SmallJob("sim-skew", 3, 8);
  job.workload.ranks_per_node = 1;
  job.workload.clock_skew_per_node_ns = 60'000'000'000;
  std::unique_ptr<collector::CollectorServer> server = testing::SimulateJob("export_skew", job);
  ASSERT_NE(server, nullptr);
  const std::string path = test_util::TmpPath("skew.json");
  ASSERT_EQ(Export({"--job", "sim-skew", "--format", "perfetto", "-o", path, "--collector",
                    server->address()})
                .code,
            0);
  rapidjson::Document doc = ParseFile(path);
  std::map<std::string, std::vector<double>> step_starts;  // "step N" -> ts of each rank's
  std::map<int64_t, std::pair<double, double>> live_span;  // pid -> first and last live point
  for (const auto& e : doc["traceEvents"].GetArray()) {
    const std::string ph = e["ph"].GetString();
    if (ph == "X") step_starts[e["name"].GetString()].push_back(e["ts"].GetDouble());
    if (ph == "C" && std::string(e["name"].GetString()) == kLiveBytesTrack) {
      auto [it, inserted] =
          live_span.try_emplace(e["pid"].GetInt64(), e["ts"].GetDouble(), e["ts"].GetDouble());
      it->second.first = std::min(it->second.first, e["ts"].GetDouble());
      it->second.second = std::max(it->second.second, e["ts"].GetDouble());
    }
  }
  ASSERT_EQ(step_starts.size(), 8u);
  for (const auto& [name, starts] : step_starts) {
    ASSERT_EQ(starts.size(), 3u) << name;
    const auto [lo, hi] = std::minmax_element(starts.begin(), starts.end());
    EXPECT_LT(*hi - *lo, 1e6) << name << ": " << *lo << " .. " << *hi << " us";  // not 60 s
  }
  ASSERT_EQ(live_span.size(), 3u);
  for (const auto& [pid, span] : live_span) {
    EXPECT_LT(std::abs(span.first - live_span[0].first), 1e6) << "rank " << pid;
    EXPECT_LT(std::abs(span.second - live_span[0].second), 1e6) << "rank " << pid;
  }
}

TEST_F(ExportCommandTest, UnknownJobAndBadFlagsAreReported) {
  CommandRun unknown = Export({"--job", "nope", "--format", "perfetto", "-o",
                               test_util::TmpPath("x.json"), "--collector", server_->address()});
  EXPECT_EQ(unknown.code, cli::kExitError);
  EXPECT_NE(unknown.err.find("memtrace export:"), std::string::npos);
  EXPECT_EQ(Export({"--job", "j", "--format", "svg", "-o", "x"}).code, cli::kExitUsage);
  EXPECT_EQ(Export({"--job", "j", "--format", "perfetto"}).code, cli::kExitUsage);
  EXPECT_EQ(Export({"--format", "perfetto", "-o", "x"}).code, cli::kExitUsage);
}

// A rank's subprocess (an inference engine it started, stored beside it) is a process of the
// trace, named by its rank, and counted apart in the summary; so is a process that started its
// rank's.
TEST(ExportSubprocessTest, ARanksSubprocessIsAProcessOfTheTrace) {
  sim::SimulationOptions job = testing::SmallJob("sim-engine", 2, 6);
  auto server = testing::SimulateJob("export_engine", job);
  ASSERT_NE(server, nullptr);
  v1::RankIdentity engine;
  engine.set_job_id("sim-engine");
  engine.set_rank(-1);
  engine.set_subprocess_of_rank(0);
  engine.set_host("node-0");
  engine.set_pid(4711);
  absl::StatusOr<collector::OpenedStream> stream = server->store().OpenStream(engine);
  ASSERT_TRUE(stream.ok()) << stream.status();
  DecodedBatch batch;
  Event& e = batch.events.emplace_back();
  e.seq = 1;
  e.ts_ns = int64_t{1700000000} * 1000000000;
  e.kind = EventKind::kAlloc;
  e.address = 0x1000;
  e.bytes = 1 << 30;
  e.memory_kind = kMemoryDevice;
  ASSERT_TRUE(server->store().Append(stream->key, batch).ok());
  ASSERT_TRUE(server->store().CloseStream(stream->key, true, stream->connection).ok());
  // And beside rank 1, the process that started its process (connected after it: a trainer whose
  // engine initialised CUDA first): no subprocess of it.
  v1::RankIdentity trainer = engine;
  trainer.set_subprocess_of_rank(1);
  trainer.set_started_the_rank(true);
  trainer.set_pid(4712);
  absl::StatusOr<collector::OpenedStream> parent = server->store().OpenStream(trainer);
  ASSERT_TRUE(parent.ok()) << parent.status();
  ASSERT_TRUE(server->store().Append(parent->key, batch).ok());
  ASSERT_TRUE(server->store().CloseStream(parent->key, true, parent->connection).ok());

  const std::string path = test_util::TmpPath("engine.json");
  CommandRun run = Export({"--job", "sim-engine", "--format", "perfetto", "-o", path, "--collector",
                           server->address()});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.err.find("wrote " + path +
                         ": 2 ranks, 1 subprocess(es) of them and the 1 process(es) that started "
                         "them, "),
            std::string::npos)
      << run.err;
  std::set<std::string> names;
  rapidjson::Document doc = ParseFile(path);
  for (const auto& e : doc["traceEvents"].GetArray()) {
    if (std::string(e["ph"].GetString()) == "M" &&
        std::string(e["name"].GetString()) == "process_name") {
      names.insert(e["args"]["name"].GetString());
    }
  }
  EXPECT_EQ(names.count("rank 0 subprocess pid 4711 (node-0)"), 1u) << run.err;
  EXPECT_EQ(names.count("rank 1 parent pid 4712 (node-0)"), 1u) << run.err;
  EXPECT_EQ(names.size(), 4u);
}

}  // namespace
}  // namespace memtrace::exporter
