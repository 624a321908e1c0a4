#include "collector/security/stream_admission.h"

#include <functional>
#include <vector>

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
  absl::Status s = admission.Admit(Id("j", 3, "node-b", 200)).status();
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
    absl::Status s = admission.Admit(restarted).status();
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
  absl::Status s = admission.Admit(Id("j", 2, "a", 3)).status();
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
  EXPECT_TRUE(absl::IsResourceExhausted(admission.Admit(Id("j", -1, "b", 1)).status()));
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
  EXPECT_TRUE(absl::IsAlreadyExists(admission.Admit(Id("j", 1, "node-z", 99)).status()));
  EXPECT_TRUE(absl::IsResourceExhausted(admission.Admit(Id("j", 2, "node-a", 12)).status()));
  EXPECT_EQ(lister_calls, 1);
}

TEST(StreamAdmissionTest, ListerErrorIsPassedOn) {
  StreamAdmission admission(2, [](absl::string_view) -> absl::StatusOr<std::vector<v1::RankSummary>> {
    return absl::DataLossError("corrupt");
  });
  EXPECT_TRUE(absl::IsDataLoss(admission.Admit(Id("j", 0, "a", 1)).status()));
}

TEST(StreamAdmissionTest, ZeroLimitMeansUnbounded) {
  StreamAdmission admission(0, NoneStored());
  for (int r = 0; r < 1000; ++r) ASSERT_TRUE(admission.Admit(Id("j", r, "a", r)).ok());
}

// A Ray actor restarted in a new process, or a job rerun under the same id: the rank's stream
// belongs to a process that has gone. Asked for (agents ask), the new one is the next attempt.
TEST(StreamAdmissionTest, ANewProcessForARankWhoseHolderHasGoneIsItsNextAttempt) {
  StreamAdmission admission(8, NoneStored());
  absl::StatusOr<AdmissionTicket> first = admission.Admit(Id("j", 3, "node-a", 100), true);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->attempt(), 0u);
  EXPECT_TRUE(first->reassigned().empty());
  // While the holder is connected, another process claiming the rank is refused either way.
  absl::Status live = admission.Admit(Id("j", 3, "node-b", 200), true).status();
  EXPECT_TRUE(absl::IsAlreadyExists(live)) << live;
  EXPECT_NE(live.message().find("while it is connected"), std::string::npos) << live;

  *first = AdmissionTicket();  // node-a's stream ends
  absl::StatusOr<AdmissionTicket> second = admission.Admit(Id("j", 3, "node-b", 200), true);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->attempt(), 1u);
  EXPECT_NE(second->reassigned().find("job \"j\" rank 3 attempt 0 was streamed by host "
                                      "\"node-a\" pid 100, which has gone: host \"node-b\" pid "
                                      "200 is stored as attempt 1"),
            std::string::npos)
      << second->reassigned();
  // node-b reconnecting (its Hello still says attempt 0) goes on as attempt 1.
  absl::StatusOr<AdmissionTicket> again = admission.Admit(Id("j", 3, "node-b", 200), true);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->attempt(), 1u);
  // Another process while node-b streams attempt 1: refused, though attempt 0's holder has gone
  // (two runs at once under the job of one that ended got attempts 1 and 2).
  absl::Status both = admission.Admit(Id("j", 3, "node-d", 400), true).status();
  EXPECT_TRUE(absl::IsAlreadyExists(both)) << both;
  EXPECT_NE(both.message().find("(as attempt 1)"), std::string::npos) << both;
  *second = AdmissionTicket();
  *again = AdmissionTicket();
  // A third process: the next attempt again. Without asking: refused, as before.
  EXPECT_TRUE(absl::IsAlreadyExists(admission.Admit(Id("j", 3, "node-c", 300)).status()));
  absl::StatusOr<AdmissionTicket> third = admission.Admit(Id("j", 3, "node-c", 300), true);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->attempt(), 2u);
  // The holder itself coming back is its own attempt.
  absl::StatusOr<AdmissionTicket> back = admission.Admit(Id("j", 3, "node-a", 100), true);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->attempt(), 0u);
  EXPECT_TRUE(back->reassigned().empty());
}

// A Hello that does not ask for moves (an importer's) is never routed onto a later attempt its
// producer holds: importing trace X at attempt 0, where Y is, after X went to attempt 1, is
// refused as documented, not stored silently into attempt 1.
TEST(StreamAdmissionTest, AHelloThatDoesNotAskIsNotMovedToItsLaterAttempt) {
  StreamAdmission admission(8,
                            [](absl::string_view) -> absl::StatusOr<std::vector<v1::RankSummary>> {
                              std::vector<v1::RankSummary> ranks(2);
                              *ranks[0].mutable_identity() = Id("j", 0, "y", 1, 0);
                              *ranks[1].mutable_identity() = Id("j", 0, "x", 2, 1);
                              return ranks;
                            });
  EXPECT_TRUE(absl::IsAlreadyExists(admission.Admit(Id("j", 0, "x", 2, 0)).status()));
  // And no attempt past the last one: refused rather than wrapped to 0.
  StreamAdmission last(8, [](absl::string_view) -> absl::StatusOr<std::vector<v1::RankSummary>> {
    std::vector<v1::RankSummary> ranks(1);
    *ranks[0].mutable_identity() = Id("k", 0, "a", 1, UINT32_MAX);
    return ranks;
  });
  EXPECT_TRUE(absl::IsAlreadyExists(last.Admit(Id("k", 0, "b", 2, UINT32_MAX), true).status()));
}

TEST(StreamAdmissionTest, AMovedProcessGoesOnAsItsAttemptAfterACollectorRestart) {
  // Stored: node-a as attempt 0, node-b (moved) as attempt 1; neither connected.
  StreamAdmission admission(8,
                            [](absl::string_view) -> absl::StatusOr<std::vector<v1::RankSummary>> {
                              std::vector<v1::RankSummary> ranks(2);
                              *ranks[0].mutable_identity() = Id("j", 3, "node-a", 100, 0);
                              *ranks[1].mutable_identity() = Id("j", 3, "node-b", 200, 1);
                              return ranks;
                            });
  absl::StatusOr<AdmissionTicket> b = admission.Admit(Id("j", 3, "node-b", 200), true);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->attempt(), 1u);
  EXPECT_TRUE(b->reassigned().empty()) << "no new choice: the attempt it had";
  *b = AdmissionTicket();
  absl::StatusOr<AdmissionTicket> c = admission.Admit(Id("j", 3, "node-c", 300), true);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->attempt(), 2u);
}

// A process that inherited its parent's RANK (a vLLM engine, a compile worker under a torchrun
// worker): before, refused as a second producer while the parent streamed, so its memory went
// unrecorded. Now its own stream, as the rank's subprocess.
v1::RankIdentity Child(const v1::RankIdentity& parent, uint32_t pid, uint64_t start_ns = 0) {
  v1::RankIdentity child = parent;
  child.set_pid(pid);
  child.clear_ancestor_pids();
  child.add_ancestor_pids(parent.pid());
  for (uint32_t above : parent.ancestor_pids()) child.add_ancestor_pids(above);
  child.set_process_start_ns(start_ns);
  return child;
}

TEST(StreamAdmissionTest, AProcessWhoseParentStreamsTheRankIsItsSubprocess) {
  StreamAdmission admission(8, NoneStored());
  v1::RankIdentity parent = Id("j", 3, "node-a", 100);
  parent.set_process_start_ns(1000);
  absl::StatusOr<AdmissionTicket> holder = admission.Admit(parent, true);
  ASSERT_TRUE(holder.ok()) << holder.status();
  EXPECT_FALSE(holder->subprocess_of().has_value());

  const v1::RankIdentity engine = Child(parent, 150, 2000);
  absl::StatusOr<AdmissionTicket> child = admission.Admit(engine, true);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ(child->subprocess_of(), std::optional<int32_t>(3));
  // Its own subprocess (an engine's workers) belongs to the rank too, and so does one started
  // through a process that streams nothing (a forkserver, a shell), and the engine reconnecting,
  // also once the parent has gone.
  absl::StatusOr<AdmissionTicket> grandchild = admission.Admit(Child(engine, 151, 3000), true);
  ASSERT_TRUE(grandchild.ok()) << grandchild.status();
  EXPECT_EQ(grandchild->subprocess_of(), std::optional<int32_t>(3));
  v1::RankIdentity forkserver = Child(parent, 160);  // never streams: no Hello of its own
  absl::StatusOr<AdmissionTicket> via = admission.Admit(Child(forkserver, 161, 3000), true);
  ASSERT_TRUE(via.ok()) << via.status();
  EXPECT_EQ(via->subprocess_of(), std::optional<int32_t>(3));
  *holder = AdmissionTicket();
  absl::StatusOr<AdmissionTicket> again = admission.Admit(engine, true);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->subprocess_of(), std::optional<int32_t>(3)) << "not the rank's next attempt";
  // The parent itself reconnecting is the rank, as before.
  absl::StatusOr<AdmissionTicket> back = admission.Admit(parent, true);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->subprocess_of().has_value());
  EXPECT_EQ(back->attempt(), 0u);
}

TEST(StreamAdmissionTest, OnlyTheParentsOwnChildOnItsHostIsASubprocess) {
  StreamAdmission admission(8, NoneStored());
  v1::RankIdentity parent = Id("j", 3, "node-a", 100);
  parent.set_process_start_ns(1000);
  absl::StatusOr<AdmissionTicket> holder = admission.Admit(parent, true);  // connected throughout
  ASSERT_TRUE(holder.ok()) << holder.status();
  // Another process of the rank whose parent is someone else (a second run under the job id):
  // a second producer, refused as before.
  v1::RankIdentity stranger = Child(parent, 200);
  stranger.set_ancestor_pids(0, 99);
  EXPECT_TRUE(absl::IsAlreadyExists(admission.Admit(stranger, true).status()));
  // The parent's pid on another host.
  v1::RankIdentity elsewhere = Child(parent, 150);
  elsewhere.set_host("node-b");
  EXPECT_TRUE(absl::IsAlreadyExists(admission.Admit(elsewhere, true).status()));
  // A child that started before the parent: the pid was some earlier process's.
  EXPECT_TRUE(absl::IsAlreadyExists(admission.Admit(Child(parent, 150, 500), true).status()));
  // Naming another rank: that rank's to admit (here the first of it).
  v1::RankIdentity other_rank = Child(parent, 150, 2000);
  other_rank.set_rank(4);
  absl::StatusOr<AdmissionTicket> four = admission.Admit(other_rank, true);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_FALSE(four->subprocess_of().has_value());
}

TEST(StreamAdmissionTest, ARanksSubprocessesAreKnownAfterACollectorRestart) {
  v1::RankIdentity parent = Id("j", 3, "node-a", 100);
  parent.set_process_start_ns(1000);
  const v1::RankIdentity engine = Child(parent, 150, 2000);
  // As the store holds them: the subprocess without a launcher rank.
  StreamAdmission admission(8,
                            [&](absl::string_view) -> absl::StatusOr<std::vector<v1::RankSummary>> {
                              std::vector<v1::RankSummary> ranks(2);
                              *ranks[0].mutable_identity() = parent;
                              v1::RankIdentity stored = engine;
                              stored.set_rank(-1);
                              stored.set_subprocess_of_rank(3);
                              *ranks[1].mutable_identity() = stored;
                              return ranks;
                            });
  // Its child, though no process of the rank is connected; and the engine itself again.
  absl::StatusOr<AdmissionTicket> grandchild = admission.Admit(Child(engine, 151, 3000), true);
  ASSERT_TRUE(grandchild.ok()) << grandchild.status();
  EXPECT_EQ(grandchild->subprocess_of(), std::optional<int32_t>(3));
  absl::StatusOr<AdmissionTicket> again = admission.Admit(engine, true);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->subprocess_of(), std::optional<int32_t>(3));
}

// Subprocesses count against their rank's bound, not the job's ranks: an 8192-rank RL job whose
// every rank starts an engine would otherwise use up the default 16384 ranks, and the ranks
// that came last would be refused.
TEST(StreamAdmissionTest, SubprocessesAreBoundedPerRankNotAsRanks) {
  StreamAdmission admission(/*max_ranks_per_job=*/1, NoneStored(), /*max_subprocesses_per_rank=*/2);
  const v1::RankIdentity parent = Id("j", 0, "node-a", 100);
  absl::StatusOr<AdmissionTicket> holder = admission.Admit(parent, true);
  ASSERT_TRUE(holder.ok()) << holder.status();
  for (uint32_t pid : {101, 102}) {
    absl::StatusOr<AdmissionTicket> child = admission.Admit(Child(parent, pid), true);
    ASSERT_TRUE(child.ok()) << child.status() << ": the job's one rank has room for 2";
    EXPECT_EQ(child->subprocess_of(), std::optional<int32_t>(0));
  }
  const absl::Status third = admission.Admit(Child(parent, 103), true).status();
  EXPECT_TRUE(absl::IsResourceExhausted(third)) << third;
  EXPECT_NE(third.message().find("--max_subprocesses_per_rank"), std::string::npos) << third;
  EXPECT_TRUE(admission.Admit(Child(parent, 101), true).ok()) << "a known one reconnecting";
  EXPECT_TRUE(absl::IsResourceExhausted(admission.Admit(Id("j", 1, "node-a", 200)).status()))
      << "the job's ranks are still bounded";
}

// A subprocess belongs to the attempt of the process that started it: a rerun's worker moved to
// attempt 1 starts an engine whose Hello inherits attempt 0.
TEST(StreamAdmissionTest, ASubprocessIsStoredAtItsAncestorsAttempt) {
  StreamAdmission admission(
      8, [](absl::string_view) -> absl::StatusOr<std::vector<v1::RankSummary>> {
        std::vector<v1::RankSummary> ranks(1);
        *ranks[0].mutable_identity() = Id("j", 3, "node-a", 100);  // the first run's, ended
        return ranks;
      });
  const v1::RankIdentity rerun = Id("j", 3, "node-a", 300);
  absl::StatusOr<AdmissionTicket> worker = admission.Admit(rerun, true);
  ASSERT_TRUE(worker.ok()) << worker.status();
  ASSERT_EQ(worker->attempt(), 1u);
  absl::StatusOr<AdmissionTicket> engine = admission.Admit(Child(rerun, 301), true);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ(engine->subprocess_of(), std::optional<int32_t>(3));
  EXPECT_EQ(engine->attempt(), 1u);
}

// Another run's process with the ancestor's pid on the same host (a rerun's containers under one
// hostname number their processes alike) is not that ancestor: told apart by its start from
// /proc on the same boot, or by memtrace run's run id. Taken for it, the rerun's rank 5 was
// stored as a subprocess of the first run's rank 5, and the analyses kept reading the first run.
TEST(StreamAdmissionTest, AnotherRunsProcessWithTheAncestorsPidIsNoAncestor) {
  v1::RankIdentity first = Id("j", 5, "node-a", 45);
  first.set_process_start_ns(1000);
  first.set_start_ticks(700);
  first.set_boot_id("boot-1");
  first.set_run_id("run-1");
  v1::RankIdentity second = Id("j", 5, "node-a", 60);  // started by the rerun's pid 45
  second.set_process_start_ns(5000);
  second.add_ancestor_pids(45);
  second.add_ancestor_pids(1);
  second.add_ancestor_start_ticks(9000);
  second.add_ancestor_start_ticks(1);
  second.set_boot_id("boot-1");
  second.set_run_id("run-2");
  // (subprocess_of, attempt) of `hello` with `stored` in the store; the ticket is released
  // before its admission goes.
  const auto admit = [&](const v1::RankIdentity& stored, const v1::RankIdentity& hello) {
    StreamAdmission admission(
        8, [&](absl::string_view) -> absl::StatusOr<std::vector<v1::RankSummary>> {
          std::vector<v1::RankSummary> ranks(1);
          *ranks[0].mutable_identity() = stored;
          return ranks;
        });
    absl::StatusOr<AdmissionTicket> ticket = admission.Admit(hello, true);
    EXPECT_TRUE(ticket.ok()) << ticket.status();
    return ticket.ok() ? std::make_pair(ticket->subprocess_of(), ticket->attempt())
                       : std::make_pair(std::optional<int32_t>(), uint32_t{0});
  };
  const auto by_both = admit(first, second);
  EXPECT_FALSE(by_both.first.has_value());
  EXPECT_EQ(by_both.second, 1u) << "the rank's next attempt, as a rerun's";
  // By its start alone (no memtrace run), and by the run alone (agents without /proc starts).
  v1::RankIdentity no_run = second;
  no_run.clear_run_id();
  EXPECT_FALSE(admit(first, no_run).first.has_value());
  v1::RankIdentity no_ticks = second;
  no_ticks.clear_ancestor_start_ticks();
  EXPECT_FALSE(admit(first, no_ticks).first.has_value());
  // The ancestor itself, by its start: a subprocess.
  v1::RankIdentity child = second;
  child.set_ancestor_start_ticks(0, 700);
  child.set_run_id("run-1");
  EXPECT_EQ(admit(first, child).first, std::optional<int32_t>(5));
}

// A process whose child took the rank first (an engine it started initialised CUDA before it
// did, as vLLM's parent avoids doing): before, refused as a second producer, which lost the
// trainer's memory. Stored beside the rank, when its /proc start shows it is the holder's
// ancestor; the agents' first looks, which order it after its child, do not.
TEST(StreamAdmissionTest, TheProcessThatStartedTheRanksProcessIsStoredBesideIt) {
  v1::RankIdentity trainer = Id("j", 2, "node-a", 100);
  trainer.set_process_start_ns(9000);  // its agent looked after its child's
  trainer.set_start_ticks(500);
  trainer.set_boot_id("boot-1");
  trainer.add_ancestor_pids(1);
  trainer.add_ancestor_start_ticks(1);
  v1::RankIdentity engine = Child(trainer, 150, 2000);
  engine.clear_ancestor_start_ticks();
  engine.add_ancestor_start_ticks(500);
  engine.add_ancestor_start_ticks(1);
  engine.set_start_ticks(600);

  StreamAdmission admission(8, NoneStored());
  absl::StatusOr<AdmissionTicket> first = admission.Admit(engine, true);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->subprocess_of().has_value()) << "the first to connect is the rank";
  absl::StatusOr<AdmissionTicket> parent = admission.Admit(trainer, true);
  ASSERT_TRUE(parent.ok()) << parent.status();
  EXPECT_EQ(parent->subprocess_of(), std::optional<int32_t>(2));
  EXPECT_TRUE(parent->started_the_rank());
  EXPECT_EQ(parent->attempt(), 0u);
  // Reconnecting, it is the same; another child of it (a second engine) is a subprocess.
  absl::StatusOr<AdmissionTicket> again = admission.Admit(trainer, true);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->started_the_rank());
  v1::RankIdentity sibling = engine;
  sibling.set_pid(151);
  sibling.set_start_ticks(610);
  absl::StatusOr<AdmissionTicket> second_engine = admission.Admit(sibling, true);
  ASSERT_TRUE(second_engine.ok()) << second_engine.status();
  EXPECT_EQ(second_engine->subprocess_of(), std::optional<int32_t>(2));
  EXPECT_FALSE(second_engine->started_the_rank());

  // Not its ancestor after all: another start (a reused pid), another boot, another host, or
  // no /proc start to tell (an older agent): refused as a second producer, as before.
  for (const auto& change : std::vector<std::function<void(v1::RankIdentity*)>>{
           [](v1::RankIdentity* id) { id->set_start_ticks(501); },
           [](v1::RankIdentity* id) { id->set_boot_id("boot-2"); },
           [](v1::RankIdentity* id) { id->set_host("node-b"); },
           [](v1::RankIdentity* id) { id->clear_start_ticks(); }}) {
    StreamAdmission fresh(8, NoneStored());
    absl::StatusOr<AdmissionTicket> holder = fresh.Admit(engine, true);
    ASSERT_TRUE(holder.ok()) << holder.status();
    v1::RankIdentity other = trainer;
    change(&other);
    absl::StatusOr<AdmissionTicket> refused = fresh.Admit(other, true);
    EXPECT_TRUE(absl::IsAlreadyExists(refused.status()))
        << (refused.ok() ? "admitted" : refused.status().ToString());
  }

  // Known after a collector restart, as the store holds it.
  StreamAdmission restarted(8,
                            [&](absl::string_view) -> absl::StatusOr<std::vector<v1::RankSummary>> {
                              std::vector<v1::RankSummary> ranks(2);
                              *ranks[0].mutable_identity() = engine;
                              v1::RankIdentity stored = trainer;
                              stored.set_rank(-1);
                              stored.set_subprocess_of_rank(2);
                              stored.set_started_the_rank(true);
                              *ranks[1].mutable_identity() = stored;
                              return ranks;
                            });
  absl::StatusOr<AdmissionTicket> back = restarted.Admit(trainer, true);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->subprocess_of(), std::optional<int32_t>(2));
  EXPECT_TRUE(back->started_the_rank());

  // A rerun under the job id: its child is moved to attempt 1 (the first run's process holds
  // 0), and the parent, whose Hello names 0 too, is stored beside it at 1, not refused.
  v1::RankIdentity first_run = Id("j", 2, "node-a", 40);
  first_run.set_start_ticks(20);
  first_run.set_boot_id("boot-1");
  StreamAdmission rerun(8, [&](absl::string_view) -> absl::StatusOr<std::vector<v1::RankSummary>> {
    std::vector<v1::RankSummary> ranks(1);
    *ranks[0].mutable_identity() = first_run;
    return ranks;
  });
  absl::StatusOr<AdmissionTicket> moved = rerun.Admit(engine, true);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->attempt(), 1u);
  EXPECT_FALSE(moved->subprocess_of().has_value());
  absl::StatusOr<AdmissionTicket> beside = rerun.Admit(trainer, true);
  ASSERT_TRUE(beside.ok()) << beside.status();
  EXPECT_EQ(beside->subprocess_of(), std::optional<int32_t>(2));
  EXPECT_TRUE(beside->started_the_rank());
  EXPECT_EQ(beside->attempt(), 1u);
}

}  // namespace
}  // namespace memtrace::security
