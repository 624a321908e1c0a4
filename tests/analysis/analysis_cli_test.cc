// The analyses end to end: simulated jobs with planted answers streamed by 8 real agent
// Transports (tools/sim runner, one per rank) into an in-process collector on a loopback port 0
// over a RocksDB dir in the test's tmp dir, then asked through the real `memtrace` binary as a
// subprocess. Answers are read from --format json, parsed into the report messages.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "collector/server/collector_server.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/memtrace/v1/analysis.pb.h"
#include "tests/util/subprocess.h"
#include "tools/sim/recording_sink.h"
#include "tools/sim/runner.h"
#include "tools/sim/workload.h"

namespace memtrace {
namespace {

constexpr char kMemtrace[] = "query/cli/memtrace";
constexpr int kLeakRank = 5;
constexpr int64_t kLeakFrom = 30;
constexpr int kOomRank = 3;
constexpr int64_t kOomStep = 60;
constexpr char kLeakTag[] = "leak:cache";

using ::memtrace::test_util::ProcessResult;
using ::memtrace::test_util::ReadFile;
using ::memtrace::test_util::RunProcess;
using ::memtrace::test_util::TmpDir;

// 8 ranks x 70 steps, ~1 k events per rank; the layer count is fixed so that a longer replay of
// the same job (headroom's ground truth) has the same steps.
sim::WorkloadOptions Base() {
  sim::WorkloadOptions w;
  w.ranks = 8;
  w.steps = 70;
  w.layers = 4;
  return w;
}

sim::WorkloadOptions LeakJob() {
  sim::WorkloadOptions w = Base();
  w.leak_rank = kLeakRank;
  w.leak_from_step = kLeakFrom;
  w.leak_bytes_per_step = 256 * sim::kMiB;
  w.leak_tag = kLeakTag;
  return w;
}

sim::WorkloadOptions GradAccumJob() {
  sim::WorkloadOptions w = Base();
  w.grad_accum = true;
  return w;
}

sim::WorkloadOptions HealthyJob() {
  sim::WorkloadOptions w = Base();
  w.spikes = true;
  return w;
}

sim::WorkloadOptions OomJob() {
  sim::WorkloadOptions w = Base();
  w.oom_rank = kOomRank;
  w.oom_step = kOomStep;
  w.leak_tag = kLeakTag;
  return w;
}

// RL-style steps (rollout, weight_sync, actor_update) where each rollout keeps part of its KV
// cache: rollout memory still live during training, on every rank.
sim::WorkloadOptions PhasesJob() {
  sim::WorkloadOptions w = Base();
  w.phases = true;
  w.rollout_leak = true;
  return w;
}

sim::WorkloadOptions PhasesWithoutStepMarkersJob() {
  sim::WorkloadOptions w = PhasesJob();
  w.step_markers = false;
  return w;
}

// No step markers, two hosts whose clocks disagree by 30 s (node 1 ahead), and a leak on rank
// 12 (node 1) from step 30, i.e. 30 s after the start. Without the collector's clock alignment
// node 1's time buckets would sit 30 buckets late and the onset would read 60 s in.
constexpr int kSkewedLeakRank = 12;
constexpr int64_t kSkewNs = 30'000'000'000;
sim::WorkloadOptions SkewedClocksJob() {
  sim::WorkloadOptions w = LeakJob();
  w.ranks = 16;
  w.ranks_per_node = 8;
  w.leak_rank = kSkewedLeakRank;
  w.step_markers = false;
  w.clock_skew_per_node_ns = kSkewNs;
  return w;
}

// No step markers and 10 s steps: each step spans ten of the collector's 1 s buckets, whose floors
// swing by the activations within it.
constexpr int64_t kLongStepNs = 10'000'000'000;
sim::WorkloadOptions LongStepsJob() {
  sim::WorkloadOptions w = LeakJob();
  w.step_markers = false;
  w.step_ns = kLongStepNs;
  return w;
}

// longsteps with its step markers.
sim::WorkloadOptions LongStepsMarkedJob() {
  sim::WorkloadOptions w = LongStepsJob();
  w.step_markers = true;
  return w;
}

sim::WorkloadOptions FourSecondStepsJob() {
  sim::WorkloadOptions w = LongStepsJob();
  w.step_ns = 4'000'000'000;
  return w;
}

// Headroom's planted answer, from the workload alone: play the leaking rank far past the test's
// last step; the simulated device runs out (the simulator records an OOM and stops) in the step
// where its peak plus the memory used outside traced allocations no longer fits.
int64_t StepLeakReachesCapacity(sim::WorkloadOptions w) {
  w.steps = 1000;
  sim::RecordingSink sink;
  EXPECT_TRUE(sim::PlayRank(w, kLeakRank, sink).ok());
  int64_t step = 0;
  for (const Event& e : sink.events()) {
    if (e.kind == EventKind::kStep) step = static_cast<int64_t>(e.aux);
    if (e.kind == EventKind::kOom) return step;
  }
  ADD_FAILURE() << "the leak never reaches the device's capacity in 1000 steps";
  return -1;
}

class AnalysisCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    collector::CollectorServerOptions options;
    options.listen = "127.0.0.1:0";
    options.store.dir = TmpDir() + "/rocksdb";
    // First a job in 500 ms buckets (--bucket_ms 500); a job keeps the width it began with when
    // the collector is restarted with the default 1 s for the others.
    options.store.bucket_ns = 500'000'000;
    absl::StatusOr<std::unique_ptr<collector::CollectorServer>> server =
        collector::CollectorServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    StoreJob("longsteps-500ms", LongStepsJob());
    server_.reset();
    options.store.bucket_ns = 1'000'000'000;
    server = collector::CollectorServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    const std::vector<std::pair<std::string, sim::WorkloadOptions>> jobs = {
        {"leak", LeakJob()},
        {"gradacc", GradAccumJob()},
        {"healthy", HealthyJob()},
        {"oom", OomJob()},
        {"phases", PhasesJob()},
        {"skewed", SkewedClocksJob()},
        {"longsteps", LongStepsJob()},
        {"foursteps", FourSecondStepsJob()},
        {"longsteps-marked", LongStepsMarkedJob()},
        {"phases-no-steps", PhasesWithoutStepMarkersJob()}};
    for (const auto& [job, workload] : jobs) StoreJob(job, workload);
  }
  static void StoreJob(const std::string& job, const sim::WorkloadOptions& workload) {
    sim::SimulationOptions sim;
    sim.workload = workload;
    sim.job_id = job;
    sim.collector_address = server_->address();
    absl::StatusOr<std::vector<sim::RankOutcome>> outcomes =
        sim::RunSimulation(sim, [](const std::string&) {});
    ASSERT_TRUE(outcomes.ok()) << job << ": " << outcomes.status();
    for (const sim::RankOutcome& o : *outcomes) {
      // The OOM rank's stream ends at its OOM; every rank's events must all be durable.
      ASSERT_TRUE(o.status.ok()) << job << " rank " << o.rank << ": " << o.status;
    }
  }
  static void TearDownTestSuite() { server_.reset(); }

  void SetUp() override { ASSERT_NE(server_, nullptr); }

  static ProcessResult Memtrace(std::vector<std::string> args) {
    args.insert(args.begin(), kMemtrace);
    args.push_back("--collector");
    args.push_back(server_->address());
    return RunProcess(args);
  }

  // Runs a command with --format json and parses its report.
  template <typename Report>
  static Report Json(std::vector<std::string> args) {
    args.push_back("--format");
    args.push_back("json");
    ProcessResult r = Memtrace(args);
    Report report;
    EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
    EXPECT_EQ(r.err, "");
    const auto parsed = google::protobuf::util::JsonStringToMessage(r.out, &report);
    EXPECT_TRUE(parsed.ok()) << parsed.ToString() << "\n" << r.out;
    return report;
  }

  static std::unique_ptr<collector::CollectorServer> server_;
};

std::unique_ptr<collector::CollectorServer> AnalysisCliTest::server_;

TEST_F(AnalysisCliTest, DivergedNamesTheLeakingRankAtThePlantedStep) {
  auto report = Json<v1::DivergenceReport>({"diverged", "--job", "leak"});
  ASSERT_EQ(report.status(), v1::DIVERGENCE_STATUS_DIVERGED) << report.DebugString();
  ASSERT_GE(report.diverged_size(), 1);
  const v1::RankDivergence& first = report.diverged(0);
  EXPECT_EQ(first.rank(), static_cast<uint32_t>(kLeakRank));
  const int64_t window = report.params().persistence_steps();
  EXPECT_GE(window, 1);
  EXPECT_GE(first.onset_step(), kLeakFrom - window);
  EXPECT_LE(first.onset_step(), kLeakFrom + window);
  EXPECT_GT(first.excess_bytes(), 0);
  EXPECT_EQ(first.direction(), 1);
  // Nobody followed: the leak is on one rank.
  EXPECT_EQ(report.diverged_size(), 1) << report.DebugString();
  EXPECT_EQ(report.ranks(), 8u);
}

TEST_F(AnalysisCliTest, WithoutStepMarkersRanksAreComparedInCollectorTimeBuckets) {
  auto report = Json<v1::DivergenceReport>({"diverged", "--job", "skewed"});
  ASSERT_EQ(report.status(), v1::DIVERGENCE_STATUS_DIVERGED) << report.DebugString();
  EXPECT_NE(report.message().find("no step markers"), std::string::npos) << report.message();
  EXPECT_EQ(report.ranks(), 16u);
  ASSERT_EQ(report.diverged_size(), 1) << report.DebugString();
  const v1::RankDivergence& first = report.diverged(0);
  EXPECT_EQ(first.rank(), static_cast<uint32_t>(kSkewedLeakRank));
  // Buckets are 1 s of collector time; the leak began 30 s (true time) after step 0.
  const int64_t start_bucket = SkewedClocksJob().start_ns / 1'000'000'000;
  const int64_t window = report.params().persistence_steps();
  EXPECT_GE(first.onset_step(), start_bucket + kLeakFrom - window) << report.DebugString();
  EXPECT_LE(first.onset_step(), start_bucket + kLeakFrom + window) << report.DebugString();

  // Each rank's stored clock estimate: node 1 is 30 s ahead, to within a loopback round trip.
  ProcessResult ranks = Memtrace({"ranks", "--job", "skewed", "--format", "json"});
  ASSERT_EQ(ranks.exit_code, 0) << ranks.err;
  google::protobuf::ListValue rows;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(ranks.out, &rows).ok()) << ranks.out;
  ASSERT_EQ(rows.values_size(), 16);
  for (const google::protobuf::Value& row : rows.values()) {
    const auto& f = row.struct_value().fields();
    ASSERT_TRUE(f.contains("clock_offset_ns") && f.contains("clock_round_trip_ns")) << ranks.out;
    const int64_t rank = static_cast<int64_t>(f.at("rank").number_value());
    // JSON numbers are doubles: exact to well under a microsecond at 30 s.
    const double offset = f.at("clock_offset_ns").number_value();
    const double round_trip = f.at("clock_round_trip_ns").number_value();
    const double want = rank >= 8 ? -static_cast<double>(kSkewNs) : 0;
    EXPECT_LE(std::abs(offset - want), round_trip / 2 + 1000) << "rank " << rank;
    EXPECT_GT(round_trip, 0) << "rank " << rank;
    // A loopback round trip; a loaded 2-core machine stretched one to 117 ms.
    EXPECT_LT(round_trip, 2e9) << "rank " << rank;
  }
}

// Read bucket by bucket, 10 s steps without markers hid a leak: headroom called the leaking rank
// flat, leaks dated it minutes early, diverged missed it. The collector reads such buckets in
// windows of whole steps.
TEST_F(AnalysisCliTest, WithoutStepMarkersLongStepsAreComparedInWindowsOfWholeSteps) {
  const int64_t leak_ns = LongStepsJob().start_ns + kLeakFrom * kLongStepNs;
  auto divergence = Json<v1::DivergenceReport>({"diverged", "--job", "longsteps"});
  ASSERT_EQ(divergence.status(), v1::DIVERGENCE_STATUS_DIVERGED) << divergence.DebugString();
  EXPECT_GT(divergence.bucket_ns(), 1'000'000'000) << "not windowed";
  EXPECT_LE(divergence.bucket_ns(), kLongStepNs);
  // Asked for by --axis time, the buckets are read in the same windows, and the answers are the
  // default's (bucket by bucket, headroom called the leaking rank flat under --axis time only).
  auto by_time = Json<v1::DivergenceReport>({"diverged", "--job", "longsteps", "--axis", "time"});
  EXPECT_EQ(by_time.bucket_ns(), divergence.bucket_ns());
  ASSERT_EQ(by_time.diverged_size(), divergence.diverged_size()) << by_time.DebugString();
  if (by_time.diverged_size() > 0) {
    EXPECT_EQ(by_time.diverged(0).onset_step(), divergence.diverged(0).onset_step());
  }
  auto headroom_by_time =
      Json<v1::HeadroomReport>({"headroom", "--job", "longsteps", "--axis", "time"});
  EXPECT_EQ(headroom_by_time.forecasts(), 1u) << headroom_by_time.DebugString();
  ASSERT_EQ(divergence.diverged_size(), 1) << divergence.DebugString();
  EXPECT_EQ(divergence.diverged(0).rank(), static_cast<uint32_t>(kLeakRank));
  const int64_t persistence = divergence.params().persistence_steps();
  EXPECT_LE(std::abs(divergence.diverged(0).onset_step() * divergence.bucket_ns() - leak_ns),
            persistence * divergence.bucket_ns())
      << divergence.DebugString();

  auto leaks = Json<v1::LeakReport>({"leaks", "--job", "longsteps"});
  for (const v1::RankCurve& c : leaks.curves()) {
    if (c.rank() != static_cast<uint32_t>(kLeakRank)) {
      EXPECT_NE(c.curve(), v1::CURVE_CLASS_LEAK) << c.rank();
      continue;
    }
    EXPECT_EQ(c.curve(), v1::CURVE_CLASS_LEAK);
    // 256 MiB a 10 s step, per window.
    const double per_window = 256.0 * sim::kMiB * leaks.bucket_ns() / kLongStepNs;
    EXPECT_NEAR(c.evidence().floor_bytes_per_step(), per_window, per_window / 10);
    EXPECT_LE(std::abs(c.evidence().rising_since_step() * leaks.bucket_ns() - leak_ns),
              2 * kLongStepNs);
  }

  auto headroom = Json<v1::HeadroomReport>({"headroom", "--job", "longsteps"});
  for (const v1::RankHeadroom& h : headroom.entries()) {
    EXPECT_EQ(h.status(), h.rank() == static_cast<uint32_t>(kLeakRank)
                              ? v1::HEADROOM_STATUS_FORECAST
                              : v1::HEADROOM_STATUS_FLAT)
        << h.rank();
  }
}

// Found by a user: one run with step markers and the same run without them. Read by step and
// by bucket, the same leak was "128 MiB/step" vs "64.0 MiB/bucket", changed, and so were the
// forecasts. Both are read by time then, and the runs agree.
TEST_F(AnalysisCliTest, AJobWithStepMarkersAndOneWithoutAreBothReadByTime) {
  auto report =
      Json<v1::CompareReport>({"compare", "--job", "longsteps-marked", "--job", "longsteps"});
  bool axis_seen = false;
  for (const v1::CompareItem& item : report.items()) {
    if (item.analysis() == "axis") {
      axis_seen = true;
      EXPECT_EQ(item.subject(), "compared by (longsteps has no step markers: both read by time)");
    }
    EXPECT_FALSE(item.changed()) << item.DebugString();
  }
  EXPECT_TRUE(axis_seen) << report.DebugString();
}

// Two jobs whose own windows of whole steps differ (10 s and 4 s steps) are compared in one: the
// axis read "8s vs 5s time buckets, changed" and every rate per bucket in other units.
TEST_F(AnalysisCliTest, CompareReadsTwoJobsWithoutStepMarkersInOneWindow) {
  const int64_t ten = Json<v1::DivergenceReport>({"diverged", "--job", "longsteps"}).bucket_ns();
  const int64_t four = Json<v1::DivergenceReport>({"diverged", "--job", "foursteps"}).bucket_ns();
  ASSERT_NE(ten, four) << "the case needs two windows";
  auto report = Json<v1::CompareReport>({"compare", "--job", "longsteps", "--job", "foursteps"});
  bool axis_seen = false;
  for (const v1::CompareItem& item : report.items()) {
    // Peaks of time buckets, not "highest step peak".
    if (item.analysis() == "peak" && item.subject().find("highest") == 0) {
      EXPECT_EQ(item.subject(), "highest time-bucket peak");
    }
    if (item.analysis() != "axis") continue;
    axis_seen = true;
    EXPECT_FALSE(item.changed()) << item.DebugString();
    EXPECT_EQ(item.a(), item.b());
  }
  EXPECT_TRUE(axis_seen) << report.DebugString();
  // So too with --axis time, whose buckets are read in windows as well.
  auto by_time = Json<v1::CompareReport>(
      {"compare", "--job", "longsteps", "--job", "foursteps", "--axis", "time"});
  axis_seen = false;
  for (const v1::CompareItem& item : by_time.items()) {
    if (item.analysis() != "axis") continue;
    axis_seen = true;
    EXPECT_FALSE(item.changed()) << item.DebugString();
  }
  EXPECT_TRUE(axis_seen) << by_time.DebugString();
}

// The same job stored in 500 ms and in 1 s buckets (collectors started with other --bucket_ms):
// compared as stored, its leak read 128 MiB/bucket beside 256, "changed". Both are read in one
// window, a whole number of either's buckets, and nothing changed.
TEST_F(AnalysisCliTest, CompareReadsJobsStoredAtOtherBucketWidthsInOneWindow) {
  auto report =
      Json<v1::CompareReport>({"compare", "--job", "longsteps", "--job", "longsteps-500ms"});
  bool axis_seen = false, growth_seen = false;
  for (const v1::CompareItem& item : report.items()) {
    EXPECT_FALSE(item.changed()) << item.DebugString();
    axis_seen |= item.analysis() == "axis";
    growth_seen |= item.analysis() == "growth";
  }
  EXPECT_TRUE(axis_seen && growth_seen) << report.DebugString();
  // Each job alone keeps its own buckets' windows, and its rates per second agree.
  const std::string a = Memtrace({"growth", "--job", "longsteps"}).out;
  const std::string b = Memtrace({"growth", "--job", "longsteps-500ms"}).out;
  EXPECT_NE(a.find("25.6 MiB/s"), std::string::npos) << a;
  EXPECT_NE(b.find("25.6 MiB/s"), std::string::npos) << b;
}

TEST_F(AnalysisCliTest, GrowthByTagAndRankNamesThePlantedTagOnTheLeakingRankOnly) {
  auto report = Json<v1::GrowthReport>({"growth", "--job", "leak", "--by", "tag,rank"});
  EXPECT_EQ(report.by(), v1::GROWTH_BY_TAG_RANK);
  ASSERT_GE(report.groups_size(), 1) << report.DebugString();
  for (const v1::GroupGrowth& g : report.groups()) {
    EXPECT_EQ(g.name(), kLeakTag) << report.DebugString();
    EXPECT_EQ(g.rank(), static_cast<uint32_t>(kLeakRank));
    EXPECT_EQ(g.scope(), v1::GROWTH_SCOPE_SOME_RANKS);
  }
  // By source library: the allocator library that made the leaked blocks, on rank 5 only.
  auto source = Json<v1::GrowthReport>({"growth", "--job", "leak", "--by", "source,rank"});
  ASSERT_EQ(source.groups_size(), 1) << source.DebugString();
  EXPECT_EQ(source.groups(0).name(), "libc10_cuda.so");
  EXPECT_EQ(source.groups(0).rank(), static_cast<uint32_t>(kLeakRank));
  // Fitted over the last 30 steps, all after the leak began: the planted 256 MiB per step.
  auto recent =
      Json<v1::GrowthReport>({"growth", "--job", "leak", "--by", "tag,rank", "--window", "30"});
  ASSERT_EQ(recent.groups_size(), 1) << recent.DebugString();
  EXPECT_NEAR(recent.groups(0).total_bytes_per_step(), 256.0 * (1 << 20), 16.0 * (1 << 20));
}

TEST_F(AnalysisCliTest, GradientAccumulationGrowsOnEveryRankWithoutADivergingRank) {
  auto growth = Json<v1::GrowthReport>({"growth", "--job", "gradacc", "--by", "tag"});
  ASSERT_GE(growth.groups_size(), 1) << growth.DebugString();
  EXPECT_EQ(growth.groups(0).scope(), v1::GROWTH_SCOPE_ALL_RANKS) << growth.DebugString();
  EXPECT_EQ(growth.groups(0).ranks_growing(), 8u);
  auto by_rank = Json<v1::GrowthReport>({"growth", "--job", "gradacc", "--by", "rank"});
  std::set<uint32_t> growing;
  for (const v1::GroupGrowth& g : by_rank.groups()) growing.insert(g.rank());
  EXPECT_EQ(growing.size(), 8u) << by_rank.DebugString();

  auto diverged = Json<v1::DivergenceReport>({"diverged", "--job", "gradacc"});
  EXPECT_EQ(diverged.status(), v1::DIVERGENCE_STATUS_NONE_DIVERGED) << diverged.DebugString();
  EXPECT_EQ(diverged.diverged_size(), 0);
}

TEST_F(AnalysisCliTest, HealthyJobWithSpikesHasNoDivergenceNoLeakNoForecast) {
  auto diverged = Json<v1::DivergenceReport>({"diverged", "--job", "healthy"});
  EXPECT_EQ(diverged.status(), v1::DIVERGENCE_STATUS_NONE_DIVERGED) << diverged.DebugString();
  EXPECT_EQ(diverged.diverged_size(), 0);

  auto leaks = Json<v1::LeakReport>({"leaks", "--job", "healthy"});
  EXPECT_EQ(leaks.leaking_ranks(), 0u) << leaks.DebugString();
  ASSERT_EQ(leaks.curves_size(), 8);
  int spiky = 0;
  for (const v1::RankCurve& c : leaks.curves()) {
    EXPECT_NE(c.curve(), v1::CURVE_CLASS_LEAK) << "rank " << c.rank();
    spiky += c.curve() == v1::CURVE_CLASS_SPIKES;
  }
  EXPECT_EQ(spiky, 8) << leaks.DebugString();

  auto growth = Json<v1::GrowthReport>({"growth", "--job", "healthy"});
  EXPECT_EQ(growth.groups_size(), 0) << growth.DebugString();

  auto headroom = Json<v1::HeadroomReport>({"headroom", "--job", "healthy"});
  EXPECT_EQ(headroom.forecasts(), 0u) << headroom.DebugString();
  ASSERT_EQ(headroom.entries_size(), 8);
  for (const v1::RankHeadroom& h : headroom.entries()) {
    EXPECT_EQ(h.status(), v1::HEADROOM_STATUS_FLAT) << "rank " << h.rank();
    EXPECT_EQ(h.forecast_step(), -1);
  }
}

TEST_F(AnalysisCliTest, LeaksClassifiesTheLeakingRankAndListsThePlantedTag) {
  auto leaks = Json<v1::LeakReport>({"leaks", "--job", "leak", "--rank", "5"});
  ASSERT_EQ(leaks.curves_size(), 1);
  EXPECT_EQ(leaks.curves(0).curve(), v1::CURVE_CLASS_LEAK) << leaks.DebugString();
  ASSERT_GE(leaks.candidates_size(), 1);
  EXPECT_EQ(leaks.candidates(0).tag(), kLeakTag);
  EXPECT_GE(leaks.candidates(0).distinct_steps(), 30u);
  auto all = Json<v1::LeakReport>({"leaks", "--job", "leak"});
  EXPECT_EQ(all.leaking_ranks(), 1u) << all.DebugString();
}

TEST_F(AnalysisCliTest, LiveAtOomListsThePlantedTagFirst) {
  auto live = Json<v1::LiveReport>(
      {"live", "--job", "oom", "--rank", absl::StrCat(kOomRank), "--at-oom", "--top", "5"});
  ASSERT_TRUE(live.has_oom()) << live.DebugString();
  EXPECT_EQ(live.oom().step(), kOomStep);
  EXPECT_GT(live.oom().requested_bytes(), 0u);
  EXPECT_EQ(live.rank(), static_cast<uint32_t>(kOomRank));
  EXPECT_EQ(live.other_ranks(), 7u);
  ASSERT_GE(live.groups_size(), 1);
  EXPECT_LE(live.groups_size(), 5);
  EXPECT_EQ(live.groups(0).tag(), kLeakTag) << live.DebugString();
  // The other ranks hold none of it.
  EXPECT_EQ(live.groups(0).others_max_bytes(), 0u);

  ProcessResult no_oom = Memtrace({"live", "--job", "oom", "--rank", "0", "--at-oom"});
  EXPECT_EQ(no_oom.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(no_oom.err, "OOM")) << no_oom.err;
  EXPECT_EQ(std::count(no_oom.err.begin(), no_oom.err.end(), '\n'), 1) << no_oom.err;
}

TEST_F(AnalysisCliTest, HeadroomForecastsTheLinearLeakWithinTenPercent) {
  const int64_t planted = StepLeakReachesCapacity(LeakJob());
  ASSERT_GT(planted, 70);
  auto headroom = Json<v1::HeadroomReport>({"headroom", "--job", "leak"});
  EXPECT_EQ(headroom.forecasts(), 1u) << headroom.DebugString();
  ASSERT_GE(headroom.entries_size(), 1);
  const v1::RankHeadroom& first = headroom.entries(0);  // soonest first
  EXPECT_EQ(first.rank(), static_cast<uint32_t>(kLeakRank));
  ASSERT_EQ(first.status(), v1::HEADROOM_STATUS_FORECAST) << headroom.DebugString();
  EXPECT_TRUE(first.capacity_from_samples());
  EXPECT_NEAR(static_cast<double>(first.forecast_step()), static_cast<double>(planted),
              0.1 * static_cast<double>(planted))
      << "planted " << planted << "\n"
      << headroom.DebugString();
  EXPECT_GT(first.eta_ns(), 0);
  for (int i = 1; i < headroom.entries_size(); ++i) {
    EXPECT_NE(headroom.entries(i).status(), v1::HEADROOM_STATUS_FORECAST);
  }
  // With a smaller device the same leak arrives sooner.
  auto small = Json<v1::HeadroomReport>({"headroom", "--job", "leak", "--capacity", "60GiB"});
  ASSERT_GE(small.entries_size(), 1);
  EXPECT_FALSE(small.entries(0).capacity_from_samples());
  EXPECT_LT(small.entries(0).forecast_step(), first.forecast_step());
}

TEST_F(AnalysisCliTest, PeakByPhaseListsThePhases) {
  auto peak = Json<v1::PeakReport>({"peak", "--job", "phases", "--by", "phase"});
  std::set<std::string> phases;
  for (const v1::PeakSummary& s : peak.summaries()) {
    phases.insert(s.group());
    EXPECT_EQ(s.ranks(), 8u) << s.group();
    EXPECT_GT(s.max_peak_bytes(), 0u);
  }
  EXPECT_EQ(phases, (std::set<std::string>{"actor_update", "rollout", "weight_sync"}));
  EXPECT_EQ(peak.entries_size(), 3 * 8);
  // A job without phases answers with none.
  auto none = Json<v1::PeakReport>({"peak", "--job", "healthy", "--by", "phase"});
  EXPECT_EQ(none.summaries_size(), 0);
  // Unless --by phase was asked for, by rank, saying so: by phase it had no answer at all.
  ProcessResult by_default = Memtrace({"peak", "--job", "healthy"});
  EXPECT_EQ(by_default.exit_code, 0) << by_default.err;
  EXPECT_EQ(by_default.err,
            "memtrace peak: job 'healthy' has no phase in its steps so far: peak by rank (--by "
            "phase for the phases' empty answer)\n");
  EXPECT_NE(by_default.out.find("job healthy: peak by rank over 8 ranks"), std::string::npos)
      << by_default.out;
  // A job with phases keeps the default.
  ProcessResult phased = Memtrace({"peak", "--job", "phases"});
  EXPECT_EQ(phased.err, "");
  EXPECT_NE(phased.out.find("peak by phase"), std::string::npos) << phased.out;
}

TEST_F(AnalysisCliTest, LeaksNamesRolloutMemoryLiveAfterTheRollout) {
  auto leaks = Json<v1::LeakReport>({"leaks", "--job", "phases"});
  std::set<uint32_t> survivor_ranks, residue_ranks;
  for (const v1::PhaseSurvivor& s : leaks.phase_survivors()) {
    if (s.phase() == "rollout" && s.tag() == "rollout:kv_cache") survivor_ranks.insert(s.rank());
  }
  for (const v1::PhaseResidue& r : leaks.phase_residues()) {
    EXPECT_EQ(r.phase(), "rollout");
    residue_ranks.insert(r.rank());
  }
  EXPECT_EQ(survivor_ranks.size(), 8u) << leaks.DebugString();
  EXPECT_EQ(residue_ranks.size(), 8u) << leaks.DebugString();
}

// Found by a user: without step markers every allocation's step is 0, so the KV cache each
// rollout kept read as one run's, listed after the optimizer's state made once. The runs are
// told apart by time bucket there.
TEST_F(AnalysisCliTest, WithoutStepMarkersWhatEachRolloutKeptIsListedFirst) {
  auto leaks = Json<v1::LeakReport>({"leaks", "--job", "phases-no-steps"});
  ASSERT_GT(leaks.phase_survivors_size(), 0) << leaks.DebugString();
  const v1::PhaseSurvivor& first = leaks.phase_survivors(0);
  EXPECT_EQ(first.phase(), "rollout") << leaks.DebugString();
  EXPECT_EQ(first.tag(), "rollout:kv_cache") << leaks.DebugString();
  EXPECT_GT(first.distinct_steps(), 10u) << first.DebugString();
  for (const v1::PhaseSurvivor& s : leaks.phase_survivors()) {
    if (s.tag() != "rollout:kv_cache") {
      EXPECT_EQ(s.distinct_steps(), 1u) << s.DebugString();  // made once, by one run
    }
  }
}

TEST_F(AnalysisCliTest, CompareRunsTheAnalysesOnBothJobs) {
  auto report = Json<v1::CompareReport>({"compare", "--job", "healthy", "--job", "leak"});
  EXPECT_EQ(report.job_a(), "healthy");
  EXPECT_EQ(report.job_b(), "leak");
  EXPECT_EQ(report.a().diverged().diverged_size(), 0);
  ASSERT_GE(report.b().diverged().diverged_size(), 1);
  EXPECT_EQ(report.b().diverged().diverged(0).rank(), static_cast<uint32_t>(kLeakRank));
  bool changed = false;
  for (const v1::CompareItem& item : report.items()) changed |= item.changed();
  EXPECT_TRUE(changed) << report.DebugString();
}

TEST_F(AnalysisCliTest, TablesAreReadableAndErrorsAreOneLine) {
  ProcessResult table = Memtrace({"diverged", "--job", "leak"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_TRUE(absl::StartsWith(table.out, "job leak: ")) << table.out;
  EXPECT_TRUE(absl::StrContains(table.out, "onset")) << table.out;
  std::vector<std::string> lines = absl::StrSplit(table.out, '\n', absl::SkipEmpty());
  bool rank5 = false;
  for (const std::string& line : lines) {
    std::vector<std::string> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (cells.size() > 2 && cells[0] == "1" && cells[1] == "5") rank5 = true;
  }
  EXPECT_TRUE(rank5) << table.out;

  ProcessResult healthy = Memtrace({"diverged", "--job", "healthy"});
  EXPECT_EQ(healthy.exit_code, 0);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"growth", "--job", "leak", "--by", "tag,rank"},
        std::vector<std::string>{"leaks", "--job", "leak"},
        std::vector<std::string>{"peak", "--job", "phases"},
        std::vector<std::string>{"headroom", "--job", "leak"},
        std::vector<std::string>{"compare", "--job", "leak", "--job", "healthy"}}) {
    ProcessResult r = Memtrace(args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
    EXPECT_FALSE(r.out.empty()) << args[0];
  }
  ProcessResult live = Memtrace({"live", "--job", "oom", "--rank", "3", "--at-oom"});
  ASSERT_EQ(live.exit_code, 0) << live.err;
  EXPECT_TRUE(absl::StrContains(live.out, kLeakTag)) << live.out;

  ProcessResult unknown = Memtrace({"growth", "--job", "no-such-job"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_TRUE(absl::StartsWith(unknown.err, "memtrace growth: ")) << unknown.err;
  EXPECT_TRUE(absl::StrContains(unknown.err, "no-such-job")) << unknown.err;
  EXPECT_EQ(std::count(unknown.err.begin(), unknown.err.end(), '\n'), 1) << unknown.err;
  EXPECT_EQ(unknown.out, "");

  ProcessResult usage = Memtrace({"live", "--job", "oom"});
  EXPECT_EQ(usage.exit_code, 2);
  ProcessResult help = RunProcess({kMemtrace, "help", "growth"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(help.out, "--by tag|rank|tag,rank|source|source,rank")) << help.out;
}

}  // namespace
}  // namespace memtrace
