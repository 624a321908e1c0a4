#include "query/export/perfetto_trace.h"

#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "gtest/gtest.h"
#include "rapidjson/document.h"

namespace memtrace::exporter {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000'000'000;
constexpr uint64_t kGiB = 1ull << 30;

v1::GetRollupsResponse Rollups(int ranks, int steps) {
  v1::GetRollupsResponse response;
  for (int r = 0; r < ranks; ++r) {
    v1::RankRollups* rank = response.add_ranks();
    rank->set_rank(r);
    rank->mutable_identity()->set_host("node-" + std::to_string(r / 2));
    v1::StringEntry* tag = rank->add_strings();
    tag->set_id(1);
    tag->set_kind(v1::STRING_KIND_TAG);
    tag->set_value("fsdp:params");
    v1::StringEntry* leak = rank->add_strings();
    leak->set_id(2);
    leak->set_kind(v1::STRING_KIND_TAG);
    leak->set_value(r == 1 ? "leak:cache" : "small");
    for (int s = 0; s < steps; ++s) {
      v1::StepRollup* step = rank->add_steps();
      step->set_step(s);
      step->set_start_ns(kT0 + s * 1'000'000'000ll + r * 1000);
      step->set_end_ns(step->start_ns() + 900'000'000);
      step->set_start_bytes(10 * kGiB);
      step->set_floor_bytes(10 * kGiB);
      step->set_peak_bytes(20 * kGiB);
      // Rank 0's rows are of an old store, which kept no peak moment.
      if (r == 1) step->set_peak_ns(step->start_ns() + 500'000'000);
      step->set_end_bytes(10 * kGiB + (r == 1 ? s * kGiB : 0));
      step->set_device_used_max(22 * kGiB);
      v1::GroupBytes* g = step->add_by_tag();
      g->set_id(1);
      g->set_live_bytes(8 * kGiB);
      v1::GroupBytes* g2 = step->add_by_tag();
      g2->set_id(2);
      g2->set_live_bytes(r == 1 ? s * kGiB : 1024);
    }
  }
  return response;
}

rapidjson::Document Parse(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.c_str(), json.size());
  EXPECT_FALSE(doc.HasParseError()) << "offset " << doc.GetErrorOffset();
  return doc;
}

std::string Export(const v1::GetRollupsResponse& rollups, const FineSeriesMap& fine = {},
                   PerfettoOptions options = {}) {
  std::ostringstream out;
  absl::Status s = WritePerfettoTrace("job-1", rollups, fine, options, out);
  EXPECT_TRUE(s.ok()) << s;
  return out.str();
}

// (pid, track name) -> samples
std::map<std::pair<int64_t, std::string>, int> CounterTracks(const rapidjson::Document& doc) {
  std::map<std::pair<int64_t, std::string>, int> tracks;
  for (const auto& e : doc["traceEvents"].GetArray()) {
    if (std::string(e["ph"].GetString()) == "C") {
      ++tracks[{e["pid"].GetInt64(), e["name"].GetString()}];
    }
  }
  return tracks;
}

// pid -> process name, from the trace's process_name metadata.
std::map<int64_t, std::string> ProcessNames(const rapidjson::Document& doc) {
  std::map<int64_t, std::string> names;
  for (const auto& e : doc["traceEvents"].GetArray()) {
    if (std::string(e["ph"].GetString()) == "M" &&
        std::string(e["name"].GetString()) == "process_name") {
      names[e["pid"].GetInt64()] = e["args"]["name"].GetString();
    }
  }
  return names;
}

TEST(PerfettoTraceTest, OneProcessPerRankNamedWithItsHost) {
  v1::GetRollupsResponse rollups = Rollups(4, 4);
  // The last stream is rank 1's subprocess (an inference engine it started), named by its rank
  // and pid: its own number is the store's.
  v1::RankRollups* engine = rollups.mutable_ranks(3);
  engine->set_rank(1000000);
  engine->mutable_identity()->set_subprocess_of_rank(1);
  engine->mutable_identity()->set_pid(4711);
  rapidjson::Document doc = Parse(Export(rollups));
  const std::map<int64_t, std::string> names = ProcessNames(doc);
  EXPECT_EQ(names, (std::map<int64_t, std::string>{
                       {0, "rank 0 (node-0)"},
                       {1, "rank 1 (node-0)"},
                       {2, "rank 2 (node-1)"},
                       {TracePid(1000000, 0), "rank 1 subprocess pid 4711 (node-1)"}}));
  EXPECT_STREQ(doc["otherData"]["job"].GetString(), "job-1");
  EXPECT_EQ(doc["otherData"]["time_origin_ns"].GetInt64(), kT0);
}

TEST(PerfettoTraceTest, ExactlyOneLiveBytesTrackPerRankFromRollups) {
  rapidjson::Document doc = Parse(Export(Rollups(3, 4)));
  auto tracks = CounterTracks(doc);
  for (int64_t pid = 0; pid < 3; ++pid) {
    EXPECT_EQ(tracks.count({pid, kLiveBytesTrack}), 1u);
    EXPECT_EQ((tracks[{pid, kLiveBytesTrack}]), 8);  // start and end of 4 steps
    EXPECT_EQ((tracks[{pid, kStepFloorPeakTrack}]), 4);
    EXPECT_EQ((tracks[{pid, kDeviceUsedTrack}]), 4);
  }
  int live_tracks = 0;
  for (const auto& [key, n] : tracks) live_tracks += key.second == kLiveBytesTrack;
  EXPECT_EQ(live_tracks, 3);
}

TEST(PerfettoTraceTest, StepSlicesCarryTheirRollupInMicroseconds) {
  rapidjson::Document doc = Parse(Export(Rollups(2, 3)));
  int slices = 0;
  for (const auto& e : doc["traceEvents"].GetArray()) {
    if (std::string(e["ph"].GetString()) != "X") continue;
    ++slices;
    if (e["pid"].GetInt64() == 1 && std::string(e["name"].GetString()) == "step 2") {
      EXPECT_DOUBLE_EQ(e["ts"].GetDouble(), 2'000'000.0 + 1.0);  // 2 s and 1000 ns after origin
      EXPECT_DOUBLE_EQ(e["dur"].GetDouble(), 900'000.0);
      EXPECT_EQ(e["args"]["end_bytes"].GetUint64(), 12 * kGiB);
      EXPECT_EQ(e["args"]["peak_bytes"].GetUint64(), 20 * kGiB);
      EXPECT_DOUBLE_EQ(e["args"]["peak_ts_us"].GetDouble(), 2'500'000.0 + 1.0);
    }
    if (e["pid"].GetInt64() == 0) EXPECT_FALSE(e["args"].HasMember("peak_ts_us"));
  }
  EXPECT_EQ(slices, 6);
}

TEST(PerfettoTraceTest, TopTagsGetTracksOnTheRanksThatUseThem) {
  PerfettoOptions options;
  options.top_tags = 2;
  rapidjson::Document doc = Parse(Export(Rollups(3, 4), {}, options));
  auto tracks = CounterTracks(doc);
  std::set<std::string> tag_tracks;
  for (const auto& [key, n] : tracks) {
    if (key.second.rfind(kTagTrackPrefix, 0) == 0) tag_tracks.insert(key.second);
  }
  // fsdp:params (8 GiB) and leak:cache (3 GiB at the end); "small" is not among the top 2.
  EXPECT_EQ(tag_tracks, (std::set<std::string>{"tag: fsdp:params", "tag: leak:cache"}));
  EXPECT_EQ(tracks.count({1, "tag: leak:cache"}), 1u);
  EXPECT_EQ(tracks.count({0, "tag: leak:cache"}), 0u);
}

TEST(PerfettoTraceTest, RawSeriesReplaceTheRollupApproximation) {
  FineSeriesMap fine;
  fine[{0, 0}].live = {{kT0 + 10, 100}, {kT0 + 20, 300}, {kT0 + 30, 200}};
  fine[{0, 0}].device_used = {{kT0 + 15, 1000}};
  rapidjson::Document doc = Parse(Export(Rollups(2, 2), fine));
  std::vector<uint64_t> rank0_live;
  for (const auto& e : doc["traceEvents"].GetArray()) {
    if (std::string(e["ph"].GetString()) == "C" && e["pid"].GetInt64() == 0 &&
        std::string(e["name"].GetString()) == kLiveBytesTrack) {
      rank0_live.push_back(e["args"]["bytes"].GetUint64());
    }
  }
  EXPECT_EQ(rank0_live, (std::vector<uint64_t>{100, 300, 200}));
  auto tracks = CounterTracks(doc);
  EXPECT_EQ((tracks[{0, kDeviceUsedTrack}]), 1);
  EXPECT_EQ((tracks[{1, kLiveBytesTrack}]), 4);  // rank 1 has no raw series
}

TEST(PerfettoTraceTest, PhaseRunsAreSlicesAndOomsInstantsWithTheirNames) {
  v1::GetRollupsResponse rollups = Rollups(2, 2);
  for (auto [id, kind, value] : std::vector<std::tuple<uint32_t, v1::StringKind, std::string>>{
           {7, v1::STRING_KIND_PHASE, "rollout"}, {9, v1::STRING_KIND_SOURCE, "libc10_cuda.so"}}) {
    v1::StringEntry* e = rollups.mutable_ranks(1)->add_strings();
    e->set_id(id);
    e->set_kind(kind);
    e->set_value(value);
  }
  FineSeriesMap fine;
  fine[{1, 0}].phases = {{7, kT0 + 1000, kT0 + 5000, false}, {7, kT0 + 8000, kT0 + 9000, true}};
  fine[{1, 0}].ooms = {{kT0 + 8500, 5 * kGiB, 2, 9}};
  rapidjson::Document doc = Parse(Export(rollups, fine));
  int slices = 0, ooms = 0, open = 0;
  std::map<uint64_t, std::vector<std::string>> ids;
  for (const auto& e : doc["traceEvents"].GetArray()) {
    const std::string ph = e["ph"].GetString();
    if ((ph == "b" || ph == "e") && std::string(e["cat"].GetString()) == "memtrace.phase") {
      // Async pairs: runs of phases that do not nest get lanes of their own.
      if (ph == "b") ++slices;
      ids[e["id"].GetUint64()].push_back(ph);
      EXPECT_EQ(e["pid"].GetInt64(), 1);
      EXPECT_EQ(std::string(e["name"].GetString()), "rollout");
      if (e.HasMember("args") && e["args"]["open"].GetBool()) ++open;
    }
    if (ph == "i") {
      ++ooms;
      EXPECT_EQ(std::string(e["name"].GetString()), "OOM");
      EXPECT_EQ(e["pid"].GetInt64(), 1);
      EXPECT_EQ(e["args"]["requested_bytes"].GetUint64(), 5 * kGiB);
      EXPECT_EQ(std::string(e["args"]["tag"].GetString()), "leak:cache");
      EXPECT_EQ(std::string(e["args"]["source"].GetString()), "libc10_cuda.so");
    }
  }
  EXPECT_EQ(slices, 2);
  EXPECT_EQ(open, 1);
  ASSERT_EQ(ids.size(), 2u);
  for (const auto& [id, phs] : ids) EXPECT_EQ(phs, (std::vector<std::string>{"b", "e"})) << id;
  EXPECT_EQ(ooms, 1);
}

TEST(PerfettoTraceTest, RestartedRanksAreSeparateProcesses) {
  v1::GetRollupsResponse rollups = Rollups(1, 1);
  *rollups.add_ranks() = rollups.ranks(0);
  rollups.mutable_ranks(1)->set_attempt(1);
  rapidjson::Document doc = Parse(Export(rollups));
  auto tracks = CounterTracks(doc);
  EXPECT_EQ(tracks.count({0, kLiveBytesTrack}), 1u);
  EXPECT_EQ(tracks.count({TracePid(0, 1), kLiveBytesTrack}), 1u);
}

// A subprocess (numbered from 1000000) and a launcher rank's eleventh attempt are two
// processes: at 100000 per attempt, rank 0's attempt 10 drew into the engine's track.
TEST(PerfettoTraceTest, EveryStreamOfAJobHasAProcessOfItsOwn) {
  std::set<int64_t> pids;
  size_t streams = 0;
  for (uint32_t attempt : {0u, 1u, 9u, 10u, 11u, 99u, 100u}) {
    for (uint32_t rank : {0u, 1u, 7u, 99'999u, 100'000u, 999'999u, 1'000'000u, 1'000'001u,
                          1'100'000u, 9'999'999u}) {
      pids.insert(TracePid(rank, attempt));
      ++streams;
    }
  }
  EXPECT_EQ(pids.size(), streams);
  EXPECT_NE(TracePid(1'000'000, 0), TracePid(0, 10));
}

// Perfetto reads a pid as 32 bits: rank 0's attempt 430 (4300000000) would be read as pid 0 and
// drawn into one process with every other such stream. A job past attempt 429 numbers its
// processes 1, 2, ... by attempt and rank; one below keeps rank + 10000000 x attempt.
TEST(PerfettoTraceTest, PidsStayWithin32BitsPastAttempt429) {
  v1::GetRollupsResponse rollups = Rollups(2, 2);
  EXPECT_EQ(TracePids(rollups), (std::vector<int64_t>{0, 1}));
  *rollups.add_ranks() = rollups.ranks(1);
  rollups.mutable_ranks(2)->set_attempt(429);
  EXPECT_EQ(TracePids(rollups), (std::vector<int64_t>{0, 1, 4'290'000'001}));
  // Rank 0's attempt 430, listed first: numbered by attempt and rank, not by where it is.
  *rollups.add_ranks() = rollups.ranks(0);
  rollups.mutable_ranks(3)->set_attempt(430);
  for (int i = 3; i > 0; --i) rollups.mutable_ranks()->SwapElements(i, i - 1);
  EXPECT_GT(TracePid(0, 430), int64_t{UINT32_MAX});
  EXPECT_EQ(TracePids(rollups), (std::vector<int64_t>{4, 1, 2, 3}));

  rapidjson::Document doc = Parse(Export(rollups));
  const std::map<int64_t, std::string> names = ProcessNames(doc);
  EXPECT_EQ(names, (std::map<int64_t, std::string>{{1, "rank 0 (node-0)"},
                                                   {2, "rank 1 (node-0)"},
                                                   {3, "rank 1 attempt 429 (node-0)"},
                                                   {4, "rank 0 attempt 430 (node-0)"}}));
  for (const auto& [track, samples] : CounterTracks(doc)) {
    EXPECT_GE(track.first, 1);
    EXPECT_LE(track.first, 4);
  }
}

TEST(PerfettoTraceTest, AnEmptyJobIsAValidEmptyTrace) {
  rapidjson::Document doc = Parse(Export(v1::GetRollupsResponse()));
  EXPECT_TRUE(doc["traceEvents"].GetArray().Empty());
}

}  // namespace
}  // namespace memtrace::exporter
