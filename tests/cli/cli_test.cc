// End to end through real processes: an in-process collector on a loopback port 0 over a RocksDB
// dir in the test's tmp dir, the real memtrace-sim binary streaming 8 simulated ranks through the
// real agent Transport, and the real memtrace binary reading them back (outputs and exit codes).
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "collector/server/collector_server.h"
#include "gtest/gtest.h"
#include "simdjson.h"
#include "tests/util/subprocess.h"
#include "tools/sim/recording_sink.h"
#include "tools/sim/workload.h"

namespace memtrace {
namespace {

constexpr char kMemtrace[] = "query/cli/memtrace";
constexpr char kSim[] = "tools/sim/memtrace-sim";
constexpr char kJob[] = "cli-test-job";
constexpr int64_t kStart = 1'700'000'000'000'000'000;

using ::memtrace::test_util::ProcessResult;
using ::memtrace::test_util::ReadFile;
using ::memtrace::test_util::RunProcess;
using ::memtrace::test_util::TmpDir;

// A loopback port nothing listens on: bound by the OS, then closed.
int ClosedLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// CSV output of memtrace (no quoted fields in these tests) as rows of column -> value.
std::vector<std::map<std::string, std::string>> ParseCsv(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  std::vector<std::map<std::string, std::string>> rows;
  if (lines.empty()) return rows;
  std::vector<std::string> header = absl::StrSplit(lines[0], ',');
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> cells = absl::StrSplit(lines[i], ',');
    std::map<std::string, std::string>& row = rows.emplace_back();
    for (size_t c = 0; c < header.size() && c < cells.size(); ++c) row[header[c]] = cells[c];
  }
  return rows;
}

uint64_t U64(const std::string& text) {
  uint64_t v = 0;
  EXPECT_TRUE(absl::SimpleAtoi(text, &v)) << "'" << text << "'";
  return v;
}

// The simulated job, as memtrace-sim is told to play it below.
sim::WorkloadOptions Workload() {
  sim::WorkloadOptions w;
  w.ranks = 8;
  w.steps = 40;
  w.events_per_rank = 100000;  // issue "End-to-end pipeline": 100k events per rank
  w.leak_rank = 5;
  w.leak_from_step = 10;
  w.leak_bytes_per_step = 256 * sim::kMiB;
  w.start_ns = kStart;
  return w;
}

std::vector<std::string> SimArgs(const std::string& collector) {
  return {kSim,
          "--collector",
          collector,
          "--job",
          kJob,
          "--ranks",
          "8",
          "--steps",
          "40",
          "--events_per_rank",
          "100000",
          "--leak_rank",
          "5",
          "--leak_from_step",
          "10",
          "--leak_bytes_per_step",
          "256MiB",
          "--start",
          absl::StrCat(kStart)};
}

// What each rank sent, replayed from the workload itself (not from the collector): the event
// count and the live bytes at the end of every step.
struct Expected {
  uint64_t events = 0;
  std::map<int64_t, uint64_t> end_bytes;
};

Expected Replay(int rank) {
  sim::RecordingSink sink;
  EXPECT_TRUE(sim::PlayRank(Workload(), rank, sink).ok());
  Expected e;
  std::map<uint64_t, uint64_t> live;
  uint64_t bytes = 0;
  int64_t step = 0;
  for (const Event& ev : sink.events()) {
    ++e.events;
    if (ev.kind == EventKind::kStep) {
      e.end_bytes[step] = bytes;
      step = static_cast<int64_t>(ev.aux);
    } else if (ev.kind == EventKind::kAlloc) {
      live[ev.address] = ev.bytes;
      bytes += ev.bytes;
    } else if (ev.kind == EventKind::kFree) {
      bytes -= live[ev.address];
      live.erase(ev.address);
    }
  }
  e.end_bytes[step] = bytes;
  return e;
}

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    StartServer();
    sim_ = std::make_unique<ProcessResult>(RunProcess(SimArgs(Address())));
  }
  static void TearDownTestSuite() {
    server_.reset();
    sim_.reset();
  }

  static void StartServer() {
    collector::CollectorServerOptions options;
    options.listen = "127.0.0.1:0";
    options.store.dir = TmpDir() + "/rocksdb";
    absl::StatusOr<std::unique_ptr<collector::CollectorServer>> server =
        collector::CollectorServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  static std::string Address() { return server_->address(); }

  ProcessResult Memtrace(std::vector<std::string> args) {
    args.insert(args.begin(), kMemtrace);
    args.push_back("--collector");
    args.push_back(Address());
    return RunProcess(args);
  }

  static std::unique_ptr<collector::CollectorServer> server_;
  static std::unique_ptr<ProcessResult> sim_;  // the simulator run every test reads
};

std::unique_ptr<collector::CollectorServer> CliTest::server_;
std::unique_ptr<ProcessResult> CliTest::sim_;

TEST_F(CliTest, SimulatorSucceedsAndLabelsEveryOutputLine) {
  ASSERT_EQ(sim_->exit_code, 0) << sim_->out << sim_->err;
  std::vector<std::string> lines = absl::StrSplit(sim_->out, '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 8u);
  for (const std::string& line : lines) {
    EXPECT_TRUE(absl::StartsWith(line, "memtrace-sim [SIMULATOR]: ")) << line;
  }
  ProcessResult help = RunProcess({kSim, "--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (absl::string_view line : absl::StrSplit(help.out, '\n', absl::SkipEmpty())) {
    EXPECT_TRUE(absl::StartsWith(line, "memtrace-sim [SIMULATOR]:")) << line;
  }
  EXPECT_TRUE(absl::StrContains(help.out, "--leak_rank R"));
}

TEST_F(CliTest, JobsListsTheSimulatedJobWithEveryEventSent) {
  ProcessResult jobs = Memtrace({"jobs", "--format", "json"});
  ASSERT_EQ(jobs.exit_code, 0) << jobs.err;
  uint64_t expected = 0;
  for (int rank = 0; rank < 8; ++rank) expected += Replay(rank).events;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(jobs.out).get(doc), simdjson::SUCCESS) << jobs.out;
  bool found = false;
  for (simdjson::dom::element job : doc.get_array()) {
    if (std::string_view(job["job"]) != kJob) continue;
    found = true;
    EXPECT_EQ(uint64_t(job["ranks"]), 8u);
    EXPECT_EQ(uint64_t(job["events"]), expected);
    EXPECT_GE(int64_t(job["first_event"]), kStart - 1'000'000'000);
  }
  EXPECT_TRUE(found) << jobs.out;
}

TEST_F(CliTest, RanksShowsEveryRankCompleteWithExactlyTheEventsSent) {
  ProcessResult ranks = Memtrace({"ranks", "--job", kJob, "--format", "csv"});
  ASSERT_EQ(ranks.exit_code, 0) << ranks.err;
  std::vector<std::map<std::string, std::string>> rows = ParseCsv(ranks.out);
  ASSERT_EQ(rows.size(), 8u) << ranks.out;
  for (auto& row : rows) {
    const int rank = static_cast<int>(U64(row["rank"]));
    const Expected expected = Replay(rank);
    EXPECT_EQ(U64(row["events"]), expected.events) << rank;
    EXPECT_EQ(U64(row["durable_seq"]), expected.events) << rank;
    EXPECT_EQ(row["complete"], "true") << rank;
    EXPECT_EQ(row["identified_by"], "env") << rank;
    EXPECT_EQ(row["launcher"], "simulator") << rank;
    EXPECT_EQ(row["host"], "sim-node-0") << rank;
    EXPECT_EQ(row["lost"], "0") << rank;
    EXPECT_EQ(row["step"], "39") << rank;
    EXPECT_EQ(U64(row["live"]), expected.end_bytes.at(39)) << rank;
  }
  // The text table is for people: human units.
  ProcessResult table = Memtrace({"ranks", "--job", kJob});
  ASSERT_EQ(table.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(table.out, " GiB")) << table.out;
  EXPECT_TRUE(absl::StartsWith(table.out, "rank  host")) << table.out;
}

TEST_F(CliTest, TimelineEndBytesMatchWhatEachRankSentAndShowTheLeak) {
  ProcessResult timeline = Memtrace({"timeline", "--job", kJob, "--format", "csv"});
  ASSERT_EQ(timeline.exit_code, 0) << timeline.err;
  std::map<int, std::map<int64_t, uint64_t>> end;  // rank -> step -> end bytes
  for (auto& row : ParseCsv(timeline.out)) {
    EXPECT_LE(U64(row["floor"]), U64(row["end"]));
    EXPECT_GE(U64(row["peak"]), U64(row["end"]));
    end[static_cast<int>(U64(row["rank"]))][static_cast<int64_t>(U64(row["step"]))] =
        U64(row["end"]);
  }
  ASSERT_EQ(end.size(), 8u);
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(end[rank], Replay(rank).end_bytes) << "rank " << rank;
  }
  for (int64_t s = 10; s < 40; ++s) {
    EXPECT_EQ(end[5][s] - end[5][s - 1], 256 * sim::kMiB) << s;
    EXPECT_EQ(end[4][s], end[4][s - 1]) << s;
  }
}

TEST_F(CliTest, TimelineFiltersByRankAndStepsAndPrintsWide) {
  ProcessResult wide = Memtrace(
      {"timeline", "--job", kJob, "--rank", "5", "--steps", "10:12", "--wide", "--format", "csv"});
  ASSERT_EQ(wide.exit_code, 0) << wide.err;
  const Expected e = Replay(5);
  EXPECT_EQ(wide.out, absl::StrCat("step,r5\n", "10,", e.end_bytes.at(10), "\n", "11,",
                                   e.end_bytes.at(11), "\n", "12,", e.end_bytes.at(12), "\n"));
  ProcessResult by_time =
      Memtrace({"timeline", "--job", kJob, "--rank", "0", "--by", "time", "--format", "csv"});
  ASSERT_EQ(by_time.exit_code, 0) << by_time.err;
  EXPECT_TRUE(absl::StartsWith(by_time.out, "rank,bucket,start,")) << by_time.out;
  // 40 simulated seconds in 1 s buckets, plus the start-up before step 0.
  EXPECT_GE(ParseCsv(by_time.out).size(), 40u);
  // A window of time: steps that overlap [step 20 start, step 22 start].
  ProcessResult window = Memtrace({"timeline", "--job", kJob, "--rank", "0", "--from",
                                   absl::StrCat(kStart + 20'500'000'000), "--to",
                                   absl::StrCat(kStart + 22'500'000'000), "--format", "csv"});
  ASSERT_EQ(window.exit_code, 0) << window.err;
  std::vector<std::string> steps;
  for (auto& row : ParseCsv(window.out)) steps.push_back(row["step"]);
  EXPECT_EQ(steps, (std::vector<std::string>{"20", "21", "22"}));
}

TEST_F(CliTest, ErrorsAreOneLineWithNonZeroExitCodes) {
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    std::string error_contains;
  };
  for (const Case& c : std::vector<Case>{
           {{"ranks", "--job", "no-such-job"}, 1, "no-such-job"},
           {{"timeline", "--job", "no-such-job"}, 1, "no-such-job"},
           {{"timeline", "--job", kJob, "--rank", "42"}, 1, "42"},
           {{"timeline", "--job", kJob, "--rank", "abc"}, 2, "--rank: 'abc'"},
           {{"jobs", "--format", "yaml"}, 2, "--format: 'yaml'"},
           {{"frobnicate"}, 2, "unknown command 'frobnicate'"},
           {{"ranks"}, 2, "--job is required"},
       }) {
    ProcessResult r = Memtrace(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args[0] << " " << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, c.error_contains)) << r.err;
    EXPECT_TRUE(absl::StartsWith(r.err, "memtrace")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.out, "");
  }
  const std::string down = absl::StrCat("127.0.0.1:", ClosedLoopbackPort());
  ProcessResult r = RunProcess({kMemtrace, "jobs", "--collector", down});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StartsWith(
      r.err, absl::StrCat("memtrace jobs: cannot reach collector at ", down, ": ")))
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  // A bad $MEMTRACE_COLLECTOR is said to be the environment's: the error that follows names
  // --collector, its default, which the user never gave.
  r = RunProcess({"/usr/bin/env", "MEMTRACE_COLLECTOR=garbage", kMemtrace, "jobs"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(absl::StartsWith(r.err,
                               "memtrace: $MEMTRACE_COLLECTOR='garbage': expected host:port "
                               "(--collector's default)\n"))
      << r.err;
  // A simulated run stamped a year ahead would be no time at the collector (time_future): the
  // simulator refuses it before it connects.
  const int64_t next_year = absl::ToUnixNanos(absl::Now() + absl::Hours(24 * 365));
  ProcessResult sim =
      RunProcess({kSim, "--collector", down, "--steps", "10", "--start", absl::StrCat(next_year)});
  EXPECT_EQ(sim.exit_code, 2) << sim.err;
  EXPECT_TRUE(absl::StrContains(sim.err, "--start: the last step would be stamped 8760h"))
      << sim.err;
  EXPECT_EQ(std::count(sim.err.begin(), sim.err.end(), '\n'), 1) << sim.err;
  // At half wall-clock speed sending falls behind the stamps: step 0 leads the most.
  const int64_t in_an_hour = absl::ToUnixNanos(absl::Now() + absl::Hours(1));
  sim = RunProcess({kSim, "--collector", down, "--steps", "1000", "--speed", "0.5", "--start",
                    absl::StrCat(in_an_hour)});
  EXPECT_EQ(sim.exit_code, 2) << sim.err;
  EXPECT_TRUE(absl::StrContains(sim.err, "--start: step 0 would be stamped 59m")) << sim.err;
  // An invalid workload is reported as such, not as a --start beyond reach.
  sim =
      RunProcess({kSim, "--collector", down, "--steps", "-5", "--start", absl::StrCat(next_year)});
  EXPECT_EQ(sim.exit_code, 2) << sim.err;
  EXPECT_TRUE(absl::StrContains(sim.err, "steps")) << sim.err;
  EXPECT_FALSE(absl::StrContains(sim.err, "--start")) << sim.err;
  // 3M events on 4 ranks make 936 layers whose rounded allocations take 80 GiB in step 0: every
  // rank ran out of memory there and the run of 7155 events each reported success.
  sim = RunProcess({kSim, "--collector", down, "--ranks", "4", "--steps", "200",
                    "--events_per_rank", "3000000"});
  EXPECT_EQ(sim.exit_code, 2) << sim.err;
  EXPECT_TRUE(
      absl::StrContains(sim.err,
                        "--events_per_rank 3000000 over --steps 200: step 0 of the simulated "
                        "model (936 layers, "))
      << sim.err;
  EXPECT_TRUE(absl::StrContains(sim.err, "every rank would run out of memory in it")) << sim.err;
  // Which way fits depends on the model; the advice names a layer count that does.
  EXPECT_TRUE(absl::StrContains(sim.err,
                                "With 468 layers it fits: pass --layers 468, or fewer "
                                "events per step"))
      << sim.err;
  EXPECT_EQ(std::count(sim.err.begin(), sim.err.end(), '\n'), 1) << sim.err;
  // 1000 events over 40 steps make 1 layer, whose activations do not fit at once: the advice
  // was "fewer --layers or --events_per_rank", the wrong way.
  sim = RunProcess(
      {kSim, "--collector", down, "--ranks", "2", "--steps", "40", "--events_per_rank", "1000"});
  EXPECT_EQ(sim.exit_code, 2) << sim.err;
  EXPECT_TRUE(absl::StrContains(sim.err,
                                "With 8 layers it fits: pass --layers 8, or more events "
                                "per step"))
      << sim.err;
  // Given --layers, only --layers makes the layers: the advice names no other flag for them.
  sim = RunProcess({kSim, "--collector", down, "--ranks", "2", "--steps", "40", "--layers", "1"});
  EXPECT_EQ(sim.exit_code, 2) << sim.err;
  EXPECT_TRUE(absl::StrContains(sim.err, "With 8 layers it fits: pass --layers 8; or more --ranks"))
      << sim.err;
  // On 3 ranks a 2000-event model fits step 0 but not step 1, where the optimizer state made in
  // step 0 is live: it ran, every rank out of memory in step 1.
  sim = RunProcess({kSim, "--collector", down, "--ranks", "3", "--events_per_rank", "2000"});
  EXPECT_EQ(sim.exit_code, 2) << sim.err;
  EXPECT_TRUE(absl::StrContains(
      sim.err, "--events_per_rank 2000 over --steps 100: step 1 of the simulated model"))
      << sim.err;
}

TEST_F(CliTest, HelpListsTheCommands) {
  ProcessResult help = RunProcess({kMemtrace, "--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (const char* command : {"jobs", "ranks", "timeline", "help"}) {
    EXPECT_TRUE(absl::StrContains(help.out, absl::StrCat("\n  ", command, " "))) << command;
  }
  ProcessResult timeline_help = RunProcess({kMemtrace, "help", "timeline"});
  EXPECT_EQ(timeline_help.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(timeline_help.out, "--by step|time"));
}

// The simulator run twice under one --job: each run is another process for the job's ranks.
// The second was refused ("already streamed"); it is stored as attempt 1, and says so.
TEST_F(CliTest, ASimulatorRunAgainUnderItsJobIsItsNextAttempt) {
  const std::vector<std::string> run = {
      kSim,      "--collector", Address(),           "--job", "twice",   "--ranks",           "4",
      "--steps", "10",          "--events_per_rank", "500",   "--start", absl::StrCat(kStart)};
  ProcessResult first = RunProcess(run);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_FALSE(absl::StrContains(first.out, "stored as attempt")) << first.out;
  ProcessResult second = RunProcess(run);
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_TRUE(absl::StrContains(second.out,
                                "job 'twice' already held these ranks from an earlier run: stored "
                                "as attempt 1 (the analyses read each rank's latest)"))
      << second.out;
  ProcessResult ranks = Memtrace({"ranks", "--job", "twice", "--format", "csv"});
  ASSERT_EQ(ranks.exit_code, 0) << ranks.err;
  EXPECT_EQ(std::count(ranks.out.begin(), ranks.out.end(), '\n'), 9) << ranks.out;  // header + 8
}

// The hint the simulator ends with is pasted into a shell: a job id with a space was two words.
TEST_F(CliTest, TheSimulatorsReadBackHintIsOneShellWordPerJob) {
  ProcessResult run =
      RunProcess({kSim, "--collector", Address(), "--job", "a b/c", "--ranks", "4", "--steps", "3",
                  "--events_per_rank", "500", "--start", absl::StrCat(kStart)});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_TRUE(absl::StrContains(
      run.out, "read it back: memtrace ranks --job 'a b/c'; memtrace timeline --job 'a b/c'"))
      << run.out;
}

TEST_F(CliTest, SimulatedFollowersDivergeInTheOrderTheirLeaksBegan) {
  // Rank 5 leaks from step 20 and rank 2, planted with --also_leak, from step 45.
  ProcessResult sim =
      RunProcess({kSim, "--collector", Address(), "--job", "followers", "--ranks", "8", "--steps",
                  "80", "--events_per_rank", "5000", "--leak_rank", "5", "--leak_from_step", "20",
                  "--also_leak", "2:45", "--start", absl::StrCat(kStart)});
  ASSERT_EQ(sim.exit_code, 0) << sim.out << sim.err;
  EXPECT_TRUE(absl::StrContains(
      sim.out,
      "planted: leak on rank 5 from step 20, +256 MiB/step (tag leak:cache), and on rank "
      "2 from step 45\n"))
      << sim.out;
  ProcessResult diverged = Memtrace({"diverged", "--job", "followers"});
  ASSERT_EQ(diverged.exit_code, 0) << diverged.err;
  EXPECT_TRUE(absl::StrContains(diverged.out, "rank 5 diverged first")) << diverged.out;
  EXPECT_TRUE(absl::StrContains(diverged.out, "1 other rank followed")) << diverged.out;
  // The table's rows: "#  rank  host  onset ...".
  std::vector<std::vector<std::string>> rows;
  for (absl::string_view line : absl::StrSplit(diverged.out, '\n')) {
    std::vector<std::string> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (cells.size() > 4 && (cells[0] == "1" || cells[0] == "2")) rows.push_back(cells);
  }
  ASSERT_EQ(rows.size(), 2u) << diverged.out;
  EXPECT_EQ(rows[0][1], "5");
  EXPECT_EQ(rows[1][1], "2");
  const auto onset = [](const std::vector<std::string>& row) { return std::stoi(row[3]); };
  EXPECT_GE(onset(rows[0]), 20);
  EXPECT_LE(onset(rows[0]), 25);
  EXPECT_GE(onset(rows[1]), 45);
  EXPECT_LE(onset(rows[1]), 50);
}

// Last: replaces the shared collector by a new one over the same RocksDB dir.
TEST_F(CliTest, ARestartedCollectorAnswersTheSameFromRocksDb) {
  ProcessResult before = Memtrace({"ranks", "--job", kJob, "--format", "csv"});
  ProcessResult timeline_before = Memtrace({"timeline", "--job", kJob, "--format", "csv"});
  ASSERT_EQ(before.exit_code, 0);
  server_->Shutdown();
  server_.reset();
  StartServer();
  ProcessResult after = Memtrace({"ranks", "--job", kJob, "--format", "csv"});
  ProcessResult timeline_after = Memtrace({"timeline", "--job", kJob, "--format", "csv"});
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_EQ(after.out, before.out);
  EXPECT_EQ(timeline_after.out, timeline_before.out);
}

// The simulator against a collector that requires a token: it takes MEMTRACE_TOKEN from its
// environment, as the agents and the other commands do (its streams were refused,
// UNAUTHENTICATED, whatever the environment said).
TEST(CliTokenTest, TheSimulatorSendsTheTokenOfItsEnvironment) {
  collector::CollectorServerOptions options;
  options.listen = "127.0.0.1:0";
  options.store.dir = TmpDir() + "/rocksdb-token";
  options.security.token = "s3cret";
  absl::StatusOr<std::unique_ptr<collector::CollectorServer>> server =
      collector::CollectorServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::vector<std::string> sim = {kSim,
                                        "--collector",
                                        (*server)->address(),
                                        "--job",
                                        "tok",
                                        "--ranks",
                                        "8",
                                        "--steps",
                                        "10",
                                        "--events_per_rank",
                                        "2000",
                                        "--drain_timeout",
                                        "2s"};
  ProcessResult refused = RunProcess(sim);
  EXPECT_NE(refused.exit_code, 0) << refused.out;
  EXPECT_TRUE(absl::StrContains(refused.out + refused.err, "UNAUTHENTICATED"))
      << refused.out << refused.err;
  setenv("MEMTRACE_TOKEN", "s3cret", 1);
  ProcessResult run = RunProcess(sim);
  unsetenv("MEMTRACE_TOKEN");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  absl::StatusOr<std::vector<v1::RankSummary>> ranks = (*server)->store().ListRanks("tok");
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  EXPECT_EQ(ranks->size(), 8u);
}

}  // namespace
}  // namespace memtrace
