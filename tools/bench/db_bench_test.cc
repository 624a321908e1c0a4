#include "tools/bench/db_bench.h"

#include <unistd.h>

#include <cstdlib>

#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"

namespace memtrace::bench {
namespace {

TEST(DbBenchTest, ParsesTheFillseqLine) {
  absl::StatusOr<DbBenchResult> r = ParseFillseq(
      "Keys:       20 bytes each\n"
      "... finished 100 ops                              \r"
      "fillseq      :    1943.047 micros/op 4098 ops/sec 9.759 seconds 40000 operations;  "
      "207.3 MB/s\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->ops_per_second, 4098);
  EXPECT_DOUBLE_EQ(r->micros_per_op, 1943.047);
  EXPECT_DOUBLE_EQ(r->mb_per_second, 207.3);
  EXPECT_FALSE(ParseFillseq("Keys: 20 bytes\nDB path: x\n").ok());
}

TEST(DbBenchTest, CommandCarriesTheCollectorsShape) {
  DbBenchOptions o;
  o.dir = "/tmp/x y";
  o.value_size = 53000;
  o.threads = 8;
  const std::string cmd = DbBenchCommand(o, 1234);
  for (const char* want :
       {"--benchmarks=fillseq", "--key_size=20", "--value_size=53000", "--batch_size=1",
        "--threads=8", "--sync=1", "--compression_type=lz4", "'/tmp/x y'", "--num=1234"}) {
    EXPECT_NE(cmd.find(want), std::string::npos) << want << " in " << cmd;
  }
}

TEST(DbBenchTest, RealRunReportsARate) {
  DbBenchOptions o;
  if (access(o.binary.c_str(), X_OK) != 0) GTEST_SKIP() << "no db_bench (rocksdb-tools)";
  o.dir = test_util::TmpPath("dbb");
  o.sync = false;
  o.seconds = 1;
  o.expected_ops_per_second = 100000;
  absl::StatusOr<DbBenchResult> r = RunDbBench(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->ops_per_second, 1000);
}

TEST(DbBenchTest, MissingBinaryIsUnavailable) {
  DbBenchOptions o;
  o.binary = "/nonexistent/db_bench";
  EXPECT_EQ(RunDbBench(o).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace memtrace::bench
