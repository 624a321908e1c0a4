// `memtrace export --format perfetto` on a simulated job in a real collector: the trace parses
// and holds exactly one live-bytes counter track per rank, exact from the raw events.
#include "query/export/export_command.h"

#include <fstream>
#include <map>
#include <sstream>

#include "gtest/gtest.h"
#include "query/export/perfetto_trace.h"
#include "query/export/simulated_job.h"
#include "rapidjson/document.h"
#include "rapidjson/istreamwrapper.h"

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

std::string TempPath(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
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
  std::string path = TempPath("sim.perfetto.json");
  CommandRun run = Export({"--job", "sim-export", "--format", "perfetto", "-o", path,
                           "--collector", server_->address()});
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

TEST_F(ExportCommandTest, RawLiveBytesAgreeWithTheRollups) {
  std::string raw = TempPath("raw.json");
  std::string rollup = TempPath("rollup.json");
  ASSERT_EQ(Export({"--job", "sim-export", "--format", "perfetto", "-o", raw, "--collector",
                    server_->address()})
                .code,
            0);
  ASSERT_EQ(Export({"--job", "sim-export", "--format", "perfetto", "-o", rollup, "--raw=false",
                    "--collector", server_->address()})
                .code,
            0);
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
  std::string path = TempPath("bounded.json");
  ASSERT_EQ(Export({"--job", "sim-export", "--format", "perfetto", "-o", path, "--max-points",
                    "300", "--collector", server_->address()})
                .code,
            0);
  auto counters = Counters(ParseFile(path));
  for (int64_t pid = 0; pid < 4; ++pid) {
    EXPECT_LE((counters[{pid, kLiveBytesTrack}].size()), 300u + 3u);
  }
}

TEST_F(ExportCommandTest, UnknownJobAndBadFlagsAreReported) {
  CommandRun unknown = Export({"--job", "nope", "--format", "perfetto", "-o",
                               TempPath("x.json"), "--collector", server_->address()});
  EXPECT_EQ(unknown.code, cli::kExitError);
  EXPECT_NE(unknown.err.find("memtrace export:"), std::string::npos);
  EXPECT_EQ(Export({"--job", "j", "--format", "svg", "-o", "x"}).code, cli::kExitUsage);
  EXPECT_EQ(Export({"--job", "j", "--format", "perfetto"}).code, cli::kExitUsage);
  EXPECT_EQ(Export({"--format", "perfetto", "-o", "x"}).code, cli::kExitUsage);
}

}  // namespace
}  // namespace memtrace::exporter
