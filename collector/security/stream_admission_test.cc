#include "collector/security/stream_admission.h"

#include "gtest/gtest.h"

namespace memtrace::security {
namespace {

v1::RankIdentity Id(const std::string& job, int32_t rank, const std::string& host, uint32_t pid,
                    uint32_t attempt = 0) {
  v1::RankIdentity id;
  id.set_job_id(job);
  id.set_rank(rank);
  id.set_host(host);
  id.set_pid(pid);
  id.set_attempt(attempt);
  id.set_device_index(0);
  return id;
}

StreamAdmission::RankLister NoneStored() {
  return [](absl::string_view job) -> absl::StatusOr<std::vector<v1::RankSummary>> {
    return absl::NotFoundError(std::string(job));
  };
}

TEST(StreamAdmissionTest, ReconnectOfTheSameProcessIsAdmitted) {
  StreamAdmission admission(8, NoneStored());
  EXPECT_TRUE(admission.Admit(Id("j", 0, "a", 1)).ok());
  EXPECT_TRUE(admission.Admit(Id("j", 0, "a", 1)).ok());
}

TEST(StreamAdmissionTest, SameRankFromAnotherHostIsAlreadyExists) {
  StreamAdmission admission(8, NoneStored());
  ASSERT_TRUE(admission.Admit(Id("j", 3, "node-a", 100)).ok());
  absl::Status s = admission.Admit(Id("j", 3, "node-b", 200));
  EXPECT_TRUE(absl::IsAlreadyExists(s)) << s;
  EXPECT_NE(s.message().find("node-a"), std::string::npos) << s;
  EXPECT_NE(s.message().find("node-b"), std::string::npos) << s;
  // Another attempt or another job is a different stream.
  EXPECT_TRUE(admission.Admit(Id("j", 3, "node-b", 200, 1)).ok());
  EXPECT_TRUE(admission.Admit(Id("k", 3, "node-b", 200)).ok());
}

TEST(StreamAdmissionTest, RanksBeyondTheLimitAreResourceExhausted) {
  StreamAdmission admission(2, NoneStored());
  EXPECT_TRUE(admission.Admit(Id("j", 0, "a", 1)).ok());
  EXPECT_TRUE(admission.Admit(Id("j", 1, "a", 2)).ok());
  absl::Status s = admission.Admit(Id("j", 2, "a", 3));
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_NE(s.message().find("--max_ranks_per_job"), std::string::npos);
  // Known ranks (new attempts included) still come in; other jobs have their own budget.
  EXPECT_TRUE(admission.Admit(Id("j", 1, "a", 9, 1)).ok());
  EXPECT_TRUE(admission.Admit(Id("other", 7, "a", 3)).ok());
}

TEST(StreamAdmissionTest, WorkersWithoutRankCountByHostDevicePid) {
  StreamAdmission admission(2, NoneStored());
  EXPECT_TRUE(admission.Admit(Id("j", -1, "a", 1)).ok());
  EXPECT_TRUE(admission.Admit(Id("j", -1, "a", 1)).ok());
  EXPECT_TRUE(admission.Admit(Id("j", -1, "a", 2)).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(admission.Admit(Id("j", -1, "b", 1))));
}

TEST(StreamAdmissionTest, WhatTheStoreHoldsCountsAfterARestart) {
  int lister_calls = 0;
  StreamAdmission admission(
      2, [&lister_calls](absl::string_view) -> absl::StatusOr<std::vector<v1::RankSummary>> {
        ++lister_calls;
        std::vector<v1::RankSummary> ranks(2);
        *ranks[0].mutable_identity() = Id("j", 0, "node-a", 10);
        *ranks[1].mutable_identity() = Id("j", 1, "node-a", 11);
        return ranks;
      });
  EXPECT_TRUE(admission.Admit(Id("j", 0, "node-a", 10)).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(admission.Admit(Id("j", 1, "node-z", 99))));
  EXPECT_TRUE(absl::IsResourceExhausted(admission.Admit(Id("j", 2, "node-a", 12))));
  EXPECT_EQ(lister_calls, 1);
}

TEST(StreamAdmissionTest, ListerErrorIsPassedOn) {
  StreamAdmission admission(2, [](absl::string_view) -> absl::StatusOr<std::vector<v1::RankSummary>> {
    return absl::DataLossError("corrupt");
  });
  EXPECT_TRUE(absl::IsDataLoss(admission.Admit(Id("j", 0, "a", 1))));
}

TEST(StreamAdmissionTest, ZeroLimitMeansUnbounded) {
  StreamAdmission admission(0, NoneStored());
  for (int r = 0; r < 1000; ++r) ASSERT_TRUE(admission.Admit(Id("j", r, "a", r)).ok());
}

}  // namespace
}  // namespace memtrace::security
