// `memtrace import` end to end: the real Kineto traces through real Transports into an
// in-process collector (loopback port 0, RocksDB under $TEST_TMPDIR), read back with the Query
// service and run through the analyses.
#include "query/importers/import_command.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_split.h"
#include "collector/server/server_test_util.h"
#include "gtest/gtest.h"
#include "query/analysis/diverged.h"
#include "query/analysis/leaks.h"
#include "query/analysis/peak.h"
#include "query/analysis/rollup_convert.h"
#include "query/cli/commands/live.h"
#include "query/cli/query_client.h"
#include "query/importers/kineto_parser.h"
#include "query/importers/shared_data.h"
#include "tests/util/test_dirs.h"

namespace memtrace::importers {
namespace {

struct CommandRun {
  int code;
  std::string out;
  std::string err;
};

CommandRun Import(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  cli::CommandIo io{out, err};
  int code = ImportCommand().run(args, io);
  return {code, out.str(), err.str()};
}

// A trace of one CUDA allocation of `bytes` at `ts` (us) by pid 1, written to $TEST_TMPDIR/name.
std::string OneAllocationTrace(const std::string& name, int64_t ts, uint64_t bytes) {
  const std::string file = test_util::TmpPath(name);
  std::ofstream(file) << R"({"traceEvents": [{"ph": "i", "name": "[memory]", "pid": 1,)"
                      << R"( "tid": 1, "ts": )" << ts << R"(, "args": {"Device Type": 1,)"
                      << R"( "Device Id": 0, "Addr": 4096, "Bytes": )" << bytes
                      << R"(, "Total Allocated": )" << bytes << "}}]}";
  return file;
}

// What the profiler itself says about a file: its peak Total Allocated (CUDA) and, per step,
// the highest Total Allocated while the step ran (including the value it began with).
struct ProfilerView {
  int64_t peak = 0;
  int64_t last = 0;
  std::map<int64_t, int64_t> step_peak;
  std::map<int64_t, int64_t> step_max_reserved;
  int64_t first_step_start_ns = 0;  // of the CPU timeline's first ProfilerStep
};

ProfilerView ViewOf(const std::string& path) {
  absl::StatusOr<KinetoTrace> trace = ParseKinetoFile(path);
  EXPECT_TRUE(trace.ok()) << trace.status();
  ProfilerView view;
  std::vector<KinetoMemoryRecord> cuda;
  for (const KinetoMemoryRecord& r : trace->memory) {
    if (r.device_type == kKinetoDeviceCuda) cuda.push_back(r);
  }
  std::stable_sort(cuda.begin(), cuda.end(), [](const auto& a, const auto& b) {
    return a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.ev_idx < b.ev_idx;
  });
  std::vector<std::pair<int64_t, int64_t>> starts;  // (start, step), CPU timeline
  for (const KinetoStepRange& s : trace->steps) {
    if (!s.gpu) starts.push_back({s.range.start_ns, s.step});
  }
  std::sort(starts.begin(), starts.end());
  if (!starts.empty()) view.first_step_start_ns = trace->base_time_ns + starts.front().first;
  int64_t current = cuda.empty() ? 0 : cuda.front().total_allocated - cuda.front().bytes;
  view.peak = current;
  size_t next = 0;
  int64_t step = INT64_MIN;
  for (const KinetoMemoryRecord& r : cuda) {
    while (next < starts.size() && starts[next].first <= r.ts_ns) {
      step = starts[next++].second;
      view.step_peak[step] = std::max(view.step_peak[step], current);
    }
    current = r.total_allocated;
    view.peak = std::max(view.peak, current);
    if (step != INT64_MIN) {
      view.step_peak[step] = std::max(view.step_peak[step], current);
      view.step_max_reserved[step] = std::max(view.step_max_reserved[step], r.total_reserved);
    }
  }
  view.last = current;
  return view;
}

class ImportCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = FindSharedDataDir();
    if (!dir.ok()) {
      if (SharedDataRequired()) FAIL() << "CI is set but " << dir.status();
      GTEST_SKIP() << dir.status();
    }
    kineto_ = *dir + "/kineto/";
  }
  std::string kineto_;
};

TEST_F(ImportCommandTest, RealTracesLandInTheCollectorWithLiveBytesEqualToTotalAllocated) {
  auto server = collector::testing::StartCollector("import_real");
  ASSERT_NE(server, nullptr);
  const std::vector<std::string> files = {kineto_ + "tracelens_h100_qwen1.5-0.5b.json.gz",
                                          kineto_ + "hta_rank1_of_2.json.gz",
                                          kineto_ + "tracelens_h100_falconsai_nsfw.json.gz"};
  CommandRun run = Import({"--job", "kineto-real", "--format", "kineto", "--collector",
                           server->address(), files[0], files[1], files[2]});
  ASSERT_EQ(run.code, 0) << run.err;
  // Each file as it was given, and one world size for the import's ranks.
  EXPECT_NE(run.out.find(files[1] + ": 216092 events read, 28010 memory events imported"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("rank 1 of 3 (distributedInfo)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("imported 3 files into job kineto-real: 31080 memory events"),
            std::string::npos)
      << run.out;

  auto client = cli::QueryClient::Create(server->address(), absl::Seconds(10));
  ASSERT_TRUE(client.ok());
  auto ranks = client->ListRanks("kineto-real");
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  ASSERT_EQ(ranks->ranks_size(), 3);
  std::map<uint32_t, ProfilerView> views = {
      {0, ViewOf(files[0])}, {1, ViewOf(files[1])}, {2, ViewOf(files[2])}};
  for (const v1::RankSummary& r : ranks->ranks()) {
    SCOPED_TRACE(r.rank());
    EXPECT_EQ(r.identity().launcher(), "kineto-import");
    EXPECT_TRUE(r.complete());
    EXPECT_EQ(r.anomalies(), 0u) << r.anomaly_counts().DebugString();
    EXPECT_EQ(static_cast<int64_t>(r.live_bytes()), views[r.rank()].last);
    // Times as the trace has them: the importer's own offset from the collector is not the
    // trace's (it shifted each import by a different few ms).
    EXPECT_FALSE(r.has_clock()) << r.clock().DebugString();
  }

  auto rollups = client->GetRollups([] {
    v1::GetRollupsRequest request;
    request.set_job_id("kineto-real");
    return request;
  }());
  ASSERT_TRUE(rollups.ok()) << rollups.status();
  for (const v1::RankRollups& rank : rollups->ranks()) {
    const ProfilerView& view = views[rank.rank()];
    ASSERT_GT(rank.steps_size(), 0);
    EXPECT_EQ(rank.steps(rank.steps_size() > 1 && rank.steps(0).step() == 0 ? 1 : 0).start_ns(),
              view.first_step_start_ns)
        << "rank " << rank.rank();
    for (const v1::StepRollup& step : rank.steps()) {
      auto it = view.step_peak.find(step.step());
      if (it == view.step_peak.end()) continue;  // before the first ProfilerStep
      EXPECT_EQ(static_cast<int64_t>(step.peak_bytes()), it->second)
          << "rank " << rank.rank() << " step " << step.step();
      EXPECT_EQ(static_cast<int64_t>(step.device_used_max()),
                view.step_max_reserved.at(step.step()))
          << "rank " << rank.rank() << " step " << step.step();
    }
  }

  // The analyses run on the imported job.
  absl::StatusOr<analysis::JobTimeline> job =
      analysis::TimelineFromRollups("kineto-real", *rollups);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->ranks.size(), 3u);
  analysis::PeakParams by_rank;
  by_rank.by = analysis::PeakBy::kRank;
  analysis::PeakReport peaks = analysis::FindPeaks(*job, by_rank);
  ASSERT_EQ(peaks.entries.size(), 3u);
  for (const analysis::PeakEntry& entry : peaks.entries) {
    EXPECT_EQ(static_cast<int64_t>(entry.peak_bytes), views[entry.rank].peak)
        << "rank " << entry.rank;
  }
  analysis::DivergenceReport divergence = analysis::FindDivergence(*job);
  EXPECT_EQ(divergence.ranks, 3u);
  EXPECT_TRUE(divergence.diverged.empty()) << divergence.message;  // 5 steps: nothing to find
  EXPECT_FALSE(divergence.message.empty());
  analysis::LeakReport leaks = analysis::FindLeaks(*job);
  EXPECT_EQ(leaks.curves.size(), 3u);
  EXPECT_EQ(leaks.leaking_ranks, 0u);
  // A profiler's events are the caching allocator's blocks: "segments" (the agent's view, the
  // allocator's cudaMalloc calls) said otherwise.
  for (const analysis::RankCurve& curve : leaks.curves) {
    EXPECT_EQ(curve.allocator, "blocks") << "rank " << curve.rank;
  }

  // The memory there before the trace began dates from its first step (ProfilerStep#2 in the
  // HTA trace), not from a step 0 that no rollup shows.
  std::ostringstream live_out, live_err;
  cli::CommandIo live_io{live_out, live_err};
  ASSERT_EQ(cli::LiveCommand().run(
                {"--job", "kineto-real", "--rank", "1", "--collector", server->address()}, live_io),
            0)
      << live_err.str();
  std::istringstream lines(live_out.str());
  std::string line;
  bool found = false;
  while (std::getline(lines, line)) {
    if (line.rfind(kBaselineTag, 0) != 0) continue;
    found = true;
    // tag, bytes (a number and a unit), allocations, since step, ...
    std::vector<std::string> columns = absl::StrSplit(line, ' ', absl::SkipEmpty());
    ASSERT_GE(columns.size(), 5u) << live_out.str();
    EXPECT_EQ(columns[4], "2") << "since step\n" << live_out.str();
  }
  EXPECT_TRUE(found) << live_out.str();
}

TEST_F(ImportCommandTest, ImportingTheSameFileAgainStoresNothingNew) {
  auto server = collector::testing::StartCollector("import_again");
  ASSERT_NE(server, nullptr);
  std::string file = kineto_ + "tracelens_h100_falconsai_nsfw.json.gz";
  std::vector<std::string> args = {"--job",       "again",           "--format", "kineto",
                                   "--collector", server->address(), file};
  CommandRun once = Import(args);
  ASSERT_EQ(once.code, 0) << once.err;
  EXPECT_EQ(once.out.find("already"), std::string::npos) << once.out;
  auto client = cli::QueryClient::Create(server->address(), absl::Seconds(10));
  ASSERT_TRUE(client.ok());
  auto first = client->ListRanks("again");
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->ranks_size(), 1);
  // And says so, instead of counting the events as imported again.
  CommandRun again = Import(args);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("; the collector already had all of it: nothing new stored\n"),
            std::string::npos)
      << again.out;
  EXPECT_NE(again.out.find("(all of it already there: nothing new)\n"), std::string::npos)
      << again.out;
  auto second = client->ListRanks("again");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->ranks(0).events_stored(), first->ranks(0).events_stored());
  EXPECT_EQ(second->ranks(0).live_bytes(), first->ranks(0).live_bytes());

  // The same file imported another way is another event stream for the same rank: refused,
  // saying why, rather than spliced into the first by sequence number (its first events were
  // dropped as resends and the rest appended).
  // It fails as soon as the collector refuses, not after waiting out --drain-timeout.
  std::vector<std::string> other = args;
  other.insert(other.end() - 1, {"--skip-cpu-memory", "--drain-timeout", "30s"});
  const absl::Time started = absl::Now();
  CommandRun refused = Import(other);
  EXPECT_LT(absl::Now() - started, absl::Seconds(10));
  EXPECT_NE(refused.code, 0);
  EXPECT_NE(refused.err.find("refused the import: job 'again' holds this rank already, as "
                             "another trace imported before as this attempt (or this one "
                             "imported with other flags: import it under another --job or "
                             "--attempt), or as a process streaming the rank now (import it once "
                             "that ended); `memtrace ranks --job again` shows which"),
            std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("ALREADY_EXISTS"), std::string::npos) << refused.err;
  // Not the agents' wording: an import has no host or pid of its own.
  EXPECT_EQ(refused.err.find("refusing a second producer"), std::string::npos) << refused.err;
  // So is the trace imported without its module scopes (falcon has 214): it is known again by
  // what the flags do not change, not stored as a second rank beside itself.
  std::vector<std::string> no_modules = args;
  no_modules.insert(no_modules.end() - 1, "--no-module-tags");
  CommandRun refused_again = Import(no_modules);
  EXPECT_NE(refused_again.code, 0) << refused_again.out;
  EXPECT_NE(refused_again.err.find("ALREADY_EXISTS"), std::string::npos) << refused_again.err;
  auto third = client->ListRanks("again");
  ASSERT_TRUE(third.ok());
  ASSERT_EQ(third->ranks_size(), 1);
  EXPECT_EQ(third->ranks(0).events_stored(), first->ranks(0).events_stored());
  EXPECT_EQ(third->ranks(0).anomaly_counts().DebugString(),
            first->ranks(0).anomaly_counts().DebugString());
}

// Found by a user: the same bytes imported as another rank of the job were stored again, and
// a trace of another run was added to a job without a word.
TEST_F(ImportCommandTest, ATraceAlreadyARankOfTheJobIsRefusedAndAnotherRunsIsWarnedOf) {
  auto server = collector::testing::StartCollector("import_guard");
  ASSERT_NE(server, nullptr);
  const std::string falcon = kineto_ + "tracelens_h100_falconsai_nsfw.json.gz";
  auto import = [&](const std::string& job, const std::vector<std::string>& files) {
    std::vector<std::string> args = {"--job",  job,           "--format",
                                     "kineto", "--collector", server->address()};
    args.insert(args.end(), files.begin(), files.end());
    return Import(args);
  };
  CommandRun first = import("dup", {falcon});
  ASSERT_EQ(first.code, 0) << first.err;
  // The same trace as rank 3 (its name says so): refused, naming the rank it already is.
  const std::string copy = test_util::TmpPath("falcon_rank3.json.gz");
  std::filesystem::copy_file(falcon, copy, std::filesystem::copy_options::overwrite_existing);
  CommandRun again = import("dup", {copy});
  EXPECT_EQ(again.code, cli::kExitError);
  EXPECT_NE(again.err.find("memtrace import: " + copy +
                           ": the same trace, imported the same way, is already rank 0 (attempt "
                           "0) of job dup at " +
                           server->address() +
                           "; one process's trace is one rank (nothing was imported)\n"),
            std::string::npos)
      << again.err;
  // Twice in one import, under two names.
  const std::string copy2 = test_util::TmpPath("falcon_rank1.json.gz");
  std::filesystem::copy_file(falcon, copy2, std::filesystem::copy_options::overwrite_existing);
  CommandRun twice = import("dup-in-one", {falcon, copy2});
  EXPECT_EQ(twice.code, cli::kExitError);
  EXPECT_NE(twice.err.find(copy2 + ": the same trace, imported the same way, is already what " +
                           falcon + " was just imported as"),
            std::string::npos)
      << twice.err;
  auto client = cli::QueryClient::Create(server->address(), absl::Seconds(10));
  ASSERT_TRUE(client.ok());
  auto dup = client->ListRanks("dup");
  ASSERT_TRUE(dup.ok());
  EXPECT_EQ(dup->ranks_size(), 1);

  // Another run's trace (rank 1 of 2, recorded years apart) into the job of a single-rank run:
  // imported, with a warning that says what differs. (Its world size, 2, is above the job's 1,
  // which a file imported alone implies: no evidence.)
  const std::string hta = kineto_ + "hta_rank1_of_2.json.gz";
  CommandRun other = import("dup", {hta});
  EXPECT_EQ(other.code, 0) << other.err;
  EXPECT_EQ(other.err.find("already holds"), std::string::npos) << other.err;
  EXPECT_NE(other.err.find("memtrace import: warning: " + hta + " was recorded "),
            std::string::npos)
      << other.err;
  EXPECT_NE(other.err.find(" days away from most of job dup's traces: is it a trace of the same "
                           "run?"),
            std::string::npos)
      << other.err;
  // Importing the same file again is no duplicate of itself: nothing new, and no warning (its
  // world size is the number of files, not stated; it is as near as can be to itself).
  CommandRun same = import("dup", {falcon});
  EXPECT_EQ(same.code, 0) << same.err;
  EXPECT_NE(same.out.find("nothing new"), std::string::npos) << same.out;
  EXPECT_EQ(same.err, "");
  // Nor is the same trace as the same rank of another attempt (the help's way out).
  CommandRun attempt = import("dup", {"--attempt", "1", falcon});
  EXPECT_EQ(attempt.code, 0) << attempt.err;

  // A file that states a world size below the job's (hta is rank 1 of 2): warned of.
  const std::string small = test_util::TmpPath("qwen_rank0_of_1.json.gz");
  std::filesystem::copy_file(kineto_ + "tracelens_h100_qwen1.5-0.5b.json.gz", small,
                             std::filesystem::copy_options::overwrite_existing);
  CommandRun sizes = import("sizes", {hta});
  ASSERT_EQ(sizes.code, 0) << sizes.err;
  sizes = import("sizes", {small});
  EXPECT_EQ(sizes.code, 0) << sizes.err;
  EXPECT_NE(sizes.err.find("memtrace import: warning: job sizes already holds rank 1 of 2 "
                           "(launcher kineto-import), and this import's files are ranks of 1: "
                           "are they traces of one run?"),
            std::string::npos)
      << sizes.err;
}

// A run's ranks imported one file at a time: each is "of 1" by itself, which is no evidence of
// another run (a review found the world-size warning fired on this ordinary use).
TEST(ImportCommandGuardTest, RanksOfOneRunImportedOneAtATimeAreNotWarnedOf) {
  auto server = collector::testing::StartCollector("import_one_by_one");
  ASSERT_NE(server, nullptr);
  // The second states its world size, above the "of 1" the first was given alone.
  for (int rank : {0, 1}) {
    const std::string file = OneAllocationTrace(
        rank == 0 ? "one_by_one_rank0.json" : "one_by_one_rank1_of_2.json", 10 + rank, 64 + rank);
    CommandRun run = Import(
        {"--job", "one-by-one", "--format", "kineto", "--collector", server->address(), file});
    EXPECT_EQ(run.code, 0) << run.err;
    EXPECT_EQ(run.err, "") << "rank " << rank;
    EXPECT_NE(run.out.find("rank " + std::to_string(rank) + " of "), std::string::npos) << run.out;
  }
}

// The files of one command are checked against each other as against the job's ranks: two
// world sizes, or traces days apart, are warned of ("rank 1 of 6 (distributedInfo)" of a
// trace whose distributedInfo says 2 went unexplained); a name stating a rank outside its own
// world size is refused before anything is imported.
TEST(ImportCommandGuardTest, FilesOfOneImportThatDisagreeAreWarnedOf) {
  auto server = collector::testing::StartCollector("import_one_command");
  ASSERT_NE(server, nullptr);
  constexpr int64_t kThreeDaysUs = int64_t{3} * 86'400 * 1'000'000;
  const std::string a = OneAllocationTrace("one_cmd_rank0_of_2.json", 10, 64);
  const std::string b = OneAllocationTrace("one_cmd_rank3_of_4.json", 10 + kThreeDaysUs, 64);
  CommandRun run =
      Import({"--job", "one-cmd", "--format", "kineto", "--collector", server->address(), a, b});
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.err.find("memtrace import: warning: the files state world sizes 2 in " + a +
                         " (file name), 4 in " + b +
                         " (file name), and each is imported as a rank of 4 (the largest size "
                         "stated, number of files, or rank + 1): are they traces of one run?"),
            std::string::npos)
      << run.err;
  // Two files days apart, nothing held: one warning.
  EXPECT_NE(run.err.find("memtrace import: warning: " + b +
                         " was recorded 3 days away from most of this import's files"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("warning: " + a + " was recorded"), std::string::npos) << run.err;
  // The odd one out of three is named, wherever it comes: checked as they came, the file after
  // it was named instead. A stated size below the import's is warned of too.
  const std::string c = OneAllocationTrace("one_cmd_c.json", 20, 64);
  CommandRun three = Import(
      {"--job", "one-cmd-3", "--format", "kineto", "--collector", server->address(), a, b, c});
  EXPECT_EQ(three.code, 0) << three.err;
  EXPECT_NE(three.err.find("warning: " + b + " was recorded 2 days away"), std::string::npos)
      << three.err;
  EXPECT_EQ(three.err.find("warning: " + c + " was recorded"), std::string::npos) << three.err;
  EXPECT_EQ(three.err.find("warning: " + a + " was recorded"), std::string::npos) << three.err;
  // Two files of another run imported together into a job: each is near the other, and both
  // are days from the job's ranks (measured against every trace, they hid each other).
  const std::string d = OneAllocationTrace("one_cmd_d.json", 10 + kThreeDaysUs, 64);
  const std::string e = OneAllocationTrace("one_cmd_e.json", 30 + kThreeDaysUs, 64);
  CommandRun first =
      Import({"--job", "one-cmd-later", "--format", "kineto", "--collector", server->address(), a});
  ASSERT_EQ(first.code, 0) << first.err;
  CommandRun later = Import(
      {"--job", "one-cmd-later", "--format", "kineto", "--collector", server->address(), d, e});
  EXPECT_EQ(later.code, 0) << later.err;
  for (const std::string& file : {d, e}) {
    EXPECT_NE(later.err.find("warning: " + file + " was recorded "), std::string::npos)
        << later.err;
  }
  const std::vector<std::string> pieces = absl::StrSplit(
      later.err,
      " days away from most of job one-cmd-later's traces: is it a trace of the same run?");
  EXPECT_EQ(pieces.size(), 3u) << later.err;

  const std::string bad = OneAllocationTrace("one_cmd_rank5_of_4.json", 10, 64);
  CommandRun refused =
      Import({"--job", "one-cmd-bad", "--format", "kineto", "--collector", server->address(), bad});
  EXPECT_NE(refused.code, 0);
  EXPECT_NE(refused.err.find(bad + ": its file name states rank 5 of 4, not a rank of that world "
                                   "size; rename it"),
            std::string::npos)
      << refused.err;
}

// A file that states no world size takes the one the job's ranks imply: rank 0 imported after
// rank 2 alone was stored "of 1" beside "rank 2 of 3". One that states its own keeps it.
TEST(ImportCommandGuardTest, AFileWithoutAWorldSizeTakesTheJobs) {
  auto server = collector::testing::StartCollector("import_job_world");
  ASSERT_NE(server, nullptr);
  auto write = [](const std::string& name, int ts) { return OneAllocationTrace(name, ts, 64); };
  auto import = [&](const std::string& file) {
    return Import(
        {"--job", "job-world", "--format", "kineto", "--collector", server->address(), file});
  };
  CommandRun two = import(write("job_world_rank2.json", 10));
  ASSERT_EQ(two.code, 0) << two.err;
  EXPECT_NE(two.out.find("rank 2 of 3 (file name)"), std::string::npos) << two.out;
  CommandRun zero = import(write("job_world_unnamed.json", 11));
  ASSERT_EQ(zero.code, 0) << zero.err;
  EXPECT_NE(zero.out.find("rank 0 of 3 (file order)"), std::string::npos) << zero.out;
  CommandRun stated = import(write("job_world_rank1_of_2.json", 12));
  ASSERT_EQ(stated.code, 0) << stated.err;
  EXPECT_NE(stated.out.find("rank 1 of 2 (file name)"), std::string::npos) << stated.out;

  auto client = cli::QueryClient::Create(server->address(), absl::Seconds(10));
  ASSERT_TRUE(client.ok());
  auto ranks = client->ListRanks("job-world");
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  std::map<uint32_t, int32_t> sizes;
  for (const v1::RankSummary& r : ranks->ranks()) sizes[r.rank()] = r.identity().world_size();
  EXPECT_EQ(sizes, (std::map<uint32_t, int32_t>{{0, 3}, {1, 2}, {2, 3}}));
}

// Traces that state no rank, imported one command at a time: each takes the lowest rank the job
// does not hold (the second was guessed rank 0 again and refused), and one imported again
// keeps its own.
TEST(ImportCommandGuardTest, FilesWithoutARankImportedOneAtATimeTakeFreeRanks) {
  auto server = collector::testing::StartCollector("import_free_ranks");
  ASSERT_NE(server, nullptr);
  // Both pid 1 at the same time, as the ranks of containers often are: not taken for one
  // process (they differ in what they allocated).
  auto write = [](const std::string& name, int bytes) {
    return OneAllocationTrace(name, 10, bytes);
  };
  auto import = [&](const std::string& file) {
    return Import(
        {"--job", "free-ranks", "--format", "kineto", "--collector", server->address(), file});
  };
  const std::string a = write("free_ranks_a.json", 100);
  const std::string b = write("free_ranks_b.json", 200);
  CommandRun first = import(a);
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.out.find("rank 0 of 1 (file order)"), std::string::npos) << first.out;
  CommandRun second = import(b);
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_NE(second.out.find("rank 1 of 2 (file order)"), std::string::npos) << second.out;
  CommandRun again = import(a);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("rank 0 of 2 (as stored before)"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("nothing new"), std::string::npos) << again.out;
  auto client = cli::QueryClient::Create(server->address(), absl::Seconds(10));
  ASSERT_TRUE(client.ok());
  auto ranks = client->ListRanks("free-ranks");
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  EXPECT_EQ(ranks->ranks_size(), 2);
}

// tensorboard_trace_handler's layout: rank_N/<host>_<pid>.pt.trace.json. The shell lists
// rank_10 before rank_2, so by file order rank 10's trace was stored as rank 2; the summary
// named four files "host_123.pt.trace.json".
TEST_F(ImportCommandTest, TracesInPerRankDirectoriesTakeTheDirectorysRank) {
  auto server = collector::testing::StartCollector("import_dirs");
  ASSERT_NE(server, nullptr);
  const std::string root = test_util::TmpPath("per_rank_dirs");
  std::vector<std::string> files;
  const std::vector<std::string> traces = {"tracelens_h100_falconsai_nsfw.json.gz",
                                           "tracelens_h100_qwen1.5-0.5b.json.gz"};
  for (int rank : {10, 2}) {
    const std::string dir = root + "/rank_" + std::to_string(rank);
    std::filesystem::create_directories(dir);
    files.push_back(dir + "/host_123.pt.trace.json.gz");
    std::filesystem::copy_file(kineto_ + traces[files.size() - 1], files.back(),
                               std::filesystem::copy_options::overwrite_existing);
  }
  CommandRun run = Import({"--job", "dirs", "--format", "kineto", "--collector", server->address(),
                           files[0], files[1]});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find(files[0] + ": "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("rank 10 of 11 (directory name)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("rank 2 of 11 (directory name)"), std::string::npos) << run.out;
  auto client = cli::QueryClient::Create(server->address(), absl::Seconds(10));
  ASSERT_TRUE(client.ok());
  auto ranks = client->ListRanks("dirs");
  ASSERT_TRUE(ranks.ok());
  ASSERT_EQ(ranks->ranks_size(), 2);
  EXPECT_EQ(ranks->ranks(0).rank(), 2u);
  EXPECT_EQ(static_cast<int64_t>(ranks->ranks(0).live_bytes()), ViewOf(files[1]).last);
  EXPECT_EQ(ranks->ranks(1).rank(), 10u);
  EXPECT_EQ(static_cast<int64_t>(ranks->ranks(1).live_bytes()), ViewOf(files[0]).last);
}

// A trace without [memory] events was stored as a job of 0 events, with exit 0.
TEST(ImportCommandEmptyTraceTest, ATraceWithNoMemoryEventsIsRefusedAndMakesNoJob) {
  auto server = collector::testing::StartCollector("import_empty");
  ASSERT_NE(server, nullptr);
  const std::string file = test_util::TmpPath("empty_rank0.json");
  std::ofstream(file) << "{\"traceEvents\": []}";
  CommandRun run =
      Import({"--job", "empty", "--format", "kineto", "--collector", server->address(), file});
  EXPECT_EQ(run.code, cli::kExitError) << run.out;
  EXPECT_EQ(run.err, "memtrace import: " + file +
                         ": the trace has no [memory] events: record it with "
                         "torch.profiler.profile(profile_memory=True) (nothing was imported)\n");
  auto client = cli::QueryClient::Create(server->address(), absl::Seconds(10));
  ASSERT_TRUE(client.ok());
  auto jobs = client->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->jobs_size(), 0);
}

// Nothing listens: the import fails before parsing a file, at once, where it parsed the first
// file and then waited out --drain-timeout (60 s by default) for a connection refused.
TEST(ImportCommandUnreachableTest, ACollectorThatIsNotThereFailsBeforeAnyFileIsParsed) {
  const std::string file = test_util::TmpPath("unreachable_rank0.json");
  std::ofstream(file) << R"({"traceEvents": [{"ph": "i", "name": "[memory]", "pid": 1, "tid": 1,)"
                      << R"( "ts": 10, "s": "t", "args": {"Device Type": 1, "Device Id": 0,)"
                      << R"( "Addr": 4096, "Bytes": 64, "Total Allocated": 64,)"
                      << R"( "Total Reserved": 64, "Ev Idx": 1}}]})";
  const absl::Time started = absl::Now();
  CommandRun run = Import({"--job", "j", "--format", "kineto", "--collector", "127.0.0.1:1", file});
  const absl::Duration took = absl::Now() - started;
  EXPECT_EQ(run.code, cli::kExitError);
  EXPECT_LT(took, absl::Seconds(5));
  EXPECT_EQ(run.err.rfind("memtrace import: cannot reach collector at 127.0.0.1:1: ", 0), 0u)
      << run.err;
  EXPECT_NE(run.err.find("(nothing was imported)\n"), std::string::npos) << run.err;
  EXPECT_EQ(run.out, "");
}

// A collector that goes away after the import began (the pre-flight found it): a rank's sink
// gives up after --drain-timeout, not 5 s later (the Transport's own shutdown wait), and says
// what its whole wait came to, not its last 200 ms slice's.
TEST(ImportCommandUnreachableTest, ARanksSinkGivesUpWithinTheDrainTimeout) {
  TransportSinkOptions options;
  options.collector = "127.0.0.1:1";
  options.job_id = "j";
  options.drain_timeout = absl::Seconds(1);
  ImportedRank rank;
  rank.world_size = 1;
  rank.fingerprint = 1;
  rank.path = "x.json";
  absl::StatusOr<std::unique_ptr<RankImportSink>> sink = StartTransportSink(options, rank);
  ASSERT_TRUE(sink.ok()) << sink.status();
  Event e;
  e.kind = EventKind::kAlloc;
  e.ts_ns = 1'700'000'000'000'000'000;
  e.address = 4096;
  e.bytes = 64;
  (*sink)->Record(e);
  const absl::Time started = absl::Now();
  const absl::Status finished = (*sink)->Finish();
  EXPECT_LT(absl::Now() - started, absl::Seconds(4));  // 1 s, not 1 + the Transport's 5 s
  EXPECT_FALSE(finished.ok());
  EXPECT_NE(finished.message().find("within 1s"), std::string::npos) << finished;
  EXPECT_NE(finished.message().find(" events not acknowledged, not connected"), std::string::npos)
      << finished;
  EXPECT_EQ(finished.message().find("ms ("), std::string::npos) << finished;
}

TEST(ImportCommandUsageTest, BadCommandLinesAreUsageErrors) {
  EXPECT_EQ(Import({"--format", "kineto", "a.json"}).code, cli::kExitUsage);
  CommandRun no_format = Import({"--job", "j", "a.json"});
  EXPECT_EQ(no_format.code, cli::kExitUsage);
  EXPECT_NE(no_format.err.find("--format is required"), std::string::npos) << no_format.err;
  CommandRun other = Import({"--job", "j", "--format", "nsys", "a.json"});
  EXPECT_EQ(other.code, cli::kExitUsage);
  EXPECT_NE(other.err.find("'nsys' is not a known trace format"), std::string::npos);
  EXPECT_EQ(Import({"--job", "j", "--format", "kineto"}).code, cli::kExitUsage);
  CommandRun help = Import({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--skip-cpu-memory"), std::string::npos);
}

TEST(ImportCommandUsageTest, AnAddressWithoutAValidPortIsAUsageError) {
  for (const char* address : {"127.0.0.1:99999", "127.0.0.1"}) {
    CommandRun run = Import(
        {"--job", "j", "--format", "kineto", "--collector", address, "/nonexistent/rank0.json"});
    EXPECT_EQ(run.code, cli::kExitUsage) << address;
    EXPECT_EQ(run.err.find(std::string("memtrace import: --collector='") + address + "'"), 0u)
        << run.err;
  }
}

TEST(ImportCommandUsageTest, UnreadableFileFailsNamingIt) {
  CommandRun run = Import({"--job", "j", "--format", "kineto", "--collector", "127.0.0.1:1",
                           "/nonexistent/rank0.json"});
  EXPECT_EQ(run.code, cli::kExitError);
  EXPECT_NE(run.err.find("memtrace import: /nonexistent/rank0.json: cannot open"),
            std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace memtrace::importers
