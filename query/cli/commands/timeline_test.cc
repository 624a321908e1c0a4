#include "query/cli/commands/timeline.h"

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/memtrace/v1/query.grpc.pb.h"
#include "query/cli/commands/fake_analysis_server.h"

namespace memtrace::cli {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

// Two ranks over steps 0..4: rank 0 flat at 100 MiB, rank 1 rising by 10 MiB a step.
v1::TimelineResponse TwoRanks() {
  v1::TimelineResponse response;
  for (uint32_t r = 0; r < 2; ++r) {
    v1::RankTimelineProto* rank = response.add_ranks();
    rank->set_rank(r);
    for (int64_t step = 0; step < 5; ++step) {
      v1::TimelinePoint* p = rank->add_points();
      p->set_key(step);
      p->set_start_ns(1'700'000'000'000'000'000 + step * 1'000'000'000);
      p->set_end_ns(p->start_ns() + 1'000'000'000);
      uint64_t end = (100 + r * 10 * step) * kMiB;
      p->set_floor_bytes(end - kMiB);
      p->set_peak_bytes(end + 50 * kMiB);
      p->set_end_bytes(end);
    }
  }
  return response;
}

std::string Csv(const Table& table) {
  std::ostringstream out;
  WriteCsv(table, out);
  return out.str();
}

TEST(TimelineTableTest, LongFormHasOneRowPerRankAndStepWithTheChangeOfEnd) {
  Table table = TimelineTable(TwoRanks(), TimelineView());
  ASSERT_EQ(table.rows().size(), 10u);
  std::vector<std::string> names;
  for (const Column& c : table.columns()) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"rank", "step", "start", "floor", "peak", "end",
                                             "end_change"}));
  // Rank 1, step 3: end 130 MiB, 10 MiB more than step 2.
  const std::vector<Cell>& row = table.rows()[8];
  EXPECT_EQ(std::get<uint64_t>(row[0]), 1u);
  EXPECT_EQ(std::get<int64_t>(row[1]), 3);
  EXPECT_EQ(std::get<uint64_t>(row[5]), 130 * kMiB);
  EXPECT_EQ(std::get<int64_t>(row[6]), static_cast<int64_t>(10 * kMiB));
  // The first row of each rank has no previous row to compare with.
  EXPECT_TRUE(std::holds_alternative<std::monostate>(table.rows()[5][6]));
}

// A running rank's last row is still being filled: a column marks it, shown only when a rank
// has one, and only on that rank's last row (not on the last row a --steps range shows).
TEST(TimelineTableTest, ARunningRanksLastRowIsMarkedInProgress) {
  v1::TimelineResponse response = TwoRanks();
  response.mutable_ranks(1)->set_last_point_in_progress(true);
  Table table = TimelineTable(response, TimelineView());
  ASSERT_EQ(table.columns().size(), 8u);
  EXPECT_EQ(table.columns()[7].name, "in_progress");
  std::vector<bool> marked;
  for (const auto& row : table.rows()) marked.push_back(std::get<bool>(row[7]));
  EXPECT_EQ(marked, (std::vector<bool>{false, false, false, false, false,  // rank 0
                                       false, false, false, false, true}));
  TimelineView first_steps;
  ASSERT_TRUE(ParseKeyRange("0:2", &first_steps).ok());
  const Table first = TimelineTable(response, first_steps);
  ASSERT_EQ(first.rows().size(), 6u);
  for (const auto& row : first.rows()) EXPECT_FALSE(std::get<bool>(row[7]));
}

// An ended rank's last row that its stream stopped inside (a job an OOM ended) is marked cut
// short: its "end" is where the process stopped, the jump every rank showed in its last step.
TEST(TimelineTableTest, AnEndedRanksLastRowCutShortIsMarked) {
  v1::TimelineResponse response = TwoRanks();
  response.mutable_ranks(0)->set_last_point_cut_short(true);
  Table table = TimelineTable(response, TimelineView());
  ASSERT_EQ(table.columns().size(), 8u);
  EXPECT_EQ(table.columns()[7].name, "cut_short");
  std::vector<bool> marked;
  for (const auto& row : table.rows()) marked.push_back(std::get<bool>(row[7]));
  EXPECT_EQ(marked, (std::vector<bool>{false, false, false, false, true,  // rank 0
                                       false, false, false, false, false}));
}

TEST(TimelineTableTest, StepRangeAndEveryKeepTheLastPointOfEachRank) {
  TimelineView view;
  ASSERT_TRUE(ParseKeyRange("1:4", &view).ok());
  view.every = 2;
  Table table = TimelineTable(TwoRanks(), view);
  // Steps 1..4, every 2nd from the first shown (1, 3) plus the last (4), for both ranks.
  std::vector<int64_t> steps;
  for (const auto& row : table.rows()) steps.push_back(std::get<int64_t>(row[1]));
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 3, 4, 1, 3, 4}));
  // end_change is from the rank's previous row, shown or not (the usage's "since the rank's
  // previous row"): step 3 vs step 2 of rank 1 = 10 MiB, not 20 since the shown step 1; and
  // step 1, the first shown, vs step 0.
  EXPECT_EQ(std::get<int64_t>(table.rows()[4][6]), static_cast<int64_t>(10 * kMiB));
  EXPECT_EQ(std::get<int64_t>(table.rows()[3][6]), static_cast<int64_t>(10 * kMiB));
}

TEST(TimelineTableTest, WideFormHasOneColumnPerRankHoldingTheChosenValue) {
  TimelineView view;
  view.wide = true;
  view.value = TimelineValue::kFloor;
  ASSERT_TRUE(ParseKeyRange("3:", &view).ok());
  EXPECT_EQ(Csv(TimelineTable(TwoRanks(), view)),
            absl::StrCat("step,r0,r1\n", "3,", 99 * kMiB, ",", 129 * kMiB, "\n", "4,", 99 * kMiB,
                         ",", 139 * kMiB, "\n"));
}

TEST(TimelineTableTest, WideFormLeavesMissingStepsEmptyAndNamesAttempts) {
  v1::TimelineResponse response = TwoRanks();
  response.mutable_ranks(1)->set_attempt(1);
  response.mutable_ranks(1)->mutable_points()->RemoveLast();
  TimelineView view;
  view.wide = true;
  ASSERT_TRUE(ParseKeyRange("4", &view).ok());
  EXPECT_EQ(Csv(TimelineTable(response, view)),
            absl::StrCat("step,r0,r1.1\n4,", 100 * kMiB, ",\n"));
}

// --every keeps each rank's last row in the wide form too: rank 1 stopped at step 3 (its job's
// last row is 4), and showed "-" at 4 with its step 3 never shown.
TEST(TimelineTableTest, WideFormWithEveryKeepsTheLastRowOfEachRank) {
  v1::TimelineResponse response = TwoRanks();
  response.mutable_ranks(1)->mutable_points()->RemoveLast();
  TimelineView view;
  view.wide = true;
  view.every = 2;
  Table table = TimelineTable(response, view);
  std::vector<int64_t> steps;
  for (const auto& row : table.rows()) steps.push_back(std::get<int64_t>(row[0]));
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 2, 3, 4}));
  EXPECT_EQ(std::get<uint64_t>(table.rows()[2][2]), 130 * kMiB);  // rank 1's last, step 3
}

TEST(TimelineTableTest, TimeAxisNamesTheKeyColumnBucketAndShowsAttemptsWhenPresent) {
  v1::TimelineResponse response = TwoRanks();
  response.mutable_ranks(0)->set_attempt(2);
  TimelineView view;
  view.axis = v1::TIMELINE_AXIS_TIME;
  Table table = TimelineTable(response, view);
  EXPECT_EQ(table.columns()[1].name, "attempt");
  EXPECT_EQ(table.columns()[2].name, "bucket");
  EXPECT_EQ(std::get<uint64_t>(table.rows()[0][1]), 2u);
}

TEST(ParseKeyRangeTest, AcceptsClosedOpenAndSingleRanges) {
  TimelineView view;
  ASSERT_TRUE(ParseKeyRange("10:20", &view).ok());
  EXPECT_EQ(view.first_key, 10);
  EXPECT_EQ(view.last_key, 20);
  ASSERT_TRUE(ParseKeyRange(":7", &view).ok());
  EXPECT_FALSE(view.first_key.has_value());
  EXPECT_EQ(view.last_key, 7);
  ASSERT_TRUE(ParseKeyRange("5", &view).ok());
  EXPECT_EQ(view.first_key, 5);
  EXPECT_EQ(view.last_key, 5);
}

TEST(ParseKeyRangeTest, RejectsMalformedAndBackwardRanges) {
  for (const char* text : {"", ":", "a:b", "5:3", "1:2:3", "x", "-5", ":-3", "-1:-1", "-5:3"}) {
    TimelineView view;
    absl::Status s = ParseKeyRange(text, &view);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

class TimelineCommandTest : public ::testing::Test {
 protected:
  int Run(std::vector<std::string> args) {
    CommandIo io{out_, err_, "127.0.0.1:1"};
    return TimelineCommand().run(args, io);
  }
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(TimelineCommandTest, RejectsBadValuesOnOneLineWithUsageExitCode) {
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  for (const Case& c : std::vector<Case>{
           {{"--rank", "1"}, "memtrace timeline: --job is required\n"},
           {{"--job", "j", "--value", "peak"},
            "memtrace timeline: --value applies to --wide only\n"},
           {{"--job", "j", "--rank", "abc"},
            "memtrace timeline: --rank: 'abc' is not a rank or a range of ranks\n"},
           {{"--job", "j", "--by", "hour"},
            "memtrace timeline: --by: 'hour' is not step or time\n"},
           {{"--job", "j", "--from", "yesterday"},
            "memtrace timeline: --from: 'yesterday' is not a time: use ns since the epoch, now, "
            "now-15m, -90s, RFC 3339 or "
            "2026-12-02 16:54:03 (UTC, as memtrace prints times)\n"},
           {{"--job", "j", "--from", "1800000000000000200", "--to", "1800000000000000100"},
            "memtrace timeline: --from (2027-01-15 08:00:00.000 UTC, 1800000000000000200 ns) is "
            "after --to (2027-01-15 08:00:00.000 UTC, 1800000000000000100 ns)\n"},
           {{"--job", "j", "--from", "2027-01-15 08:00:02", "--to", "2027-01-15 08:00:01"},
            "memtrace timeline: --from (2027-01-15 08:00:02.000 UTC) is after --to (2027-01-15 "
            "08:00:01.000 UTC)\n"},
           {{"--job", "j", "--every", "0"},
            "memtrace timeline: --every: '0' is not a positive integer\n"},
           {{"--job", "j", "--value", "max"},
            "memtrace timeline: --value: 'max' is not floor, peak or end\n"},
       }) {
    err_.str("");
    EXPECT_EQ(Run(c.args), kExitUsage) << c.args[0];
    EXPECT_EQ(err_.str(), c.error);
  }
  EXPECT_EQ(out_.str(), "");
}

TEST_F(TimelineCommandTest, ReportsAnUnreachableCollectorWithExitCodeOne) {
  EXPECT_EQ(Run({"--job", "j", "--timeout", "3s"}), kExitError);
  EXPECT_TRUE(
      absl::StartsWith(err_.str(), "memtrace timeline: cannot reach collector at 127.0.0.1:1: "))
      << err_.str();
  const std::string err = err_.str();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1);
}

// A Query service answering Timeline as the collector does for a job of three ranks: on the
// step axis one row per step (a single step-0 row per rank when the job has no step markers),
// on the time axis four 1 s buckets per rank. Records the axis of each request.
class FakeTimelineServer final : public v1::Query::Service {
 public:
  // `empty`: ranks without a row (a job whose agents connected and sent nothing yet).
  explicit FakeTimelineServer(bool step_markers, bool empty = false)
      : step_markers_(step_markers), empty_(empty) {
    server_ = StartLoopbackServer(this, &address_);
  }
  ~FakeTimelineServer() override { server_->Shutdown(); }

  grpc::Status Timeline(grpc::ServerContext*, const v1::TimelineRequest* request,
                        v1::TimelineResponse* response) override {
    absl::MutexLock lock(&mu_);
    axes_.push_back(request->axis());
    last_request_ = *request;
    const bool by_time = request->axis() == v1::TIMELINE_AXIS_TIME;
    const int rows = empty_ ? 0 : by_time ? 4 : (step_markers_ ? 5 : 1);
    if (by_time) response->set_bucket_ns(1'000'000'000);
    for (uint32_t r = 0; r < 3; ++r) {
      if (request->has_rank() && request->rank() != r) continue;
      v1::RankTimelineProto* rank = response->add_ranks();
      rank->set_rank(r);
      for (int key = 0; key < rows; ++key) rank->add_points()->set_key(key);
    }
    return grpc::Status::OK;
  }

  std::string address() const { return address_; }
  std::vector<v1::TimelineAxis> axes() {
    absl::MutexLock lock(&mu_);
    return axes_;
  }
  v1::TimelineRequest last_request() {
    absl::MutexLock lock(&mu_);
    return last_request_;
  }

 private:
  const bool step_markers_;
  const bool empty_;
  absl::Mutex mu_;
  std::vector<v1::TimelineAxis> axes_;
  v1::TimelineRequest last_request_;
  std::string address_;
  std::unique_ptr<grpc::Server> server_;
};

struct TimelineRun {
  int code;
  std::vector<std::string> keys;  // the step or bucket column, row by row
  std::string key_column;
  std::string err;
};

TimelineRun RunAgainst(FakeTimelineServer& server, std::vector<std::string> args) {
  std::ostringstream out, err;
  CommandIo io{out, err};
  args.insert(args.end(), {"--format", "csv", "--collector", server.address()});
  TimelineRun run{TimelineCommand().run(args, io), {}, "", err.str()};
  std::vector<std::string> lines = absl::StrSplit(out.str(), '\n', absl::SkipEmpty());
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<std::string> cells = absl::StrSplit(lines[i], ',');
    if (i == 0) {
      run.key_column = cells[1];
    } else {
      run.keys.push_back(cells[1]);
    }
  }
  return run;
}

TEST(TimelineNoStepMarkersTest, UsesTimeBucketsAndSaysSoWhenTheJobHasNoStepMarkers) {
  FakeTimelineServer server(/*step_markers=*/false);
  TimelineRun run = RunAgainst(server, {"--job", "j"});
  ASSERT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(run.key_column, "bucket");
  EXPECT_EQ(run.keys.size(), 12u);  // 3 ranks x 4 buckets, not 3 rows of "step 0"
  EXPECT_EQ(run.err,
            "memtrace timeline: job 'j' has no step markers: one row per 1s time bucket "
            "(--by step for its single step)\n");
  EXPECT_EQ(server.axes(),
            (std::vector<v1::TimelineAxis>{v1::TIMELINE_AXIS_STEP, v1::TIMELINE_AXIS_TIME}));
}

TEST(TimelineNoStepMarkersTest, AnExplicitByStepKeepsTheSingleStep) {
  FakeTimelineServer server(/*step_markers=*/false);
  TimelineRun run = RunAgainst(server, {"--job", "j", "--by", "step"});
  ASSERT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(run.key_column, "step");
  EXPECT_EQ(run.keys, (std::vector<std::string>{"0", "0", "0"}));
  EXPECT_EQ(run.err, "");
}

TEST(TimelineNoStepMarkersTest, AJobWithStepMarkersStaysOnSteps) {
  FakeTimelineServer server(/*step_markers=*/true);
  TimelineRun run = RunAgainst(server, {"--job", "j", "--rank", "1"});
  ASSERT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(run.key_column, "step");
  EXPECT_EQ(run.keys, (std::vector<std::string>{"0", "1", "2", "3", "4"}));
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(server.axes(), std::vector<v1::TimelineAxis>{v1::TIMELINE_AXIS_STEP});
}

// --rank takes a list: a rank beside a few of the cohort, sent as TimelineRequest.ranks (one
// rank as `rank`, which every collector knows). A collector from before `ranks` (this fake, which
// knows `rank` alone) answers with every rank: only those asked for are shown all the same, and
// one the job lacks is named, not left out in silence.
TEST(TimelineRankListTest, ShowsThoseRanksOnlyAndNamesThoseTheJobLacks) {
  FakeTimelineServer server(/*step_markers=*/true);
  std::ostringstream out, err;
  CommandIo io{out, err};
  ASSERT_EQ(TimelineCommand().run({"--job", "j", "--rank", "0,2", "--wide", "--format", "csv",
                                   "--collector", server.address()},
                                  io),
            kExitOk)
      << err.str();
  EXPECT_TRUE(absl::StartsWith(out.str(), "step,r0,r2\n")) << out.str();
  v1::TimelineRequest sent = server.last_request();
  EXPECT_FALSE(sent.has_rank());
  EXPECT_EQ(std::vector<uint32_t>(sent.ranks().begin(), sent.ranks().end()),
            (std::vector<uint32_t>{0, 2}));

  std::ostringstream one_out, one_err;
  CommandIo one_io{one_out, one_err};
  ASSERT_EQ(
      TimelineCommand().run({"--job", "j", "--rank", "1", "--collector", server.address()}, one_io),
      kExitOk)
      << one_err.str();
  sent = server.last_request();
  EXPECT_TRUE(sent.has_rank());
  EXPECT_EQ(sent.rank(), 1u);
  EXPECT_EQ(sent.ranks_size(), 0);

  for (const std::string& list : {"0,5-6", "5-6"}) {
    std::ostringstream none_out, none_err;
    CommandIo none_io{none_out, none_err};
    EXPECT_EQ(TimelineCommand().run({"--job", "j", "--rank", list, "--collector", server.address()},
                                    none_io),
              kExitError)
        << list;
    EXPECT_NE(none_err.str().find("job 'j' has no ranks 5-6 at "), std::string::npos)
        << none_err.str();
    EXPECT_EQ(none_out.str(), "") << list;
  }
}

// A selection with no row printed a bare header and exit 0, which read as "nothing happened".
TEST(TimelineNoStepMarkersTest, AnEmptySelectionSaysSo) {
  FakeTimelineServer server(/*step_markers=*/true);
  TimelineRun run = RunAgainst(server, {"--job", "j", "--steps", "7:9"});
  ASSERT_EQ(run.code, kExitOk) << run.err;
  EXPECT_TRUE(run.keys.empty());
  EXPECT_NE(run.err.find("memtrace timeline: no row of job 'j' in the selection"),
            std::string::npos)
      << run.err;
  // Only the flags given are named.
  EXPECT_NE(run.err.find("(--steps selects step numbers)"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("--from"), std::string::npos) << run.err;
  // On time buckets, what --steps selects is said too.
  FakeTimelineServer unmarked(/*step_markers=*/false);
  run = RunAgainst(unmarked, {"--job", "j", "--steps", "7:9", "--by", "time"});
  EXPECT_NE(run.err.find("--steps on time buckets selects bucket numbers"), std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("--from"), std::string::npos) << run.err;
}

// With no selection, an empty answer is the job's: it spoke of --steps and --from / --to, given
// or not.
TEST(TimelineNoStepMarkersTest, AJobWithNoRowYetSaysSoWithoutNamingFlags) {
  FakeTimelineServer server(/*step_markers=*/true, /*empty=*/true);
  TimelineRun run = RunAgainst(server, {"--job", "j", "--by", "step"});
  ASSERT_EQ(run.code, kExitOk) << run.err;
  EXPECT_TRUE(run.keys.empty());
  EXPECT_EQ(run.err, "memtrace timeline: job 'j' has no step yet\n");
}

}  // namespace
}  // namespace memtrace::cli
