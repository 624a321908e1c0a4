// Imports the real PyTorch profiler traces in ../shared/data/kineto (see the README there) and
// checks what was ingested against the README's independent counts (taken with Python's json
// module), and that live bytes replayed from the imported events equal the profiler's own
// "Total Allocated" after every CUDA memory event.
//
// The data is found through shared_data.h. When it is absent the tests skip, unless $CI is set
// (bazel test --test_env=CI=true), where they fail.
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "query/importers/kineto_import.h"
#include "query/importers/kineto_parser.h"
#include "query/importers/recording_sink.h"
#include "query/importers/shared_data.h"
#include "tests/util/test_dirs.h"

namespace memtrace::importers {
namespace {

struct ExpectedTrace {
  const char* file;
  uint64_t trace_events;
  uint64_t memory_events;
  uint64_t allocs;
  uint64_t frees;
  uint64_t step_ranges;
  uint64_t cpu_step_markers;  // distinct ProfilerStep numbers on the CPU timeline
  int32_t rank;               // -1: no distributedInfo
  int32_t world_size;
  // Counted with Python's json module by the same rule (innermost "nn.Module: " python_function
  // range on the allocating thread, ends inclusive): ranges, allocations inside one, distinct
  // innermost names. None of the HTA trace's allocations falls in a user annotation.
  uint64_t module_ranges;
  uint64_t tagged_allocs;
  uint64_t tags;
};

// From ../shared/data/README.md (the step markers: one per distinct ProfilerStep#N; the
// tracelens files draw their one step on the CPU and again on the GPU timeline).
constexpr ExpectedTrace kTraces[] = {
    {"hta_rank1_of_2.json.gz", 216092, 28010, 14005, 14005, 5, 5, 1, 2, 0, 0, 0},
    {"tracelens_h100_qwen1.5-0.5b.json.gz", 18221, 2450, 1225, 1225, 2, 1, -1, 0, 316, 1225, 316},
    {"tracelens_h100_falconsai_nsfw.json.gz", 5138, 620, 310, 310, 2, 1, -1, 0, 214, 310, 149},
};

class TestRankSink : public RankImportSink {
 public:
  explicit TestRankSink(RecordingSink* sink) : sink_(sink) {}
  void Record(const Event& event) override { sink_->Record(event); }
  uint32_t Intern(StringKind kind, std::string_view value) override {
    return sink_->Intern(kind, value);
  }
  absl::Status Checkpoint() override { return absl::OkStatus(); }
  absl::Status Finish() override { return absl::OkStatus(); }

 private:
  RecordingSink* sink_;
};

class KinetoRealTracesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = FindSharedDataDir();
    if (!dir.ok()) {
      if (SharedDataRequired()) FAIL() << "CI is set but " << dir.status();
      GTEST_SKIP() << dir.status();
    }
    dir_ = *dir + "/kineto";
  }
  std::string Path(const char* file) const { return dir_ + "/" + file; }

  std::string dir_;
};

TEST_F(KinetoRealTracesTest, ImportsEveryMemoryEventTheReadmeCounts) {
  for (const ExpectedTrace& expected : kTraces) {
    SCOPED_TRACE(expected.file);
    RecordingSink recorded;
    auto summaries = ImportKinetoFiles(
        {Path(expected.file)}, {},
        [&](const ImportedRank&) -> absl::StatusOr<std::unique_ptr<RankImportSink>> {
          return std::make_unique<TestRankSink>(&recorded);
        });
    ASSERT_TRUE(summaries.ok()) << summaries.status();
    const KinetoFileSummary& s = summaries->at(0);
    std::printf("%s\n", FormatSummary(s).c_str());
    EXPECT_EQ(s.parse.trace_events, expected.trace_events);
    EXPECT_EQ(s.parse.memory_events, expected.memory_events);
    EXPECT_EQ(s.parse.memory_skipped, 0u);
    EXPECT_EQ(s.parse.step_ranges, expected.step_ranges);
    EXPECT_EQ(s.events.memory_events, expected.memory_events);
    EXPECT_EQ(s.events.allocs, expected.allocs);
    EXPECT_EQ(s.events.frees, expected.frees);
    EXPECT_EQ(s.events.steps, expected.cpu_step_markers);
    EXPECT_EQ(s.events.total_allocated_mismatches, 0u);
    EXPECT_EQ(s.events.unmatched_frees, 0u);
    EXPECT_EQ(s.parse.module_ranges, expected.module_ranges);
    EXPECT_EQ(s.events.tagged_allocs, expected.tagged_allocs);
    EXPECT_EQ(s.events.tags, expected.tags);

    // Counted again from what reached the sink, independently of the importer's stats.
    uint64_t allocs = 0, frees = 0, steps = 0, seeds = 0;
    uint32_t seed_tag = 0;
    for (const StringDef& d : recorded.strings()) {
      if (d.value == kBaselineTag) seed_tag = d.id;
    }
    int64_t last_ts = INT64_MIN;
    // Memory events before the first step marker's instant: they would make a step 0 of their
    // own (seeds at its very instant start that step).
    int64_t first_step_ts = INT64_MAX;
    for (const Event& e : recorded.events()) {
      if (e.kind == EventKind::kStep) {
        first_step_ts = e.ts_ns;
        break;
      }
    }
    uint64_t before_first_step = 0;
    for (const Event& e : recorded.events()) {
      EXPECT_GE(e.ts_ns, last_ts) << "events out of time order at seq " << e.seq;
      last_ts = e.ts_ns;
      if (e.ts_ns < first_step_ts && (e.kind == EventKind::kAlloc || e.kind == EventKind::kFree)) {
        ++before_first_step;
      }
      if (e.kind == EventKind::kAlloc && seed_tag != 0 && e.tag_id == seed_tag) {
        ++seeds;
      } else if (e.kind == EventKind::kAlloc) {
        ++allocs;
      } else if (e.kind == EventKind::kFree) {
        ++frees;
      } else if (e.kind == EventKind::kStep) {
        ++steps;
      }
    }
    EXPECT_EQ(allocs, expected.allocs);
    EXPECT_EQ(frees, expected.frees);
    EXPECT_EQ(allocs + frees, expected.memory_events);
    EXPECT_EQ(steps, expected.cpu_step_markers);
    EXPECT_EQ(seeds, s.events.seeded_allocations);
    EXPECT_EQ(before_first_step, 0u);
    if (expected.rank >= 0) {
      EXPECT_EQ(s.rank.rank, expected.rank);
      EXPECT_EQ(s.rank.world_size, expected.world_size);
      EXPECT_EQ(s.rank.rank_source, "distributedInfo");
    } else {
      EXPECT_EQ(s.rank.rank_source, "file order");
      EXPECT_EQ(s.rank.rank, 0);
    }
  }
}

TEST_F(KinetoRealTracesTest, LiveBytesReplayedFromTheEventsEqualTotalAllocated) {
  for (const ExpectedTrace& expected : kTraces) {
    SCOPED_TRACE(expected.file);
    auto trace = ParseKinetoFile(Path(expected.file));
    ASSERT_TRUE(trace.ok()) << trace.status();
    RecordingSink recorded;
    auto stats = RecordKinetoTrace(&*trace, {}, recorded);  // sorts trace->memory
    ASSERT_TRUE(stats.ok()) << stats.status();
    ASSERT_GT(stats->seeded_bytes, 0u);  // these traces all start with memory in use
    // Replay device memory the way the collector does: host kinds are not live bytes.
    std::map<uint64_t, uint64_t> live;
    uint64_t live_bytes = 0;
    size_t next_record = 0;
    uint64_t compared = 0;
    for (const Event& e : recorded.events()) {
      if ((e.kind != EventKind::kAlloc && e.kind != EventKind::kFree) ||
          e.memory_kind != kMemoryDevice) {
        continue;
      }
      if (e.kind == EventKind::kAlloc) {
        ASSERT_TRUE(live.emplace(e.address, e.bytes).second) << "alloc over live " << e.address;
        live_bytes += e.bytes;
      } else {
        auto it = live.find(e.address);
        ASSERT_NE(it, live.end()) << "free of an address never allocated: " << e.address;
        EXPECT_EQ(it->second, e.bytes);
        live_bytes -= it->second;
        live.erase(it);
      }
      if (e.tag_id != 0 && recorded.Name(e.tag_id) == kBaselineTag) continue;  // a seed
      while (next_record < trace->memory.size() &&
             trace->memory[next_record].device_type != kKinetoDeviceCuda) {
        ++next_record;
      }
      ASSERT_LT(next_record, trace->memory.size());
      ASSERT_EQ(static_cast<int64_t>(live_bytes), trace->memory[next_record].total_allocated)
          << "after CUDA memory event " << next_record;
      ++next_record;
      ++compared;
    }
    EXPECT_GT(compared, 0u);
    EXPECT_EQ(static_cast<int64_t>(live_bytes), stats->final_total_allocated);
  }
}

TEST_F(KinetoRealTracesTest, SeveralFilesGetDistinctRanks) {
  // The tracelens traces have no distributedInfo and no rank in their names: they take the
  // ranks no file states, in file order; the HTA trace says it is rank 1 of 2. Found by a user
  // with the HTA trace last: the second tracelens trace took rank 1 by its position, and the
  // HTA trace was then refused, with two files stored.
  for (const std::vector<int>& order : {std::vector<int>{1, 0, 2}, std::vector<int>{1, 2, 0}}) {
    std::vector<std::string> paths;
    for (int i : order) paths.push_back(Path(kTraces[i].file));
    std::map<int32_t, std::unique_ptr<RecordingSink>> sinks;
    auto summaries = ImportKinetoFiles(
        paths, {}, [&](const ImportedRank& r) -> absl::StatusOr<std::unique_ptr<RankImportSink>> {
          auto& sink = sinks[r.rank];
          sink = std::make_unique<RecordingSink>();
          return std::make_unique<TestRankSink>(sink.get());
        });
    ASSERT_TRUE(summaries.ok()) << summaries.status();
    ASSERT_EQ(summaries->size(), 3u);
    std::map<std::string, int32_t> rank_of;
    for (const KinetoFileSummary& s : *summaries) {
      rank_of[s.rank.path] = s.rank.rank;
      EXPECT_EQ(s.rank.world_size, 3) << s.rank.path << ": one world size for the import";
    }
    EXPECT_EQ(rank_of[Path(kTraces[0].file)], 1);
    EXPECT_EQ(rank_of[paths[0]], 0);
    EXPECT_EQ(rank_of[order[1] == 0 ? paths[2] : paths[1]], 2);
    EXPECT_EQ(sinks.size(), 3u);
  }
}

TEST_F(KinetoRealTracesTest, TruncatedRealTraceNamesFileAndOffset) {
  // The first 100 KiB of a real .gz: decompression stops early and the error says where.
  std::string src = Path(kTraces[2].file);
  std::string cut = test_util::TmpPath("truncated.json.gz");
  std::FILE* in = std::fopen(src.c_str(), "rb");
  ASSERT_NE(in, nullptr);
  std::string head(100 * 1024, '\0');
  head.resize(std::fread(head.data(), 1, head.size(), in));
  std::fclose(in);
  std::FILE* out = std::fopen(cut.c_str(), "wb");
  std::fwrite(head.data(), 1, head.size(), out);
  std::fclose(out);
  auto trace = ParseKinetoFile(cut);
  ASSERT_FALSE(trace.ok());
  std::string message(trace.status().message());
  EXPECT_NE(message.find(cut), std::string::npos) << message;
  EXPECT_NE(message.find("compressed byte"), std::string::npos) << message;
  EXPECT_NE(message.find("of the decompressed data"), std::string::npos) << message;
}

}  // namespace
}  // namespace memtrace::importers
