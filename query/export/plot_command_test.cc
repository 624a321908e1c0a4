// `memtrace plot` on a simulated leak job (tools/sim, planted rank) played through real
// Transports into an in-process collector: the SVG highlights the planted rank, and marks the
// onset near the planted step.
#include "query/export/plot_command.h"

#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "query/export/simulated_job.h"
#include "query/export/svg_test_util.h"
#include "tests/util/test_dirs.h"

namespace memtrace::exporter {
namespace {

using testing::Attributes;

constexpr int kLeakRank = 5;
constexpr int64_t kLeakFrom = 20;
constexpr int64_t kLongStepNs = 8'000'000'000;
constexpr int kOomRank = 3;
constexpr int64_t kOomStep = 30;

struct CommandRun {
  int code;
  std::string out;
  std::string err;
};

CommandRun Plot(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  cli::CommandIo io{out, err};
  int code = PlotCommand().run(args, io);
  return {code, out.str(), err.str()};
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

class PlotCommandTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    sim::SimulationOptions leak = testing::SmallJob("sim-leak", 8, 50, 3000);
    leak.workload.leak_rank = kLeakRank;
    leak.workload.leak_from_step = kLeakFrom;
    server_ = testing::SimulateJob("plot_sim", leak);
    if (server_ != nullptr) {
      sim::SimulationOptions healthy = testing::SmallJob("sim-healthy", 8, 50, 3000);
      healthy.collector_address = server_->address();
      auto outcomes = sim::RunSimulation(healthy, [](const std::string&) {});
      healthy_ok_ = outcomes.ok();
      sim::SimulationOptions unmarked = testing::SmallJob("sim-no-markers", 8, 50, 3000);
      unmarked.workload.leak_rank = kLeakRank;
      unmarked.workload.leak_from_step = kLeakFrom;
      unmarked.workload.step_markers = false;
      unmarked.collector_address = server_->address();
      unmarked_ok_ = sim::RunSimulation(unmarked, [](const std::string&) {}).ok();
      // Steps of 8 s with markers: on --axis time, 1 s buckets in 8 s steps.
      sim::SimulationOptions long_steps = testing::SmallJob("sim-long-steps", 8, 50, 3000);
      long_steps.workload.leak_rank = kLeakRank;
      long_steps.workload.leak_from_step = kLeakFrom;
      long_steps.workload.step_ns = kLongStepNs;
      long_steps.collector_address = server_->address();
      long_steps_ok_ = sim::RunSimulation(long_steps, [](const std::string&) {}).ok();
      sim::SimulationOptions oom = testing::SmallJob("sim-oom", 8, 50, 3000);
      oom.workload.oom_rank = kOomRank;
      oom.workload.oom_step = kOomStep;
      oom.collector_address = server_->address();
      oom_ok_ = sim::RunSimulation(oom, [](const std::string&) {}).ok();
      // 4 ranks, run twice: attempts 0 and 1 of each.
      restarted_ok_ = true;
      for (uint32_t attempt : {0u, 1u}) {
        sim::SimulationOptions run = testing::SmallJob("sim-restarted", 4, 20, 1000);
        run.attempt = attempt;
        run.collector_address = server_->address();
        restarted_ok_ &= sim::RunSimulation(run, [](const std::string&) {}).ok();
      }
      // Rank 2 ran out of memory in attempt 0; the job was restarted (attempt 1) and ran on.
      for (uint32_t attempt : {0u, 1u}) {
        sim::SimulationOptions run = testing::SmallJob("sim-oom-restarted", 4, 20, 1000);
        if (attempt == 0) {
          run.workload.oom_rank = 2;
          run.workload.oom_step = 12;
        }
        run.attempt = attempt;
        run.collector_address = server_->address();
        restarted_ok_ &= sim::RunSimulation(run, [](const std::string&) {}).ok();
      }
    }
  }
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override { ASSERT_NE(server_, nullptr); }

  std::string Svg(const std::string& job, std::vector<std::string> extra = {}) {
    std::string path = test_util::TmpPath(job) + ".svg";
    std::vector<std::string> args = {"--job", job, "-o", path, "--collector", server_->address()};
    args.insert(args.end(), extra.begin(), extra.end());
    CommandRun run = Plot(args);
    EXPECT_EQ(run.code, 0) << run.err;
    return Read(path);
  }

  static std::unique_ptr<collector::CollectorServer> server_;
  static bool healthy_ok_;
  static bool unmarked_ok_;
  static bool restarted_ok_;
  static bool long_steps_ok_;
  static bool oom_ok_;
};
std::unique_ptr<collector::CollectorServer> PlotCommandTest::server_;
bool PlotCommandTest::healthy_ok_ = false;
bool PlotCommandTest::unmarked_ok_ = false;
bool PlotCommandTest::restarted_ok_ = false;
bool PlotCommandTest::long_steps_ok_ = false;
bool PlotCommandTest::oom_ok_ = false;

// A restarted rank is one line (its latest attempt): the summary counted rank-attempts, "8
// ranks" for a plot of 4 lines, "2 of 8" for --ranks 1.
TEST_F(PlotCommandTest, TheSummaryCountsRanksNotAttempts) {
  ASSERT_TRUE(restarted_ok_);
  const std::string path = test_util::TmpPath("restarted.svg");
  CommandRun run = Plot({"--job", "sim-restarted", "-o", path, "--collector", server_->address()});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.err.find("wrote " + path + ": 4 ranks"), std::string::npos) << run.err;
  run = Plot(
      {"--job", "sim-restarted", "-o", path, "--ranks", "1", "--collector", server_->address()});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.err.find(": 1 of 4 ranks"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("; each rank's latest attempt drawn (the job has 2)\n"), std::string::npos)
      << run.err;
  // The OOM the restart followed is in no line: named, as the analyses' notes name it.
  run = Plot({"--job", "sim-oom-restarted", "-o", path, "--collector", server_->address()});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.err.find("; each rank's latest attempt drawn (the job has 2), not drawn: the OOM "
                         "of rank 2 attempt 0\n"),
            std::string::npos)
      << run.err;
  // Nor is it marked over the lines of attempt 1, which ran on without one: drawn, it read as
  // the current run's OOM.
  for (Attributes& o : testing::Elements(Svg("sim-oom-restarted"), "line", "onset")) {
    EXPECT_NE(o["data-kind"], "oom") << "rank " << o["data-rank"];
  }
}

TEST_F(PlotCommandTest, HighlightsThePlantedRankOfASimulatedLeak) {
  std::string svg = Svg("sim-leak");
  Attributes root = testing::Root(svg);
  EXPECT_EQ(root["data-job"], "sim-leak");
  EXPECT_EQ(root["data-ranks"], "8");
  EXPECT_EQ(root["data-status"], "diverged");
  EXPECT_EQ(root["data-highlighted-rank"], std::to_string(kLeakRank));
  int onset = std::stoi(root["data-onset-step"]);
  EXPECT_GE(onset, kLeakFrom);
  EXPECT_LE(onset, kLeakFrom + 10);
  int highlighted = 0;
  for (Attributes& line : testing::Elements(svg, "polyline", "rank-line")) {
    if (line["data-highlighted"] == "true") {
      ++highlighted;
      EXPECT_EQ(line["data-rank"], std::to_string(kLeakRank));
    }
    EXPECT_GE(std::stoi(line["data-points"]), 50);
  }
  EXPECT_EQ(highlighted, 1);
  std::vector<Attributes> onsets = testing::Elements(svg, "line", "onset");
  ASSERT_FALSE(onsets.empty());
  bool leak_line = false;
  for (Attributes& o : onsets) {
    EXPECT_EQ(o["data-rank"], std::to_string(kLeakRank));
    leak_line |= o["data-kind"].find("leak") != std::string::npos;
  }
  EXPECT_TRUE(leak_line);
}

TEST_F(PlotCommandTest, AHealthySimulatedJobHighlightsNobody) {
  ASSERT_TRUE(healthy_ok_);
  std::string svg = Svg("sim-healthy", {"--metric", "floor"});
  Attributes root = testing::Root(svg);
  EXPECT_EQ(root["data-highlighted-rank"], "");
  EXPECT_EQ(root["data-metric"], "floor");
  EXPECT_TRUE(testing::Elements(svg, "line", "onset").empty());
}

// Without step markers every rank's steps are one step 0: drawn on it, nothing could diverge
// (while `memtrace diverged` compares the time buckets and finds the leak).
TEST_F(PlotCommandTest, AJobWithoutStepMarkersIsDrawnByTimeBucketAndSaysSo) {
  ASSERT_TRUE(unmarked_ok_);
  const std::string path = test_util::TmpPath("no-markers.svg");
  CommandRun run = Plot({"--job", "sim-no-markers", "-o", path, "--collector", server_->address()});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(run.err.rfind("memtrace plot: job 'sim-no-markers' has no step markers: plotting 1s "
                          "time buckets (--axis step for its single step)\n",
                          0),
            0u)
      << run.err;
  // The bucket by its time, not its index.
  EXPECT_TRUE(std::regex_search(
      run.err, std::regex(absl::StrCat("rank ", kLeakRank,
                                       " highlighted \\(diverged at 20[0-9-]+ [0-9:]+ bucket\\)"))))
      << run.err;
  const std::string svg = Read(path);
  EXPECT_EQ(testing::Root(svg)["data-highlighted-rank"], std::to_string(kLeakRank));
  for (Attributes& line : testing::Elements(svg, "polyline", "rank-line")) {
    EXPECT_GE(std::stoi(line["data-points"]), 40);
  }

  // --axis step as asked: the single step, no note.
  CommandRun by_step = Plot(
      {"--job", "sim-no-markers", "-o", path, "--axis", "step", "--collector", server_->address()});
  ASSERT_EQ(by_step.code, 0) << by_step.err;
  EXPECT_EQ(by_step.err.find("no step markers"), std::string::npos) << by_step.err;
  for (Attributes& line : testing::Elements(Read(path), "polyline", "rank-line")) {
    EXPECT_EQ(line["data-points"], "1");
  }
}

// --axis time on 8 s steps: 1 s buckets, marked as the collector's analyses read them, in
// windows of whole steps. The onset is found within 2 steps of the leak (1.5 here; bucket by
// bucket it was 2.5).
TEST_F(PlotCommandTest, OnTimeBucketsTheMarksComeFromWindowsOfWholeSteps) {
  ASSERT_TRUE(long_steps_ok_);
  const std::string path = test_util::TmpPath("long-steps.svg");
  CommandRun run = Plot(
      {"--job", "sim-long-steps", "-o", path, "--axis", "time", "--collector", server_->address()});
  ASSERT_EQ(run.code, 0) << run.err;
  const std::string svg = Read(path);
  Attributes root = testing::Root(svg);
  ASSERT_EQ(root["data-highlighted-rank"], std::to_string(kLeakRank)) << run.err;
  const int64_t leak_s =
      (sim::WorkloadOptions().start_ns + kLeakFrom * kLongStepNs) / 1'000'000'000;
  ASSERT_EQ(root["data-bucket-ns"], "1000000000");
  const int64_t onset_s = std::stoll(root["data-onset-bucket"]);
  EXPECT_GE(onset_s, leak_s - 1) << run.err;
  EXPECT_LE(onset_s, leak_s + 2 * kLongStepNs / 1'000'000'000) << run.err;
  for (Attributes& line : testing::Elements(svg, "polyline", "rank-line")) {
    EXPECT_GE(std::stoi(line["data-points"]), 300) << "1 s buckets, not steps";
  }
  bool leak_line = false;
  for (Attributes& o : testing::Elements(svg, "line", "onset")) {
    if (o["data-kind"].find("leak") == std::string::npos) continue;
    leak_line = true;
    EXPECT_EQ(o["data-rank"], std::to_string(kLeakRank));
  }
  EXPECT_TRUE(leak_line) << run.err;
}

// Found by a user: the plot of a job whose rank ran out of memory did not show where; its labels
// stopped at the divergence.
TEST_F(PlotCommandTest, AnOomIsMarkedWhereItHappened) {
  ASSERT_TRUE(oom_ok_);
  const std::string svg = Svg("sim-oom");
  int marks = 0;
  for (Attributes& o : testing::Elements(svg, "line", "onset")) {
    if (o["data-kind"] != "oom") continue;
    ++marks;
    EXPECT_EQ(o["data-rank"], std::to_string(kOomRank));
    EXPECT_EQ(o["data-onset-step"], std::to_string(kOomStep));
  }
  EXPECT_EQ(marks, 1);
  EXPECT_NE(svg.find("rank " + std::to_string(kOomRank) + " out of memory at step " +
                     std::to_string(kOomStep) + " (a "),
            std::string::npos);
  // Not drawn when its rank is not, but said in the subtitle (it was not).
  const std::string without = Svg("sim-oom", {"--ranks", "0-2"});
  for (Attributes& o : testing::Elements(without, "line", "onset")) {
    EXPECT_NE(o["data-kind"], "oom");
  }
  EXPECT_NE(without.find("rank " + std::to_string(kOomRank) + " ran out of memory (not drawn)"),
            std::string::npos);
}

TEST_F(PlotCommandTest, RanksFlagLimitsTheLines) {
  std::string svg = Svg("sim-leak", {"--ranks", "0,3-5", "--metric", "peak"});
  std::vector<Attributes> lines = testing::Elements(svg, "polyline", "rank-line");
  std::vector<std::string> ranks;
  for (Attributes& l : lines) ranks.push_back(l["data-rank"]);
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<std::string>{"0", "3", "4", "5"}));
  EXPECT_EQ(testing::Root(svg)["data-highlighted-rank"], std::to_string(kLeakRank));
  // The line on stderr counts the ranks drawn, of the job's (it said "8 ranks").
  const std::string path = test_util::TmpPath("ranks-summary.svg");
  CommandRun run = Plot(
      {"--job", "sim-leak", "-o", path, "--ranks", "0,3-5", "--collector", server_->address()});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.err.find(": 4 of 8 ranks, "), std::string::npos) << run.err;
}

// --ranks without the diverging rank: the summary said "rank 5 highlighted" and the SVG named it
// in data-highlighted-rank, with no line of it drawn.
TEST_F(PlotCommandTest, ADivergingRankLeftOutByRanksIsNotCalledHighlighted) {
  std::string svg = Svg("sim-leak", {"--ranks", "0-3"});
  EXPECT_EQ(testing::Root(svg)["data-highlighted-rank"], "");
  EXPECT_EQ(testing::Root(svg)["data-onset-step"], "");  // rank 5's leak is not drawn either
  for (Attributes& line : testing::Elements(svg, "polyline", "rank-line")) {
    EXPECT_EQ(line["data-highlighted"], "false") << line["data-rank"];
  }
  EXPECT_NE(svg.find("(rank 5 is not drawn)"), std::string::npos);
  const std::string path = test_util::TmpPath("ranks-without-it.svg");
  CommandRun run =
      Plot({"--job", "sim-leak", "-o", path, "--ranks", "0-3", "--collector", server_->address()});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(run.err.find("highlighted"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("rank 5 diverged at "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find(", not drawn: not in --ranks"), std::string::npos) << run.err;
}

TEST_F(PlotCommandTest, ErrorsNameWhatIsWrong) {
  CommandRun missing =
      Plot({"--job", "sim-leak", "-o", "-", "--ranks", "42", "--collector", server_->address()});
  EXPECT_EQ(missing.code, cli::kExitError);
  EXPECT_NE(missing.err.find("has no rank 42"), std::string::npos) << missing.err;
  EXPECT_EQ(Plot({"--job", "j", "-o", "x.svg", "--metric", "max"}).code, cli::kExitUsage);
  EXPECT_EQ(Plot({"--job", "j"}).code, cli::kExitUsage);
  EXPECT_EQ(Plot({"-o", "x.svg"}).code, cli::kExitUsage);
  CommandRun to_stdout = Plot({"--job", "sim-leak", "-o", "-", "--collector", server_->address()});
  EXPECT_EQ(to_stdout.code, 0);
  EXPECT_EQ(to_stdout.out.rfind("<svg", 0), 0u);
}

}  // namespace
}  // namespace memtrace::exporter
