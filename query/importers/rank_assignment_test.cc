#include "query/importers/rank_assignment.h"

#include "gtest/gtest.h"

namespace memtrace::importers {
namespace {

TEST(RankFromFileNameTest, ReadsTheCommonSpellings) {
  EXPECT_EQ(RankFromFileName("/traces/rank3.json"), 3);
  EXPECT_EQ(RankFromFileName("worker_rank_12.pt.trace.json.gz"), 12);
  EXPECT_EQ(RankFromFileName("RANK-5.json"), 5);
  EXPECT_EQ(RankFromFileName("hta_rank1_of_2.json.gz"), 1);
  EXPECT_EQ(RankFromFileName("trace_r3.json"), 3);
  EXPECT_EQ(RankFromFileName("job-r07-host.json"), 7);
}

TEST(RankFromFileNameTest, IgnoresNamesWithoutARank) {
  EXPECT_EQ(RankFromFileName("tracelens_h100_qwen1.5-0.5b.json.gz"), std::nullopt);
  EXPECT_EQ(RankFromFileName("frank2.json"), std::nullopt);             // a word, not "rank"
  EXPECT_EQ(RankFromFileName("/data/rank7/trace.json"), std::nullopt);  // directory, not file
  EXPECT_EQ(RankFromFileName("h100_r3x.json"), std::nullopt);
  EXPECT_EQ(RankFromFileName("rank.json"), std::nullopt);
}

TEST(RankAssignerTest, PrefersDistributedInfoThenNameThenOrder) {
  RankAssigner assigner(3);
  KinetoDistributedInfo info;
  info.rank = 1;
  info.world_size = 2;
  auto a = assigner.Assign(0, "rank5.json", info);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->rank, 1);
  EXPECT_EQ(a->world_size, 2);
  EXPECT_EQ(a->source, "distributedInfo");
  auto b = assigner.Assign(1, "rank5.json", {});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->rank, 5);
  EXPECT_EQ(b->source, "file name");
  EXPECT_EQ(b->world_size, 6);  // 3 files, but rank 5 needs at least 6
  auto c = assigner.Assign(2, "model.json", {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->rank, 2);
  EXPECT_EQ(c->source, "file order");
  EXPECT_EQ(c->world_size, 3);
}

TEST(RankAssignerTest, RefusesTwoFilesForOneRankNamingBoth) {
  RankAssigner assigner(2);
  ASSERT_TRUE(assigner.Assign(0, "a/rank0.json", {}).ok());
  auto second = assigner.Assign(1, "b/trace_r0.json", {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(second.status().message().find("b/trace_r0.json: rank 0"), std::string::npos);
  EXPECT_NE(second.status().message().find("a/rank0.json"), std::string::npos);
}

TEST(RankAssignerTest, AFileWithoutARankTakesTheLowestFreeOneWhenItsPositionIsStated) {
  // hta_rank1_of_2 (distributedInfo rank 1) first, a trace stating no rank second: position 1
  // is taken, so it is rank 0, not a refusal after the first file was imported.
  RankAssigner assigner(2);
  KinetoDistributedInfo info;
  info.rank = 1;
  info.world_size = 2;
  ASSERT_TRUE(assigner.Assign(0, "hta_rank1_of_2.json.gz", info).ok());
  auto second = assigner.Assign(1, "tracelens_h100_qwen.json.gz", {});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->rank, 0);
  EXPECT_EQ(second->source, "file order");
}

TEST(RankAssignerTest, RefusesANegativeRank) {
  RankAssigner assigner(1);
  KinetoDistributedInfo info;
  info.rank = -1;
  EXPECT_EQ(assigner.Assign(0, "x.json", info).status().code(),
            absl::StatusCode::kDataLoss);  // a bad file: exit 1
}

}  // namespace
}  // namespace memtrace::importers
