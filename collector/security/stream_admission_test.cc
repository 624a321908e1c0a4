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

TEST(StreamAdmissionTest, ALaterProcessWithTheSamePidOnTheSameHostIsAnotherProducer) {
  // A container restarted under the same hostname can give the new process the old one's pid:
  // its start tells them apart, also after a collector restart (the stored identity keeps it).
  v1::RankIdentity first = Id("j", 3, "pod-7", 1);
  first.set_process_start_ns(1000);
  v1::RankIdentity restarted = first;
  restarted.set_process_start_ns(2000);
  for (bool from_store : {false, true}) {
    StreamAdmission admission(
        8, [&](absl::string_view) -> absl::StatusOr<std::vector<v1::RankSummary>> {
          if (!from_store) return absl::NotFoundError("none");
          std::vector<v1::RankSummary> ranks(1);
          *ranks[0].mutable_identity() = first;
          return ranks;
        });
    if (!from_store) ASSERT_TRUE(admission.Admit(first).ok());
    EXPECT_TRUE(admission.Admit(first).ok()) << "the same process reconnecting";
    absl::Status s = admission.Admit(restarted);
    EXPECT_TRUE(absl::IsAlreadyExists(s)) << s;
    EXPECT_NE(s.message().find("instance 1000"), std::string::npos) << s;
    EXPECT_NE(s.message().find("instance 2000"), std::string::npos) << s;
    // An agent that sends no start (older) is taken by host and pid, as before.
    v1::RankIdentity old_agent = first;
    old_agent.clear_process_start_ns();
    EXPECT_TRUE(admission.Admit(old_agent).ok());
  }
  // Without a launcher rank the later process is another worker, not a second producer.
  StreamAdmission admission(8, NoneStored());
  v1::RankIdentity worker = Id("j", -1, "pod-7", 1);
  worker.set_process_start_ns(1000);
  ASSERT_TRUE(admission.Admit(worker).ok());
  worker.set_process_start_ns(2000);
  EXPECT_TRUE(admission.Admit(worker).ok());
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
