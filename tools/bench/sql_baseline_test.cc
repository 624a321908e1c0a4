#include "tools/bench/sql_baseline.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"
#include "tools/bench/job_loader.h"

namespace memtrace::bench {
namespace {

class SqlBaselineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    collector::EventStoreOptions o;
    o.dir = JobDir();
    auto store = collector::EventStore::Open(o);
    ASSERT_TRUE(store.ok()) << store.status();
    sim::WorkloadOptions w;
    w.ranks = 6;
    w.steps = 50;
    w.events_per_rank = 4000;
    w.leak_rank = 4;
    w.leak_from_step = 20;
    absl::StatusOr<LoadedJob> job = LoadSimulatedJob(**store, "sqljob", w);
    ASSERT_TRUE(job.ok()) << job.status();
    events_ = job->events;
  }
  static SqlParams Params() {
    SqlParams p;
    p.live_rank = 4;
    p.live_at_ns = 1'700'000'000'000'000'000 + 45'000'000'000;  // step 45 of the simulator
    p.other_ranks = {0, 1};
    return p;
  }
  static std::string JobDir() { return test_util::TmpPath("sqljob"); }
  static uint64_t events_;
};
uint64_t SqlBaselineTest::events_ = 0;

TEST_F(SqlBaselineTest, ExportWritesOneRowPerStoredEventAndTheStringTables) {
  absl::StatusOr<CsvExport> csv = ExportJobCsv(JobDir(), "sqljob", test_util::TmpPath("csv1"));
  ASSERT_TRUE(csv.ok()) << csv.status();
  EXPECT_EQ(csv->rows, events_);
  std::ifstream in(csv->events_csv);
  std::string line;
  uint64_t lines = 0;
  std::getline(in, line);
  EXPECT_EQ(line, "rank,seq,ts,kind,address,bytes,tag");
  while (std::getline(in, line)) ++lines;
  EXPECT_EQ(lines, events_);
  std::ifstream strings(csv->strings_csv);
  std::string all((std::istreambuf_iterator<char>(strings)), std::istreambuf_iterator<char>());
  EXPECT_NE(all.find("\"leak:cache\""), std::string::npos);
}

TEST_F(SqlBaselineTest, SqliteFindsThePlantedDivergenceAndTheLiveLeak) {
  absl::StatusOr<CsvExport> csv = ExportJobCsv(JobDir(), "sqljob", test_util::TmpPath("csv2"));
  ASSERT_TRUE(csv.ok());
  absl::StatusOr<SqlRun> run = RunSqlite(*csv, SqliteQuestions(Params()), 1, absl::Seconds(60));
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->questions.size(), 2u);
  EXPECT_EQ(run->questions[0].name, "diverged");
  EXPECT_EQ(run->questions[0].answer.rfind("4,", 0), 0u) << run->questions[0].answer;
  EXPECT_NE(run->questions[1].answer.find("leak:cache"), std::string::npos)
      << run->questions[1].answer;
  EXPECT_GT(run->load_ms, 0);
  EXPECT_GT(run->questions[0].cold_ms, 0);
}

// DuckDB needs node and the npm package; the bench installs it, a hermetic test cannot. Point
// MEMTRACE_BENCH_DUCKDB_DIR at an installed copy (the bench's cache) to run this test.
TEST_F(SqlBaselineTest, DuckDbAnswersAllFourQuestionsLikeTheAnalyses) {
  const char* module_dir = getenv("MEMTRACE_BENCH_DUCKDB_DIR");
  if (module_dir == nullptr) GTEST_SKIP() << "MEMTRACE_BENCH_DUCKDB_DIR not set";
  absl::StatusOr<CsvExport> csv = ExportJobCsv(JobDir(), "sqljob", test_util::TmpPath("csv3"));
  ASSERT_TRUE(csv.ok());
  absl::StatusOr<SqlRun> run =
      RunDuckDb(module_dir, *csv, DuckDbQuestions(Params()), 1, 2, absl::Seconds(120));
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->questions.size(), 4u);
  EXPECT_NE(run->questions[0].answer.find("\"rank\":4"), std::string::npos)
      << run->questions[0].answer;
  EXPECT_NE(run->questions[1].answer.find("leak:cache"), std::string::npos)
      << run->questions[1].answer;
  EXPECT_NE(run->questions[2].answer.find("\"rank\":4"), std::string::npos)
      << run->questions[2].answer;
  EXPECT_NE(run->questions[3].answer.find("leak:cache"), std::string::npos)
      << run->questions[3].answer;
}

}  // namespace
}  // namespace memtrace::bench
