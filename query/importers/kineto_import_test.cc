#include "query/importers/kineto_import.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "query/importers/recording_sink.h"
#include "tests/util/test_dirs.h"

namespace memtrace::importers {
namespace {

// Records into a RecordingSink owned by the test, so events outlive the import.
class TestRankSink : public RankImportSink {
 public:
  explicit TestRankSink(RecordingSink* sink, int* finishes) : sink_(sink), finishes_(finishes) {}
  void Record(const Event& event) override { sink_->Record(event); }
  uint32_t Intern(StringKind kind, std::string_view value) override {
    return sink_->Intern(kind, value);
  }
  absl::Status Checkpoint() override { return absl::OkStatus(); }
  absl::Status Finish() override {
    ++*finishes_;
    return absl::OkStatus();
  }

 private:
  RecordingSink* sink_;
  int* finishes_;
};

struct Recorder {
  std::map<int32_t, std::unique_ptr<RecordingSink>> by_rank;
  std::map<int32_t, ImportedRank> identities;
  int finishes = 0;

  RankSinkFactory Factory() {
    return [this](const ImportedRank& rank) -> absl::StatusOr<std::unique_ptr<RankImportSink>> {
      auto& sink = by_rank[rank.rank];
      sink = std::make_unique<RecordingSink>();
      identities[rank.rank] = rank;
      return std::make_unique<TestRankSink>(sink.get(), &finishes);
    };
  }
};

std::string Trace(int allocs, const std::string& tail) {
  std::string events;
  for (int i = 0; i < allocs; ++i) {
    events += "{\"ph\": \"i\", \"name\": \"[memory]\", \"pid\": 42, \"tid\": 1, \"ts\": " +
              std::to_string(10 + i) + ", \"args\": {\"Addr\": " + std::to_string(4096 + i * 64) +
              ", \"Bytes\": 64, \"Total Allocated\": " + std::to_string(64 * (i + 1)) +
              ", \"Total Reserved\": 2097152, \"Device Type\": 1, \"Device Id\": 2}},";
  }
  events +=
      "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#1\", "
      "\"pid\": 42, \"tid\": 1, \"ts\": 5, \"dur\": 100}";
  return "{\"traceEvents\": [" + events + "]" + tail + "}";
}

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// ImportKinetoFiles with default options into `recorder`, each file's summary line (FormatSummary)
// appended to `lines`.
absl::StatusOr<std::vector<KinetoFileSummary>> ImportWithSummaries(
    const std::vector<std::string>& paths, Recorder& recorder, std::vector<std::string>& lines) {
  return ImportKinetoFiles(paths, {}, recorder.Factory(), [&lines](const KinetoFileSummary& s) {
    lines.push_back(FormatSummary(s));
  });
}

TEST(KinetoImportTest, ImportsEachFileAsItsRankAndSummarizesIt) {
  std::string a = test_util::TmpPath("job_rank0.json");
  std::string b = test_util::TmpPath("job_rank1.json");
  std::string c = test_util::TmpPath("late_info.json");
  Write(a, Trace(3, ""));
  Write(b, Trace(5, ""));
  // distributedInfo after traceEvents still decides the rank.
  Write(c, Trace(2, ", \"distributedInfo\": {\"rank\": 2, \"world_size\": 4}"));
  Recorder recorder;
  std::vector<std::string> lines;
  auto summaries = ImportWithSummaries({a, b, c}, recorder, lines);
  ASSERT_TRUE(summaries.ok()) << summaries.status();
  ASSERT_EQ(summaries->size(), 3u);
  EXPECT_EQ(recorder.finishes, 3);
  EXPECT_EQ(recorder.identities[0].rank_source, "file name");
  EXPECT_EQ(recorder.identities[0].world_size, 3);
  EXPECT_EQ(recorder.identities[0].pid, 42);
  EXPECT_EQ(recorder.identities[0].device_index, 2);
  EXPECT_EQ(recorder.identities[2].rank_source, "distributedInfo");
  EXPECT_EQ(recorder.identities[2].world_size, 4);
  EXPECT_EQ((*summaries)[1].events.memory_events, 5u);
  size_t allocs = 0;
  for (const Event& e : recorder.by_rank[1]->events()) allocs += e.kind == EventKind::kAlloc;
  EXPECT_EQ(allocs, 5u);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(
      lines[1].find("job_rank1.json: 6 events read, 5 memory events imported (5 CUDA, 0 CPU)"),
      std::string::npos)
      << lines[1];
  EXPECT_NE(lines[1].find("1 steps (1 ProfilerStep ranges)"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("rank 1 of 3 (file name)"), std::string::npos) << lines[1];
}

// One process holding memory on two GPUs (DataParallel, or a pipeline stage per device) is one
// rank, as the agent records such a process; the summary says so rather than naming one device.
TEST(KinetoImportTest, ATraceOnTwoDevicesIsOneRankAndSaysSo) {
  std::string path = test_util::TmpPath("two_devices_rank0.json");
  std::string events;
  for (int device : {0, 1}) {
    events += "{\"ph\": \"i\", \"name\": \"[memory]\", \"pid\": 42, \"tid\": 1, \"ts\": " +
              std::to_string(10 + device) +
              ", \"args\": {\"Addr\": " + std::to_string(4096 + device * 64) +
              ", \"Bytes\": 64, \"Total Allocated\": 64, \"Total Reserved\": 2097152, "
              "\"Device Type\": 1, \"Device Id\": " +
              std::to_string(device) + "}},";
  }
  events.pop_back();
  Write(path, "{\"traceEvents\": [" + events + "]}");
  Recorder recorder;
  std::vector<std::string> lines;
  auto summaries = ImportWithSummaries({path}, recorder, lines);
  ASSERT_TRUE(summaries.ok()) << summaries.status();
  EXPECT_EQ(recorder.by_rank.size(), 1u);
  EXPECT_EQ(recorder.identities[0].device_index, 0);
  EXPECT_EQ((*summaries)[0].events.cuda_devices, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ((*summaries)[0].events.total_allocated_mismatches, 0u);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(", CUDA devices 0 and 1 summed in this rank"), std::string::npos)
      << lines[0];
  // One device: nothing said.
  Write(path, Trace(2, ""));
  lines.clear();
  ASSERT_TRUE(ImportWithSummaries({path}, recorder, lines).ok());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].find("CUDA devices"), std::string::npos) << lines[0];
}

// A trace recorded without profile_memory has no [memory] events: it is refused, saying how to
// get them (it was stored as a job of 0 events, exit 0), and so is one whose every [memory]
// event was out of range (which was told to record them).
TEST(KinetoImportTest, ATraceWithoutMemoryEventsIsRefusedSayingHowToRecordThem) {
  std::string path = test_util::TmpPath("no_memory_rank0.json");
  Write(path, Trace(0, ""));
  Recorder recorder;
  auto summaries = ImportKinetoFiles({path}, {}, recorder.Factory());
  ASSERT_FALSE(summaries.ok());
  EXPECT_EQ(summaries.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(summaries.status().message(),
            path +
                ": the trace has no [memory] events: record it with "
                "torch.profiler.profile(profile_memory=True) (nothing was imported)");
  EXPECT_TRUE(recorder.by_rank.empty());

  std::string huge = test_util::TmpPath("huge_rank0.json");
  Write(huge,
        "{\"traceEvents\": [{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"name\": "
        "\"[memory]\", \"pid\": 1, \"tid\": 1, \"ts\": 1, \"args\": {\"Device Type\": 1, "
        "\"Device Id\": 0, \"Addr\": 4096, \"Bytes\": 1152921504606846976}}]}");
  summaries = ImportKinetoFiles({huge}, {}, recorder.Factory());
  ASSERT_FALSE(summaries.ok());
  EXPECT_EQ(summaries.status().message(),
            huge +
                ": none of its 1 [memory] events could be imported (without Addr, Bytes or ts, "
                "or with a malformed value) (nothing was imported)");
  EXPECT_TRUE(recorder.by_rank.empty());
}

TEST(KinetoImportTest, StopsAtABadFileNamingItAfterImportingTheOnesBefore) {
  std::string good = test_util::TmpPath("good_rank0.json");
  std::string bad = test_util::TmpPath("bad_rank1.json");
  Write(good, Trace(1, ""));
  Write(bad, "{\"traceEvents\": [{\"ph\": \"i\" \"name\": 1}]}");
  Recorder recorder;
  auto summaries = ImportKinetoFiles({good, bad}, {}, recorder.Factory());
  ASSERT_FALSE(summaries.ok());
  // Malformed inside its events: only importing the file finds it, after the good one's.
  EXPECT_NE(summaries.status().message().find(bad + ": malformed JSON at byte 28"),
            std::string::npos)
      << summaries.status();
  EXPECT_NE(summaries.status().message().find(
                "(the file before it was imported, and importing them again stores nothing "
                "twice: fix or leave out this file and run the import again)"),
            std::string::npos)
      << summaries.status();
  EXPECT_EQ(recorder.finishes, 1);
}

// A trace whose distributedInfo comes first, where PyTorch writes it.
std::string TraceOfRank(int rank, int allocs) {
  return "{\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": " + std::to_string(rank) +
         ", \"world_size\": 2}, " + Trace(allocs, "").substr(1);
}

TEST(KinetoImportTest, TwoFilesOfOneRankAreRefusedBeforeAnythingIsStored) {
  std::string a = test_util::TmpPath("first.json");
  std::string b = test_util::TmpPath("second.json");
  Write(a, TraceOfRank(1, 2));
  Write(b, TraceOfRank(1, 3));
  Recorder recorder;
  auto summaries = ImportKinetoFiles({a, b}, {}, recorder.Factory());
  ASSERT_FALSE(summaries.ok());
  EXPECT_EQ(summaries.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(summaries.status().message(),
            b + ": rank 1 (from distributedInfo) is also " + a +
                "'s (from distributedInfo); import one file per rank, or separate runs of a rank "
                "as separate jobs (nothing was imported)");
  EXPECT_TRUE(recorder.by_rank.empty());
  EXPECT_EQ(recorder.finishes, 0);
}

TEST(KinetoImportTest, AMissingFileStopsTheImportBeforeAnythingIsStored) {
  std::string a = test_util::TmpPath("present_rank0.json");
  std::string missing = test_util::TmpPath("missing_rank1.json");
  Write(a, Trace(2, ""));
  Recorder recorder;
  auto summaries = ImportKinetoFiles({a, missing}, {}, recorder.Factory());
  ASSERT_FALSE(summaries.ok());
  EXPECT_EQ(summaries.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(summaries.status().message().find(missing), std::string::npos) << summaries.status();
  EXPECT_NE(summaries.status().message().find("(nothing was imported)"), std::string::npos)
      << summaries.status();
  EXPECT_TRUE(recorder.by_rank.empty());
}

// Imports two files whose ranks clash only once the second is parsed: the first is stored, the
// second refused, and the error says so.
void ExpectRankClashAfterTheFirstFile(const std::vector<std::string>& paths) {
  Recorder recorder;
  auto summaries = ImportKinetoFiles(paths, {}, recorder.Factory());
  ASSERT_FALSE(summaries.ok());
  EXPECT_EQ(summaries.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(summaries.status().message().find("(the file before it was imported"),
            std::string::npos)
      << summaries.status();
  EXPECT_EQ(recorder.finishes, 1);
}

TEST(KinetoImportTest, ARankStatedOnlyAfterTheEventsIsCheckedWhenItsFileIsImported) {
  // File order makes the second file rank 1 until its events are read; then it says rank 0.
  std::string a = test_util::TmpPath("early_rank0.json");
  std::string b = test_util::TmpPath("late.json");
  Write(a, Trace(2, ""));
  Write(b, Trace(2, ", \"distributedInfo\": {\"rank\": 0, \"world_size\": 2}"));
  ExpectRankClashAfterTheFirstFile({a, b});
}

// Two file names stating one rank: a user found the first stored before the second was refused.
// Names are known before anything is parsed, so the clash is refused then.
TEST(KinetoImportTest, TwoFilesNamedForOneRankAreRefusedBeforeAnythingIsStored) {
  std::string a = test_util::TmpPath("x_rank0.json");
  std::string b = test_util::TmpPath("y_rank0.json");
  Write(a, Trace(1, ""));
  Write(b, Trace(1, ""));
  Recorder recorder;
  auto summaries = ImportKinetoFiles({a, b}, {}, recorder.Factory());
  ASSERT_FALSE(summaries.ok());
  EXPECT_EQ(summaries.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(summaries.status().message().find("(nothing was imported)"), std::string::npos)
      << summaries.status();
  EXPECT_EQ(recorder.finishes, 0);
}

TEST(KinetoImportTest, ARankFromAFilesPositionIsNotHeldAgainstALaterFilesStatedRank) {
  // The first file states rank 1 only after its events; by position it would be rank 0, which
  // the second file states before its events. Both are right, and both are imported.
  std::string late = test_util::TmpPath("late_one.json");
  std::string early = test_util::TmpPath("early_zero.json");
  Write(late, Trace(2, ", \"distributedInfo\": {\"rank\": 1, \"world_size\": 2}"));
  Write(early, TraceOfRank(0, 3));
  Recorder recorder;
  auto summaries = ImportKinetoFiles({late, early}, {}, recorder.Factory());
  ASSERT_TRUE(summaries.ok()) << summaries.status();
  ASSERT_EQ(summaries->size(), 2u);
  EXPECT_EQ((*summaries)[0].rank.rank, 1);
  EXPECT_EQ((*summaries)[1].rank.rank, 0);
}

TEST(KinetoImportTest, AFileGivenTwiceIsRefusedBeforeAnythingIsStored) {
  std::string a = test_util::TmpPath("twice_rank0.json");
  Write(a, Trace(2, ""));
  Recorder recorder;
  auto summaries =
      ImportKinetoFiles({a, test_util::TmpDir() + "/./twice_rank0.json"}, {}, recorder.Factory());
  ASSERT_FALSE(summaries.ok());
  EXPECT_EQ(summaries.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(summaries.status().message().find(": the same file as " + a +
                                              ", given twice (nothing was imported)"),
            std::string::npos)
      << summaries.status();
  EXPECT_TRUE(recorder.by_rank.empty());
}

TEST(KinetoImportTest, ASinkThatCannotFinishFailsTheImport) {
  std::string a = test_util::TmpPath("finish_rank0.json");
  Write(a, Trace(1, ""));
  class FailingSink : public RankImportSink {
   public:
    void Record(const Event&) override {}
    uint32_t Intern(StringKind, std::string_view) override { return 1; }
    absl::Status Checkpoint() override { return absl::OkStatus(); }
    absl::Status Finish() override { return absl::DeadlineExceededError("not durable in 5s"); }
  };
  auto summaries = ImportKinetoFiles(
      {a}, {}, [](const ImportedRank&) -> absl::StatusOr<std::unique_ptr<RankImportSink>> {
        return std::make_unique<FailingSink>();
      });
  ASSERT_FALSE(summaries.ok());
  EXPECT_EQ(summaries.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(summaries.status().message().find("finish_rank0.json: rank 0: not durable"),
            std::string::npos)
      << summaries.status();
}

TEST(KinetoImportTest, TheSummarySaysWhatTheCollectorAlreadyHad) {
  KinetoFileSummary s;
  s.rank.path = "/traces/rank0.json.gz";
  s.delivery = {12, 0};
  EXPECT_EQ(FormatSummary(s).find("already"), std::string::npos) << FormatSummary(s);
  s.delivery = {12, 5};
  EXPECT_NE(FormatSummary(s).find("; the collector already had 5 of the 12 events it makes"),
            std::string::npos)
      << FormatSummary(s);
  s.delivery = {12, 12};
  EXPECT_NE(FormatSummary(s).find("; the collector already had all of it: nothing new stored"),
            std::string::npos)
      << FormatSummary(s);
}

// A missing event makes every event after it disagree with Total Allocated; the count is of the
// jumps, and said so (it read "1 events disagree" where 2108 did).
TEST(KinetoImportTest, TheSummaryCountsJumpsOfTotalAllocatedAndMalformedEvents) {
  KinetoFileSummary s;
  s.rank.path = "rank0.json";
  s.events.total_allocated_mismatches = 2;
  s.parse.memory_skipped = 3;
  s.parse.memory_args_unread = 4;
  const std::string line = FormatSummary(s);
  EXPECT_NE(line.find(", 3 without Addr/Bytes/ts or with a malformed value skipped,"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find(", 4 with Total Reserved or Ev Idx malformed kept without it,"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find(", 2 jumps of Total Allocated that no event explains (events missing from "
                      "the trace)"),
            std::string::npos)
      << line;
}

}  // namespace
}  // namespace memtrace::importers
