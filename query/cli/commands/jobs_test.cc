#include "query/cli/commands/jobs.h"

#include <sstream>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/memtrace/v1/query.grpc.pb.h"
#include "query/cli/commands/fake_analysis_server.h"

namespace memtrace::cli {
namespace {

TEST(JobsTableTest, ShowsEachJobWithItsSpan) {
  v1::ListJobsResponse response;
  v1::JobSummary* job = response.add_jobs();
  job->set_job_id("sim-1");
  job->set_ranks(8);
  job->set_events(800000);
  job->set_first_ts_ns(1'700'000'000'000'000'000);
  job->set_last_ts_ns(1'700'000'100'500'000'000);
  job->set_restarts(2);
  job->set_subprocesses(3);
  job->set_parents(1);
  v1::JobSummary* empty = response.add_jobs();
  empty->set_job_id("no-events");

  std::ostringstream text, csv;
  WriteText(JobsTable(response), text);
  EXPECT_EQ(text.str(),
            "job        ranks  events  first_event              last_event                  span  "
            "restarts  subprocesses  parents\n"
            "sim-1          8  800000  2023-11-14 22:13:20.000  2023-11-14 22:15:00.500  1m40.5s   "
            "      2             3        1\n"
            "no-events      0       0  -                        -                              -   "
            "      0             0        0\n");
  WriteCsv(JobsTable(response), csv);
  EXPECT_EQ(csv.str(),
            "job,ranks,events,first_event,last_event,span,restarts,subprocesses,parents\n"
            "sim-1,8,800000,1700000000000000000,1700000100500000000,100500000000,2,3,1\n"
            "no-events,0,0,0,0,,0,0,0\n");
}

TEST(JobsCommandTest, AnAddressWithAnOutOfRangePortIsABadCommandLine) {
  std::ostringstream out, err;
  CommandIo io{out, err};
  EXPECT_EQ(JobsCommand().run({"--collector", "127.0.0.1:99999"}, io), kExitUsage);
  EXPECT_EQ(err.str(), "memtrace jobs: --collector='127.0.0.1:99999': port must be 1..65535\n");
  EXPECT_EQ(out.str(), "");
}

// A collector with no job answered with a header alone, which read as a listing that failed.
TEST(JobsCommandTest, ACollectorWithNoJobSaysSo) {
  class NoJobs final : public v1::Query::Service {
    grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*,
                          v1::ListJobsResponse*) override {
      return grpc::Status::OK;
    }
  } service;
  std::string address;
  std::unique_ptr<grpc::Server> server = StartLoopbackServer(&service, &address);
  std::ostringstream out, err;
  CommandIo io{out, err};
  EXPECT_EQ(JobsCommand().run({"--format", "csv", "--collector", address}, io), kExitOk);
  EXPECT_EQ(out.str(),
            "job,ranks,events,first_event,last_event,span,restarts,subprocesses,parents\n");
  EXPECT_EQ(err.str(), "memtrace jobs: the collector at " + address + " has no job stored\n");
  server->Shutdown();
}

TEST(JobsCommandTest, PrintsHelpWithItsFlags) {
  std::ostringstream out, err;
  CommandIo io{out, err};
  EXPECT_EQ(JobsCommand().run({"--help"}, io), kExitOk);
  EXPECT_NE(out.str().find("Usage: memtrace jobs"), std::string::npos);
  EXPECT_NE(out.str().find("--timeout DURATION"), std::string::npos);
  EXPECT_EQ(err.str(), "");
}

}  // namespace
}  // namespace memtrace::cli
