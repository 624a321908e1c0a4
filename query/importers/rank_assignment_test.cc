#include "query/importers/rank_assignment.h"

#include "gtest/gtest.h"

namespace memtrace::importers {
namespace {

std::optional<int32_t> RankOf(absl::string_view path) {
  std::optional<NamedRank> named = RankFromFileName(path);
  return named.has_value() ? std::optional<int32_t>(named->rank) : std::nullopt;
}

KinetoDistributedInfo Info(int32_t rank, std::optional<int32_t> world = std::nullopt) {
  KinetoDistributedInfo info;
  info.rank = rank;
  info.world_size = world;
  return info;
}

TEST(RankFromFileNameTest, ReadsTheCommonSpellings) {
  EXPECT_EQ(RankOf("/traces/rank3.json"), 3);
  EXPECT_EQ(RankOf("worker_rank_12.pt.trace.json.gz"), 12);
  EXPECT_EQ(RankOf("RANK-5.json"), 5);
  EXPECT_EQ(RankOf("hta_rank1_of_2.json.gz"), 1);
  EXPECT_EQ(RankOf("trace_r3.json"), 3);
  EXPECT_EQ(RankOf("job-r07.pt.trace.json"), 7);
}

TEST(RankFromFileNameTest, ReadsTheWorldSizeOfRankKOfN) {
  for (const char* name :
       {"hta_rank1_of_2.json.gz", "rank1of2.json", "rank-1-of-2.json", "RANK_1_OF_2.json"}) {
    std::optional<NamedRank> named = RankFromFileName(name);
    ASSERT_TRUE(named.has_value()) << name;
    EXPECT_EQ(named->rank, 1) << name;
    EXPECT_EQ(named->world_size, 2) << name;
  }
  EXPECT_EQ(RankFromFileName("rank3.json")->world_size, std::nullopt);
  EXPECT_EQ(RankFromFileName("rank3_of_0.json")->world_size, std::nullopt);
  EXPECT_EQ(RankFromFileName("rank3_offload.json")->world_size, std::nullopt);
}

TEST(RankFromFileNameTest, IgnoresNamesWithoutARank) {
  EXPECT_EQ(RankOf("tracelens_h100_qwen1.5-0.5b.json.gz"), std::nullopt);
  EXPECT_EQ(RankOf("frank2.json"), std::nullopt);  // a word, not "rank"
  EXPECT_EQ(RankOf("h100_r3x.json"), std::nullopt);
  EXPECT_EQ(RankOf("rank.json"), std::nullopt);
  // Models, not ranks: 'r' + digits between separators.
  EXPECT_EQ(RankOf("mask_rcnn_r50_fpn.json"), std::nullopt);
  EXPECT_EQ(RankOf("job-r07-host.json"), std::nullopt);
}

// tensorboard_trace_handler writes each rank's traces into a directory of their own.
TEST(RankFromFileNameTest, ReadsTheDirectoryWhenTheBaseNameStatesNone) {
  std::optional<NamedRank> named = RankFromFileName("/data/rank_10/host_123.pt.trace.json");
  ASSERT_TRUE(named.has_value());
  EXPECT_EQ(named->rank, 10);
  EXPECT_EQ(named->source, "directory name");
  EXPECT_EQ(RankFromFileName("rank7/trace.json")->rank, 7);
  EXPECT_EQ(RankFromFileName("/data/rank7/rank2.json")->rank, 2);  // the file's own name first
  EXPECT_EQ(RankFromFileName("/data/rank7/rank2.json")->source, "file name");
  EXPECT_EQ(RankOf("/data/run_r7/trace.json"), std::nullopt);  // "rank" spellings only
  EXPECT_EQ(RankOf("/rank7/x/trace.json"), std::nullopt);      // the parent only
}

TEST(RankAssignerTest, PrefersDistributedInfoThenNameThenOrder) {
  auto plan =
      RankAssigner::Plan({"rank5.json", "a/rank6.json", "model.json"}, {Info(1, 2), {}, {}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->world_size(), 7);  // 3 files, but rank 6 needs at least 7
  auto a = plan->Assign(0, Info(1, 2));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->rank, 1);
  EXPECT_EQ(a->source, "distributedInfo");
  auto b = plan->Assign(1, {});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->rank, 6);
  EXPECT_EQ(b->source, "file name");
  auto c = plan->Assign(2, {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->rank, 0);
  EXPECT_EQ(c->source, "file order");
  // One world size for every file of the import.
  EXPECT_EQ(a->world_size, 7);
  EXPECT_EQ(b->world_size, 7);
  EXPECT_EQ(c->world_size, 7);
}

// Found by a user: qwen and falcon by file order (ranks 0, 1), then hta stating rank 1 in its
// distributedInfo: refused after two files were stored, and no order of the files could import
// all three. A guess now takes no rank another file states.
TEST(RankAssignerTest, FileOrderSkipsRanksThatLaterFilesState) {
  auto plan = RankAssigner::Plan({"qwen.json", "falcon.json", "hta.json"}, {{}, {}, Info(1, 2)});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->Assign(0, {})->rank, 0);
  EXPECT_EQ(plan->Assign(1, {})->rank, 2);
  auto hta = plan->Assign(2, Info(1, 2));
  ASSERT_TRUE(hta.ok()) << hta.status();
  EXPECT_EQ(hta->rank, 1);
  EXPECT_EQ(hta->world_size, 3);
}

TEST(RankAssignerTest, TheWorldSizeIsTheLargestAnyFileStates) {
  // "rank 3 of 4" and "rank 1 of 2" came out of one import.
  auto plan = RankAssigner::Plan({"qwen_rank3.json", "falcon.json"}, {{}, {}});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->Assign(0, {})->world_size, 4);
  auto falcon = plan->Assign(1, {});
  EXPECT_EQ(falcon->rank, 0);
  EXPECT_EQ(falcon->world_size, 4);
  // "_of_4" in a name: rank 1 of 4, not of 2 (the files).
  auto named = RankAssigner::Plan({"falcon_rank1_of_4.json"}, {{}});
  EXPECT_EQ(named->Assign(0, {})->world_size, 4);
  // distributedInfo {"rank": 3, "world_size": 2}: the rank needs a world of 4.
  auto stated = RankAssigner::Plan({"x.json"}, {Info(3, 2)});
  EXPECT_EQ(stated->Assign(0, Info(3, 2))->world_size, 4);
}

// The job's world size (ImplyWorldSize) is taken by files that state none, not by one whose
// distributedInfo, read only after its events, states its own: that one was stored "of 3" for
// its "of 2".
TEST(RankAssignerTest, TheJobsWorldSizeYieldsToAStatedOne) {
  auto plan = RankAssigner::Plan({"late.json"}, {{}});
  ASSERT_TRUE(plan.ok());
  plan->ImplyWorldSize(3);
  EXPECT_EQ(plan->world_size(), 3);
  EXPECT_EQ(plan->Assign(0, Info(1, 2))->world_size, 2);
  auto unstated = RankAssigner::Plan({"plain.json"}, {{}});
  unstated->ImplyWorldSize(3);
  EXPECT_EQ(unstated->Assign(0, {})->world_size, 3);
}

TEST(RankAssignerTest, TwoFilesStatingOneRankAreRefusedBeforeAnyIsImported) {
  auto names = RankAssigner::Plan({"a/rank0.json", "b/trace_r0.json"}, {{}, {}});
  ASSERT_FALSE(names.ok());
  EXPECT_EQ(names.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(names.status().message().find("b/trace_r0.json: rank 0 (from file name)"),
            std::string::npos)
      << names.status();
  EXPECT_NE(names.status().message().find("a/rank0.json"), std::string::npos);
  auto mixed = RankAssigner::Plan({"qwen_rank3.json", "x.json"}, {{}, Info(3)});
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kAlreadyExists);
}

// A distributedInfo after the events is known only once the file is parsed: a clash with a rank
// another file holds or states is refused then, naming both.
TEST(RankAssignerTest, ARankStatedAfterTheEventsCannotTakeAnotherFilesRank) {
  auto plan = RankAssigner::Plan({"a.json", "rank1.json"}, {{}, {}});
  ASSERT_TRUE(plan.ok());
  auto a = plan->Assign(0, Info(1));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(a.status().message().find("a.json: rank 1 (from distributedInfo) is rank1.json's"),
            std::string::npos)
      << a.status();
}

// "rank5_of_4" names no rank of that run: refused before anything is imported (a renamed file or
// a typo, which renaming fixes). Files that state different world sizes are each given the
// largest, and the plan says which state what, for a warning.
TEST(RankAssignerTest, ANameStatingARankOutsideItsWorldIsRefusedAndSizesThatDisagreeAreNamed) {
  auto bad = RankAssigner::Plan({"trace_rank5_of_4.json"}, {{}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "trace_rank5_of_4.json: its file name states rank 5 of 4, not a rank of that world "
            "size; rename it");
  auto mixed = RankAssigner::Plan({"hta.json", "trace_rank3_of_4.json"}, {Info(1, 2), {}});
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(mixed->StatedWorldSizes(),
            (std::map<int32_t, std::string>{{2, "hta.json (distributedInfo)"},
                                            {4, "trace_rank3_of_4.json (file name)"}}));
  EXPECT_EQ(mixed->Assign(0, Info(1, 2))->world_size, 4);
  auto agree = RankAssigner::Plan({"rank0_of_2.json", "rank1_of_2.json"}, {{}, {}});
  EXPECT_EQ(agree->StatedWorldSizes().size(), 1u);
}

TEST(RankAssignerTest, RefusesANegativeRank) {
  EXPECT_EQ(RankAssigner::Plan({"x.json"}, {Info(-1)}).status().code(),
            absl::StatusCode::kDataLoss);  // a bad file: exit 1
  auto plan = RankAssigner::Plan({"x.json"}, {{}});
  EXPECT_EQ(plan->Assign(0, Info(-1)).status().code(), absl::StatusCode::kDataLoss);
}

TEST(RankAssignerTest, TheLargestRankNeedsNoOverflow) {
  auto plan = RankAssigner::Plan({"x.json"}, {Info(INT32_MAX)});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->Assign(0, Info(INT32_MAX))->world_size, INT32_MAX);
}

}  // namespace
}  // namespace memtrace::importers
