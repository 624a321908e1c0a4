// The Analysis service over real gRPC on loopback, on simulated jobs stored in a real RocksDB
// directory: what each RPC answers for a planted problem, and its errors.
#include "collector/server/analysis_service.h"

#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "collector/server/collector_server.h"
#include "collector/server/simulated_job_store.h"
#include "collector/store/key_codec.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/memtrace/v1/analysis.grpc.pb.h"
#include "rocksdb/convenience.h"
#include "rocksdb/db.h"
#include "rocksdb/utilities/options_util.h"
#include "tests/util/test_dirs.h"

namespace memtrace::collector {
namespace {

sim::WorkloadOptions Base() {
  sim::WorkloadOptions w;
  w.ranks = 8;
  w.steps = 60;
  w.events_per_rank = 3000;
  return w;
}

// The hand-written events' first moment (2023-11-14 22:13:20 UTC), a second, and their sizes'
// unit.
constexpr int64_t kHandT0 = int64_t{1700000000} * 1000000000;
constexpr int64_t kS = 1'000'000'000;
constexpr uint64_t kMiB = 1 << 20;

// A rank's events written by hand, seq from 1, for cases no simulated job plays.
class HandWrittenEvents {
 public:
  HandWrittenEvents& Step(int64_t ts_ns, uint64_t step) {
    Event& e = Add(EventKind::kStep, ts_ns);
    e.aux = step;
    return *this;
  }
  HandWrittenEvents& Alloc(int64_t ts_ns, uint64_t address, uint64_t bytes,
                           uint32_t memory_kind = kMemoryDevice) {
    Event& e = Add(EventKind::kAlloc, ts_ns);
    e.address = address;
    e.bytes = bytes;
    e.memory_kind = memory_kind;
    return *this;
  }
  HandWrittenEvents& Oom(int64_t ts_ns, uint64_t requested_bytes) {
    Add(EventKind::kOom, ts_ns).bytes = requested_bytes;
    return *this;
  }
  HandWrittenEvents& Free(int64_t ts_ns, uint64_t address, uint64_t bytes) {
    Event& e = Add(EventKind::kFree, ts_ns);
    e.address = address;
    e.bytes = bytes;
    e.memory_kind = kMemoryDevice;
    return *this;
  }
  // Appends them, one batch, as rank 0 (attempt `attempt`) of `job` under the simulator's
  // identity, and closes the stream: a run that ended, whose last step is no longer in progress.
  absl::Status AppendAsRank0(EventStore& store, const std::string& job,
                             uint32_t attempt = 0) const {
    absl::StatusOr<OpenedStream> stream = AppendAsRunningRank0(store, job, attempt);
    if (!stream.ok()) return stream.status();
    return store.CloseStream(stream->key, /*complete=*/true, stream->connection);
  }
  // The same, with the stream left open (its agent still connected); the caller closes it.
  absl::StatusOr<OpenedStream> AppendAsRunningRank0(EventStore& store, const std::string& job,
                                                    uint32_t attempt = 0) const {
    return AppendAsRunning(store, SimulatedRankIdentity(job, Base(), 0, attempt));
  }
  // As the stream `identity` names, left open.
  absl::StatusOr<OpenedStream> AppendAsRunning(EventStore& store,
                                               const v1::RankIdentity& identity) const {
    absl::StatusOr<OpenedStream> stream = store.OpenStream(identity);
    if (!stream.ok()) return stream.status();
    if (absl::Status s = store.Append(stream->key, batch_).status(); !s.ok()) return s;
    return stream;
  }

 private:
  Event& Add(EventKind kind, int64_t ts_ns) {
    Event& e = batch_.events.emplace_back();
    e.seq = batch_.events.size();
    e.ts_ns = ts_ns;
    e.kind = kind;
    return e;
  }
  DecodedBatch batch_;
};

class AnalysisServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    CollectorServerOptions options;
    options.listen = "127.0.0.1:0";
    options.store.dir = test_util::TmpDir() + "/analysis_service_db";
    options.store.durability = Durability::kAsync;
    absl::StatusOr<std::unique_ptr<CollectorServer>> server = CollectorServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);

    sim::WorkloadOptions leak = Base();
    leak.leak_rank = 5;
    leak.leak_from_step = 30;
    ASSERT_TRUE(StoreSimulatedJob(server_->store(), "leak", leak).ok());
    leak.step_markers = false;
    ASSERT_TRUE(StoreSimulatedJob(server_->store(), "leak-no-steps", leak).ok());
    // Rank 2 leaks 8 GiB a step from step 30 and runs out of memory mid-run; the others go on.
    sim::WorkloadOptions unplanned = Base();
    unplanned.leak_rank = 2;
    unplanned.leak_bytes_per_step = uint64_t{8} << 30;
    ASSERT_TRUE(StoreSimulatedJob(server_->store(), "rank-died", unplanned).ok());
    sim::WorkloadOptions oom = Base();
    oom.oom_rank = 2;
    oom.oom_step = 50;
    ASSERT_TRUE(StoreSimulatedJob(server_->store(), "oom", oom).ok());
    // The same OOM, then torchrun's restart: attempt 1 runs without one.
    ASSERT_TRUE(StoreSimulatedJob(server_->store(), "oom-restarted", oom).ok());
    ASSERT_TRUE(StoreSimulatedJob(server_->store(), "oom-restarted", Base(), 16384, 1).ok());
    sim::WorkloadOptions spikes = Base();
    spikes.spikes = true;  // 8 GiB more in every 10th step's forward pass
    ASSERT_TRUE(StoreSimulatedJob(server_->store(), "spikes", spikes).ok());
    // The same without step markers, on two nodes whose second's clock runs 10 s ahead.
    spikes.step_markers = false;
    spikes.ranks = 16;
    spikes.clock_skew_per_node_ns = 10'000'000'000;
    ASSERT_TRUE(StoreSimulatedJob(server_->store(), "spikes-skewed-no-steps", spikes).ok());
    sim::WorkloadOptions phases = Base();
    phases.phases = true;
    ASSERT_TRUE(StoreSimulatedJob(server_->store(), "phases", phases).ok());
    phases.rollout_leak = true;
    ASSERT_TRUE(StoreSimulatedJob(server_->store(), "rollout-leak", phases).ok());

    // Two nodes of 8 ranks, an OOM on rank 0 (node 0) in step 45; in "skewed-oom" node 1's
    // clock runs 10 s (10 steps) ahead, the same job otherwise.
    sim::WorkloadOptions two_nodes = Base();
    two_nodes.ranks = 16;
    two_nodes.oom_rank = 0;
    two_nodes.oom_step = 45;
    ASSERT_TRUE(StoreSimulatedJob(server_->store(), "oom-16", two_nodes).ok());
    two_nodes.clock_skew_per_node_ns = 10'000'000'000;
    ASSERT_TRUE(StoreSimulatedJob(server_->store(), "skewed-oom", two_nodes).ok());

    // "oom" again as attempt 0, then a healthy restart an hour later as attempt 1.
    ASSERT_TRUE(StoreSimulatedJob(server_->store(), "restarted", oom, 16384, 0).ok());
    sim::WorkloadOptions rerun = Base();
    rerun.start_ns += 3'600'000'000'000;
    ASSERT_TRUE(StoreSimulatedJob(server_->store(), "restarted", rerun, 16384, 1).ok());
    // 8 ranks, rank 0 leaking from step 10; then rank 0 alone restarted an hour later, for 20
    // steps.
    sim::WorkloadOptions leak0 = Base();
    leak0.leak_rank = 0;
    leak0.leak_from_step = 10;
    ASSERT_TRUE(StoreSimulatedJob(server_->store(), "rank0-restarted", leak0, 16384, 0).ok());
    sim::WorkloadOptions rank0 = Base();
    rank0.ranks = 1;
    rank0.steps = 20;
    rank0.start_ns += 3'600'000'000'000;
    ASSERT_TRUE(StoreSimulatedJob(server_->store(), "rank0-restarted", rank0, 16384, 1).ok());
    // Ray's way: rank 0 alone restarted, 20 s in (attempt 1, beside the others' attempt 0), and
    // again an hour later (attempt 2).
    ASSERT_TRUE(StoreSimulatedJob(server_->store(), "actor-restarts", Base(), 16384, 0).ok());
    sim::WorkloadOptions actor = Base();
    actor.ranks = 1;
    actor.steps = 40;
    actor.start_ns += 20'000'000'000;
    ASSERT_TRUE(StoreSimulatedJob(server_->store(), "actor-restarts", actor, 16384, 1).ok());
    actor.steps = 20;
    actor.start_ns = Base().start_ns + 3'600'000'000'000;
    ASSERT_TRUE(StoreSimulatedJob(server_->store(), "actor-restarts", actor, 16384, 2).ok());
  }
  static void TearDownTestSuite() { server_.reset(); }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    stub_ = v1::Analysis::NewStub(channel_);
  }

  // `live --rank 0 --at-peak` of `job`.
  grpc::Status LiveAtPeak(const std::string& job, v1::LiveReport* report) {
    grpc::ClientContext context;
    v1::LiveRequest request;
    request.set_job_id(job);
    request.set_rank(0);
    request.set_at_peak(true);
    return stub_->Live(&context, request, report);
  }

  static std::unique_ptr<CollectorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Analysis::Stub> stub_;
};

std::unique_ptr<CollectorServer> AnalysisServiceTest::server_;

TEST_F(AnalysisServiceTest, DivergedNamesTheLeakingRankAtItsOnset) {
  grpc::ClientContext context;
  v1::DivergedRequest request;
  request.set_job_id("leak");
  v1::DivergenceReport report;
  ASSERT_TRUE(stub_->Diverged(&context, request, &report).ok());
  EXPECT_EQ(report.status(), v1::DIVERGENCE_STATUS_DIVERGED) << report.DebugString();
  ASSERT_GE(report.diverged_size(), 1);
  EXPECT_EQ(report.diverged(0).rank(), 5u);
  EXPECT_GE(report.diverged(0).onset_step(), 30);
  EXPECT_LE(report.diverged(0).onset_step(), 35);
  EXPECT_EQ(report.ranks(), 8u);
  EXPECT_EQ(report.job_id(), "leak");
}

TEST_F(AnalysisServiceTest, GrowthByTagAndRankNamesThePlantedTagOnTheLeakingRankOnly) {
  grpc::ClientContext context;
  v1::GrowthRequest request;
  request.set_job_id("leak");
  request.mutable_params()->set_by(v1::GROWTH_BY_TAG_RANK);
  v1::GrowthReport report;
  ASSERT_TRUE(stub_->Growth(&context, request, &report).ok());
  ASSERT_GE(report.groups_size(), 1) << report.DebugString();
  for (const v1::GroupGrowth& g : report.groups()) {
    EXPECT_EQ(g.name(), "leak:cache") << report.DebugString();
    EXPECT_EQ(g.rank(), 5u);
  }
}

TEST_F(AnalysisServiceTest, LiveAtOomListsTheLeakFirstAndComparesTheOtherRanks) {
  grpc::ClientContext context;
  v1::LiveRequest request;
  request.set_job_id("oom");
  request.set_rank(2);
  request.set_at_oom(true);
  v1::LiveReport report;
  grpc::Status status = stub_->Live(&context, request, &report);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(report.has_oom());
  EXPECT_GT(report.oom().requested_bytes(), 0u);
  EXPECT_EQ(report.oom().step(), 50);
  // Its OOM ended its stream inside step 50: the moment is no step's end, and says so.
  EXPECT_EQ(report.at_step(), 50);
  EXPECT_TRUE(report.at_step_cut_short());
  // What the failed allocation was for: "a 570 MiB allocation failed" said only its size.
  EXPECT_EQ(report.oom().tag(), "fsdp:layers.1") << report.oom().DebugString();
  EXPECT_EQ(report.oom().source(), "libc10_cuda.so");
  // The others' runs ended at step 49: they are read at their last event, which the report
  // says (their activations showed as the OOM rank's excess, unexplained).
  EXPECT_EQ(report.others_ended_before(), 7u);
  EXPECT_EQ(report.asked_ns(), 0);
  EXPECT_EQ(report.other_ranks(), 7u);
  ASSERT_GE(report.groups_size(), 1);
  EXPECT_EQ(report.groups(0).tag(), "leak:cache");
  EXPECT_GT(report.groups(0).excess_bytes(), 0);
}

TEST_F(AnalysisServiceTest, LiveAtOomFindsTheOomOfTheAttemptBeforeARestart) {
  grpc::ClientContext context;
  v1::LiveRequest request;
  request.set_job_id("oom-restarted");
  request.set_rank(2);
  request.set_at_oom(true);
  v1::LiveReport report;
  grpc::Status status = stub_->Live(&context, request, &report);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(report.has_oom());
  EXPECT_EQ(report.oom().step(), 50);
  EXPECT_EQ(report.attempt(), 0u);
  EXPECT_TRUE(report.oom_before_restart());
  EXPECT_EQ(report.other_ranks(), 7u);  // attempt 0's other ranks
  ASSERT_GE(report.groups_size(), 1);
  EXPECT_EQ(report.groups(0).tag(), "leak:cache");
  // Asked for the restarted attempt itself, there is no OOM to show.
  grpc::ClientContext again;
  request.set_attempt(1);
  status = stub_->Live(&again, request, &report);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "OOM event; ranks with one: 2 (attempt 0)"))
      << status.error_message();
}

// After a restart every analysis reads the rerun; each says so, and names the attempt before it
// that ran out of memory: "no rank diverged" said nothing of it.
TEST_F(AnalysisServiceTest, AnalysesOfARestartedJobNameTheAttemptReadAndTheOomBeforeIt) {
  v1::DivergedRequest diverged;
  diverged.set_job_id("oom-restarted");
  v1::DivergenceReport d;
  grpc::ClientContext c1;
  grpc::Status status = stub_->Diverged(&c1, diverged, &d);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(d.attempts().attempts(), 2u);
  EXPECT_FALSE(d.attempts().has_asked());
  EXPECT_EQ(d.attempts().unread(), 8u);  // attempt 0 of each rank
  ASSERT_EQ(d.attempts().unread_ooms_size(), 1);
  EXPECT_EQ(d.attempts().unread_ooms(0).rank(), 2u);
  EXPECT_EQ(d.attempts().unread_ooms(0).attempt(), 0u);
  EXPECT_GT(d.attempts().unread_ooms(0).first_oom_ns(), 0);

  // Asked for attempt 0: it is the OOM's, which is read; attempt 1 is not.
  v1::PeakRequest peak;
  peak.set_job_id("oom-restarted");
  peak.mutable_params()->set_attempt(0);
  v1::PeakReport p;
  grpc::ClientContext c2;
  status = stub_->Peak(&c2, peak, &p);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(p.attempts().asked(), 0u);
  EXPECT_EQ(p.attempts().unread(), 8u);
  EXPECT_EQ(p.attempts().unread_ooms_size(), 0);

  // The other analyses say it too; a job never restarted has nothing to say.
  v1::HeadroomRequest headroom;
  headroom.set_job_id("oom-restarted");
  v1::HeadroomReport h;
  grpc::ClientContext c3;
  ASSERT_TRUE(stub_->Headroom(&c3, headroom, &h).ok());
  EXPECT_EQ(h.attempts().unread_ooms_size(), 1);
  v1::GrowthRequest growth;
  growth.set_job_id("oom-restarted");
  v1::GrowthReport g;
  grpc::ClientContext c4;
  ASSERT_TRUE(stub_->Growth(&c4, growth, &g).ok());
  EXPECT_EQ(g.attempts().unread_ooms_size(), 1);
  v1::LeaksRequest leaks;
  leaks.set_job_id("oom-restarted");
  v1::LeakReport l;
  grpc::ClientContext c5;
  ASSERT_TRUE(stub_->Leaks(&c5, leaks, &l).ok());
  EXPECT_EQ(l.attempts().unread_ooms_size(), 1);
  leaks.set_job_id("oom");
  grpc::ClientContext c6;
  ASSERT_TRUE(stub_->Leaks(&c6, leaks, &l).ok());
  EXPECT_EQ(l.attempts().attempts(), 0u);
}

TEST_F(AnalysisServiceTest, LiveAtAStepUsesTheEndOfThatStep) {
  grpc::ClientContext context;
  v1::LiveRequest request;
  request.set_job_id("leak");
  request.set_rank(5);
  request.set_at_step(40);
  v1::LiveReport report;
  grpc::Status status = stub_->Live(&context, request, &report);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(report.at_step(), 40);
  EXPECT_FALSE(report.has_oom());
  EXPECT_EQ(report.other_ranks(), 7u);
}

// A spike is gone by its step's end: --at-peak reads the moment the rank's live bytes were
// highest, which holds it.
TEST_F(AnalysisServiceTest, LiveAtThePeakHoldsTheSpikeTheStepsEndNoLongerDoes) {
  v1::PeakRequest peak_request;
  peak_request.set_job_id("spikes");
  peak_request.mutable_params()->set_by(v1::PEAK_BY_RANK);
  v1::PeakReport peaks;
  grpc::ClientContext peak_context;
  grpc::Status status = stub_->Peak(&peak_context, peak_request, &peaks);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const v1::PeakEntry* three = nullptr;
  for (const v1::PeakEntry& e : peaks.entries()) {
    if (e.rank() == 3) three = &e;
  }
  ASSERT_NE(three, nullptr);
  EXPECT_TRUE(three->peak_at_moment());
  EXPECT_EQ(three->peak_step() % 10, 9);  // a spike step

  v1::LiveRequest request;
  request.set_job_id("spikes");
  request.set_rank(3);
  request.set_at_peak(true);
  v1::LiveReport at_peak;
  grpc::ClientContext context;
  status = stub_->Live(&context, request, &at_peak);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(at_peak.at_peak());
  EXPECT_EQ(at_peak.peak_bytes(), three->peak_bytes());
  EXPECT_EQ(at_peak.peak_step(), three->peak_step());
  EXPECT_EQ(at_peak.asked_ns(), three->peak_ns());
  EXPECT_EQ(at_peak.at_ns(), three->peak_ns());  // the allocation that reached it
  EXPECT_EQ(at_peak.at_step(), three->peak_step());
  EXPECT_EQ(at_peak.total_bytes(), three->peak_bytes());
  EXPECT_EQ(at_peak.other_ranks(), 7u);

  // Without step markers, on a node whose clock runs ahead: the bucket's peak moment comes back
  // in the collector's clock by the offset the live set is read with.
  for (uint32_t rank : {3u, 12u}) {
    v1::LiveRequest no_steps;
    no_steps.set_job_id("spikes-skewed-no-steps");
    no_steps.set_rank(rank);
    no_steps.set_at_peak(true);
    v1::LiveReport report;
    grpc::ClientContext c;
    status = stub_->Live(&c, no_steps, &report);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(report.at_peak());
    EXPECT_EQ(report.total_bytes(), report.peak_bytes()) << "rank " << rank;
    EXPECT_GE(report.peak_bytes(), uint64_t{8} << 30);
  }

  request.set_at_step(three->peak_step());
  v1::LiveReport at_end;
  grpc::ClientContext end_context;
  status = stub_->Live(&end_context, request, &at_end);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(at_end.at_peak());
  EXPECT_GE(at_peak.total_bytes(), at_end.total_bytes() + (uint64_t{8} << 30));
}

// The peak is the state after one event: read by time alone, a free stamped the same microsecond
// after it (an imported trace's resolution) was taken in, and the set read below its peak.
TEST_F(AnalysisServiceTest, LiveAtPeakReadsTheStateAfterThePeaksEventNotItsMicrosecond) {
  const absl::Status appended = HandWrittenEvents()
                                    .Step(kHandT0, 0)
                                    .Alloc(kHandT0 + 1000, 0xa000, kMiB)
                                    .Alloc(kHandT0 + 2000, 0xb000, 4 * kMiB)  // the peak, 5 MiB
                                    .Free(kHandT0 + 2000, 0xb000, 4 * kMiB)  // the same microsecond
                                    .Alloc(kHandT0 + 3000, 0xc000, kMiB)
                                    .AppendAsRank0(server_->store(), "same-moment");
  ASSERT_TRUE(appended.ok()) << appended;
  v1::LiveReport report;
  const grpc::Status status = LiveAtPeak("same-moment", &report);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(report.peak_bytes(), 5 * kMiB);
  EXPECT_EQ(report.total_bytes(), 5 * kMiB);
  EXPECT_EQ(report.at_ns(), kHandT0 + 2000);
}

// The step a running rank is in is left out of what the analyses compare, but `live --at-step`
// still reads it: it ends now. The step before it ends where it begins.
TEST_F(AnalysisServiceTest, LiveAtTheStepInProgressReadsTheLatestState) {
  absl::StatusOr<OpenedStream> stream = HandWrittenEvents()
                                            .Step(kHandT0, 0)
                                            .Alloc(kHandT0 + 1000, 0xa000, kMiB)
                                            .Step(kHandT0 + kS, 1)
                                            .Alloc(kHandT0 + kS + 1000, 0xb000, 2 * kMiB)
                                            .Step(kHandT0 + 2 * kS, 2)
                                            .Alloc(kHandT0 + 2 * kS + 1000, 0xc000, 4 * kMiB)
                                            .AppendAsRunningRank0(server_->store(), "running");
  ASSERT_TRUE(stream.ok()) << stream.status();
  const auto live_at_step = [&](int64_t step, v1::LiveReport* report) {
    grpc::ClientContext context;
    v1::LiveRequest request;
    request.set_job_id("running");
    request.set_rank(0);
    request.set_at_step(step);
    return stub_->Live(&context, request, report);
  };
  v1::LiveReport in_progress;
  grpc::Status status = live_at_step(2, &in_progress);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(in_progress.total_bytes(), 7 * kMiB);
  v1::LiveReport before;
  status = live_at_step(1, &before);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(before.total_bytes(), 3 * kMiB);
  v1::LiveReport none;
  status = live_at_step(5, &none);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "(its steps: 0..1, step 2 in progress)"))
      << status.error_message();
  EXPECT_TRUE(server_->store().CloseStream(stream->key, true, stream->connection).ok());
}

// A rank's subprocess (an inference engine that inherited its RANK) is no rank of the job, but
// its memory is on the rank's device: `live` of the rank lists it, read at the same moment.
TEST_F(AnalysisServiceTest, LiveOfARankListsItsSubprocessesAtTheSameMoment) {
  ASSERT_TRUE(HandWrittenEvents()
                  .Step(kHandT0, 0)
                  .Alloc(kHandT0 + 1000, 0xa000, kMiB)
                  .Step(kHandT0 + 2 * kS, 1)
                  .Alloc(kHandT0 + 2 * kS + 1000, 0xb000, 2 * kMiB)
                  .Step(kHandT0 + 4 * kS, 2)
                  .AppendAsRank0(server_->store(), "with-engine")
                  .ok());
  const auto subprocess = [](uint32_t pid) {
    v1::RankIdentity id = SimulatedRankIdentity("with-engine", Base(), 0, 0);
    id.set_rank(-1);
    id.set_pid(pid);
    id.set_subprocess_of_rank(0);
    return id;
  };
  // The engine: 8 MiB at 0.5 s, 16 MiB more at 3 s (after step 0's end, at 2 s).
  absl::StatusOr<OpenedStream> engine = HandWrittenEvents()
                                            .Alloc(kHandT0 + kS / 2, 0xa000, 8 * kMiB)
                                            .Alloc(kHandT0 + 3 * kS, 0xb000, 16 * kMiB)
                                            .AppendAsRunning(server_->store(), subprocess(4001));
  ASSERT_TRUE(engine.ok()) << engine.status();
  // Another, started after step 0's end.
  absl::StatusOr<OpenedStream> late = HandWrittenEvents()
                                          .Alloc(kHandT0 + 5 * kS / 2, 0xc000, kMiB)
                                          .AppendAsRunning(server_->store(), subprocess(4002));
  ASSERT_TRUE(late.ok()) << late.status();
  // And one of another run of the rank (attempt 1, which rank 0 never reached here): not its.
  v1::RankIdentity other_run = subprocess(4009);
  other_run.set_attempt(1);
  absl::StatusOr<OpenedStream> rerun = HandWrittenEvents()
                                           .Alloc(kHandT0 + kS / 4, 0xd000, 32 * kMiB)
                                           .AppendAsRunning(server_->store(), other_run);
  ASSERT_TRUE(rerun.ok()) << rerun.status();

  const auto live = [&](uint32_t rank, std::optional<int64_t> step, v1::LiveReport* report) {
    grpc::ClientContext context;
    v1::LiveRequest request;
    request.set_job_id("with-engine");
    request.set_rank(rank);
    if (step.has_value()) request.set_at_step(*step);
    return stub_->Live(&context, request, report);
  };
  v1::LiveReport at_step0;
  grpc::Status status = live(0, 0, &at_step0);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(at_step0.total_bytes(), kMiB) << "the rank's own, without its subprocess's";
  ASSERT_EQ(at_step0.subprocesses_size(), 1) << at_step0.DebugString();
  EXPECT_EQ(at_step0.subprocesses(0).pid(), 4001u);
  EXPECT_EQ(at_step0.subprocesses(0).rank(), engine->key.rank);
  EXPECT_EQ(at_step0.subprocesses(0).live_bytes(), 8 * kMiB);
  EXPECT_EQ(at_step0.subprocesses(0).allocation_count(), 1u);
  EXPECT_EQ(at_step0.subprocesses(0).at_ns(), kHandT0 + kS / 2);
  v1::LiveReport latest;
  status = live(0, std::nullopt, &latest);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(latest.total_bytes(), 3 * kMiB);
  ASSERT_EQ(latest.subprocesses_size(), 2) << latest.DebugString();
  EXPECT_EQ(latest.subprocesses(0).live_bytes() + latest.subprocesses(1).live_bytes(), 25 * kMiB);

  // The engine's OOM is no rank's, but --at-oom of its rank names it.
  const auto rank0_at_oom = [&] {
    v1::LiveReport at_oom;
    grpc::ClientContext context;
    v1::LiveRequest request;
    request.set_job_id("with-engine");
    request.set_rank(0);
    request.set_at_oom(true);
    return stub_->Live(&context, request, &at_oom);
  };
  grpc::Status no_oom = rank0_at_oom();
  EXPECT_EQ(no_oom.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(no_oom.error_message(), "; no rank of the job has one"))
      << no_oom.error_message();
  EXPECT_FALSE(absl::StrContains(no_oom.error_message(), "subprocesses with one"))
      << no_oom.error_message();
  absl::StatusOr<OpenedStream> failing = HandWrittenEvents()
                                             .Oom(kHandT0 + 3 * kS, 40 * kMiB)
                                             .AppendAsRunning(server_->store(), subprocess(4003));
  ASSERT_TRUE(failing.ok()) << failing.status();
  no_oom = rank0_at_oom();
  EXPECT_EQ(no_oom.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(
      no_oom.error_message(),
      absl::StrCat(
          "; subprocesses with one: pid 4003 of rank 0 (memtrace ranks: ", failing->key.rank, ")")))
      << no_oom.error_message();
  EXPECT_TRUE(server_->store().CloseStream(failing->key, true, failing->connection).ok());

  // Its own live set (live --rank of its stream): read alone, at the moment asked.
  v1::LiveReport own;
  status = live(engine->key.rank, std::nullopt, &own);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(own.rank(), engine->key.rank);
  EXPECT_EQ(own.subprocess_of_rank(), 0);
  EXPECT_EQ(own.subprocess_pid(), 4001u);
  EXPECT_EQ(own.total_bytes(), 24 * kMiB);
  EXPECT_EQ(own.total_count(), 2u);
  EXPECT_EQ(own.other_ranks(), 0u) << "compared with no rank";
  EXPECT_EQ(own.subprocesses_size(), 0);
  EXPECT_EQ(own.at_ns(), kHandT0 + 3 * kS);
  // A step is its rank's end of it: rank 0's step 0 ends at 2 s, before the engine's second
  // allocation.
  v1::LiveReport own_at_step0;
  status = live(engine->key.rank, 0, &own_at_step0);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(own_at_step0.total_bytes(), 8 * kMiB);
  EXPECT_EQ(own_at_step0.rank_step(), 0);
  EXPECT_EQ(own_at_step0.at_ns(), kHandT0 + kS / 2);
  v1::LiveReport none;
  status = live(engine->key.rank, 9, &none);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(
      status.error_message(),
      absl::StrCat("rank 0, whose subprocess stream ", engine->key.rank, " is, has no step 9")))
      << status.error_message();
  const auto ask = [&](uint32_t rank, const std::function<void(v1::LiveRequest*)>& moment,
                       v1::LiveReport* report) {
    grpc::ClientContext context;
    v1::LiveRequest request;
    request.set_job_id("with-engine");
    request.set_rank(rank);
    moment(&request);
    return stub_->Live(&context, request, report);
  };
  v1::LiveReport at_peak;
  status = ask(
      engine->key.rank, [](v1::LiveRequest* r) { r->set_at_peak(true); }, &at_peak);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(at_peak.at_peak());
  EXPECT_EQ(at_peak.peak_bytes(), 24 * kMiB);
  EXPECT_EQ(at_peak.asked_ns(), kHandT0 + 3 * kS);
  EXPECT_EQ(at_peak.total_bytes(), 24 * kMiB);
  status = ask(
      engine->key.rank, [](v1::LiveRequest* r) { r->set_at_ns(kHandT0 + kS / 4); }, &none);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_TRUE(absl::StrContains(status.error_message(),
                                "(pid 4001, a subprocess of rank 0) has "
                                "no event at or before"))
      << status.error_message();
  status = ask(
      engine->key.rank, [](v1::LiveRequest* r) { r->set_at_oom(true); }, &none);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "has no OOM event"))
      << status.error_message();
  v1::LiveReport engine_oom;
  status = ask(
      failing->key.rank, [](v1::LiveRequest* r) { r->set_at_oom(true); }, &engine_oom);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(engine_oom.oom().requested_bytes(), 40 * kMiB);
  EXPECT_EQ(engine_oom.subprocess_pid(), 4003u);
  // Another attempt: said so, also with a step asked (not "rank 0 has no step 9").
  for (const auto& moment : std::vector<std::function<void(v1::LiveRequest*)>>{
           [](v1::LiveRequest* r) { r->set_attempt(1); },
           [](v1::LiveRequest* r) {
             r->set_attempt(1);
             r->set_at_step(9);
           }}) {
    status = ask(engine->key.rank, moment, &none);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_TRUE(absl::StrContains(status.error_message(), "ran in its rank's attempt 0, not 1"))
        << status.error_message();
  }

  // Rank 0's last step (2) ended with its stream, at 4 s: a subprocess that lives on is read
  // there, not at its latest.
  absl::StatusOr<OpenedStream> lives_on = HandWrittenEvents()
                                              .Alloc(kHandT0 + kS, 0xa000, kMiB)
                                              .Alloc(kHandT0 + 6 * kS, 0xb000, 2 * kMiB)
                                              .AppendAsRunning(server_->store(), subprocess(4004));
  ASSERT_TRUE(lives_on.ok()) << lives_on.status();
  v1::LiveReport at_last_step;
  status = live(lives_on->key.rank, 2, &at_last_step);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(at_last_step.total_bytes(), kMiB);
  EXPECT_EQ(at_last_step.rank_step(), 2);
  // One connected with nothing recorded yet: no empty set "at 1970".
  absl::StatusOr<OpenedStream> quiet =
      HandWrittenEvents().AppendAsRunning(server_->store(), subprocess(4005));
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  status = live(quiet->key.rank, std::nullopt, &none);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "has recorded no event yet"))
      << status.error_message();
  // One with step markers of its own (a trainer whose engine took the rank first): its own
  // end of the step, not its rank's.
  absl::StatusOr<OpenedStream> stepping = HandWrittenEvents()
                                              .Step(kHandT0, 0)
                                              .Alloc(kHandT0 + 1000, 0xa000, 4 * kMiB)
                                              .Alloc(kHandT0 + 5 * kS / 2, 0xb000, 8 * kMiB)
                                              .Step(kHandT0 + 3 * kS, 1)
                                              .Alloc(kHandT0 + 4 * kS, 0xc000, 16 * kMiB)
                                              .Step(kHandT0 + 5 * kS, 2)
                                              .AppendAsRunning(server_->store(), subprocess(4006));
  ASSERT_TRUE(stepping.ok()) << stepping.status();
  v1::LiveReport own_step0;
  status = live(stepping->key.rank, 0, &own_step0);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(own_step0.total_bytes(), 12 * kMiB) << "its step 0 ends at 3 s, rank 0's at 2 s";
  EXPECT_FALSE(own_step0.has_rank_step());
  EXPECT_FALSE(own_step0.no_step_markers());
  status = live(stepping->key.rank, 7, &none);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "has no step 7 (its steps: 0..2)"))
      << status.error_message();
  for (const auto* s : {&*lives_on, &*quiet, &*stepping}) {
    EXPECT_TRUE(server_->store().CloseStream(s->key, true, s->connection).ok());
  }

  // Asked for as a rank by another analysis: what it is, and where its memory shows.
  {
    grpc::ClientContext context;
    v1::LeaksRequest request;
    request.set_job_id("with-engine");
    request.set_rank(engine->key.rank);
    v1::LeakReport leaks;
    status = stub_->Leaks(&context, request, &leaks);
  }
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(status.error_message(),
                                "is no rank: it is pid 4001, a subprocess of rank 0"))
      << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(),
                                absl::StrCat("`memtrace live --rank ", engine->key.rank, "`")))
      << status.error_message();
  EXPECT_TRUE(server_->store().CloseStream(engine->key, true, engine->connection).ok());
  EXPECT_TRUE(server_->store().CloseStream(late->key, true, late->connection).ok());
  EXPECT_TRUE(server_->store().CloseStream(rerun->key, true, rerun->connection).ok());
}

// An RL job whose every rank runs an engine beside it (a subprocess), one engine leaking: the
// analyses of the ranks never see it; --subprocesses compares the engines with each other.
TEST_F(AnalysisServiceTest, SubprocessesAreComparedWithEachOtherWhenAskedFor) {
  const std::string job = "engines";
  std::vector<OpenedStream> open;
  std::map<uint32_t, uint32_t> engine_of;  // rank -> its engine's stream number
  for (int32_t rank = 0; rank < 4; ++rank) {
    // The trainer: steps of 2 s, flat.
    HandWrittenEvents trainer;
    trainer.Alloc(kHandT0 + 1000, 0x1000, 1024 * kMiB);
    for (int step = 0; step < 45; ++step) trainer.Step(kHandT0 + step * 2 * kS, step);
    absl::StatusOr<OpenedStream> t =
        trainer.AppendAsRunning(server_->store(), SimulatedRankIdentity(job, Base(), rank, 0));
    ASSERT_TRUE(t.ok()) << t.status();
    open.push_back(*t);
    // Its engine, no step markers: weights, a 1 GiB transient a second; rank 2's keeps 256 MiB
    // a second from 30 s on.
    HandWrittenEvents engine;
    engine.Alloc(kHandT0 + 2000, 0x2000, 4096 * kMiB);
    for (int s = 0; s < 90; ++s) {
      const int64_t t0 = kHandT0 + s * kS;
      engine.Alloc(t0 + kS / 10, 0x100000 + s, 1024 * kMiB)
          .Free(t0 + kS / 2, 0x100000 + s, 1024 * kMiB);
      if (rank == 2 && s >= 30) engine.Alloc(t0 + kS / 5, 0x200000 + s, 256 * kMiB);
    }
    v1::RankIdentity id = SimulatedRankIdentity(job, Base(), rank, 0);
    id.set_rank(-1);
    id.set_pid(5000 + rank);
    id.set_subprocess_of_rank(rank);
    absl::StatusOr<OpenedStream> e = engine.AppendAsRunning(server_->store(), id);
    ASSERT_TRUE(e.ok()) << e.status();
    open.push_back(*e);
    engine_of[rank] = e->key.rank;
  }
  // And a process beside rank 3 that started its process (connected after it), with step
  // markers of its own: no engine, left out (its markers put every engine in one step row).
  HandWrittenEvents parent;
  for (int step = 0; step < 45; ++step) parent.Step(kHandT0 + step * 2 * kS, step);
  v1::RankIdentity parent_id = SimulatedRankIdentity(job, Base(), 3, 0);
  parent_id.set_rank(-1);
  parent_id.set_pid(6003);
  parent_id.set_subprocess_of_rank(3);
  parent_id.set_started_the_rank(true);
  absl::StatusOr<OpenedStream> p = parent.AppendAsRunning(server_->store(), parent_id);
  ASSERT_TRUE(p.ok()) << p.status();
  open.push_back(*p);
  for (const OpenedStream& s : open) {
    ASSERT_TRUE(server_->store().CloseStream(s.key, true, s.connection).ok());
  }

  // The ranks: nothing.
  {
    grpc::ClientContext context;
    v1::LeaksRequest request;
    request.set_job_id(job);
    v1::LeakReport ranks;
    ASSERT_TRUE(stub_->Leaks(&context, request, &ranks).ok());
    EXPECT_EQ(ranks.leaking_ranks(), 0u);
    EXPECT_FALSE(ranks.subprocesses());
  }
  // The engines: rank 2's, by its stream number, from about 30 s.
  grpc::ClientContext leaks_context;
  v1::LeaksRequest leaks_request;
  leaks_request.set_job_id(job);
  leaks_request.set_subprocesses(true);
  v1::LeakReport leaks;
  grpc::Status status = stub_->Leaks(&leaks_context, leaks_request, &leaks);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(leaks.subprocesses());
  EXPECT_EQ(leaks.ranks(), 4u);
  EXPECT_EQ(leaks.leaking_ranks(), 1u);
  EXPECT_EQ(leaks.curves_size(), 4);
  for (const v1::RankCurve& c : leaks.curves()) {
    EXPECT_EQ(c.curve() == v1::CURVE_CLASS_LEAK, c.rank() == engine_of[2]) << c.DebugString();
  }
  EXPECT_GT(leaks.bucket_ns(), 0) << "engines have no steps: time buckets";

  grpc::ClientContext diverged_context;
  v1::DivergedRequest diverged_request;
  diverged_request.set_job_id(job);
  diverged_request.set_subprocesses(true);
  v1::DivergenceReport diverged;
  status = stub_->Diverged(&diverged_context, diverged_request, &diverged);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(diverged.subprocesses());
  ASSERT_EQ(diverged.diverged_size(), 1) << diverged.DebugString();
  EXPECT_EQ(diverged.diverged(0).rank(), engine_of[2]);

  grpc::ClientContext growth_context;
  v1::GrowthRequest growth_request;
  growth_request.set_job_id(job);
  growth_request.set_subprocesses(true);
  growth_request.mutable_params()->set_by(v1::GROWTH_BY_RANK);
  v1::GrowthReport growth;
  status = stub_->Growth(&growth_context, growth_request, &growth);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(growth.subprocesses());
  ASSERT_EQ(growth.groups_size(), 1) << growth.DebugString();
  ASSERT_EQ(growth.groups(0).ranks_size(), 1);
  EXPECT_EQ(growth.groups(0).ranks(0).rank(), engine_of[2]);

  // Their peaks, by engine (no phases): the leaking one's is the highest.
  grpc::ClientContext peak_context;
  v1::PeakRequest peak_request;
  peak_request.set_job_id(job);
  peak_request.set_subprocesses(true);
  peak_request.mutable_params()->set_by(v1::PEAK_BY_RANK);
  v1::PeakReport peak;
  status = stub_->Peak(&peak_context, peak_request, &peak);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(peak.subprocesses());
  EXPECT_EQ(peak.entries_size(), 4);
  ASSERT_EQ(peak.summaries_size(), 1);
  EXPECT_EQ(peak.summaries(0).max_rank(), engine_of[2]);

  // Their headroom on an 80 GiB device: the leaking one's alone is forecast to run out.
  grpc::ClientContext headroom_context;
  v1::HeadroomRequest headroom_request;
  headroom_request.set_job_id(job);
  headroom_request.set_subprocesses(true);
  headroom_request.mutable_params()->set_capacity_bytes(80 * 1024 * kMiB);
  v1::HeadroomReport headroom;
  status = stub_->Headroom(&headroom_context, headroom_request, &headroom);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(headroom.subprocesses());
  EXPECT_EQ(headroom.ranks(), 4u);
  EXPECT_EQ(headroom.forecasts(), 1u) << headroom.DebugString();
  ASSERT_EQ(headroom.entries_size(), 4);
  EXPECT_EQ(headroom.entries(0).rank(), engine_of[2]) << "soonest first";
  EXPECT_EQ(headroom.entries(0).status(), v1::HEADROOM_STATUS_FORECAST);
  // Of the ranks, none: the trainers are flat and their engines are not theirs to forecast.
  grpc::ClientContext ranks_headroom_context;
  headroom_request.set_subprocesses(false);
  v1::HeadroomReport ranks_headroom;
  status = stub_->Headroom(&ranks_headroom_context, headroom_request, &ranks_headroom);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(ranks_headroom.subprocesses());
  EXPECT_EQ(ranks_headroom.ranks(), 4u);
  EXPECT_EQ(ranks_headroom.forecasts(), 0u) << ranks_headroom.DebugString();

  // One of them by its number; a launcher rank's number is none of them.
  const auto leaks_of = [&](const std::function<void(v1::LeaksRequest*)>& ask,
                            v1::LeakReport* report) {
    grpc::ClientContext context;
    v1::LeaksRequest request;
    request.set_job_id(job);
    request.set_subprocesses(true);
    ask(&request);
    return stub_->Leaks(&context, request, report);
  };
  v1::LeakReport one;
  status = leaks_of([&](v1::LeaksRequest* r) { r->set_rank(engine_of[2]); }, &one);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(one.curves_size(), 1);
  EXPECT_EQ(one.curves(0).curve(), v1::CURVE_CLASS_LEAK);
  status = leaks_of([](v1::LeaksRequest* r) { r->set_rank(2); }, &one);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "has no subprocess 2 among those read"))
      << status.error_message();
  // An attempt without any, or a moment before any had begun: said so.
  status = leaks_of([](v1::LeaksRequest* r) { r->mutable_params()->set_attempt(1); }, &one);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(
      absl::StrContains(status.error_message(), "has no subprocess with events in attempt 1"))
      << status.error_message();
  status = leaks_of([](v1::LeaksRequest* r) { r->set_at_ns(kHandT0 - kS); }, &one);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "has no subprocess event at or before "))
      << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "1 process(es) that started their rank's"))
      << status.error_message();
  // The process beside rank 3 that started its process, asked for: why it was not read.
  status = leaks_of([&](v1::LeaksRequest* r) { r->set_rank(p->key.rank); }, &one);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "which is no engine and is left out"))
      << status.error_message();

  // A rerun of rank 0 whose engine began at 200 s: without a moment, rank 0's engine is the
  // rerun's; at 60 s, the first run's (the rerun's had not begun).
  HandWrittenEvents rerun;
  for (int s = 200; s < 290; ++s) {
    const int64_t t0 = kHandT0 + s * kS;
    rerun.Alloc(t0 + kS / 10, 0x100000 + s, 1024 * kMiB)
        .Free(t0 + kS / 2, 0x100000 + s, 1024 * kMiB);
  }
  v1::RankIdentity rerun_id = SimulatedRankIdentity(job, Base(), 0, 1);
  rerun_id.set_rank(-1);
  rerun_id.set_pid(7000);
  rerun_id.set_subprocess_of_rank(0);
  absl::StatusOr<OpenedStream> second = rerun.AppendAsRunning(server_->store(), rerun_id);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(server_->store().CloseStream(second->key, true, second->connection).ok());
  const auto streams_read = [](const v1::LeakReport& report) {
    std::set<uint32_t> read;
    for (const v1::RankCurve& c : report.curves()) read.insert(c.rank());
    return read;
  };
  v1::LeakReport latest;
  status = leaks_of([](v1::LeaksRequest*) {}, &latest);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(streams_read(latest),
            (std::set<uint32_t>{second->key.rank, engine_of[1], engine_of[2], engine_of[3]}));
  v1::LeakReport then;
  status = leaks_of([](v1::LeaksRequest* r) { r->set_at_ns(kHandT0 + 60 * kS); }, &then);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(streams_read(then),
            (std::set<uint32_t>{engine_of[0], engine_of[1], engine_of[2], engine_of[3]}));
  // Asked for by number, the first run's engine then is of an attempt not read.
  status = leaks_of([&](v1::LeaksRequest* r) { r->set_rank(engine_of[0]); }, &one);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(status.error_message(), ", of attempt 0, which was not read"))
      << status.error_message();
}

// Engines of a restarted job: each report of them reads each rank's latest attempt that has any,
// and says so, naming the OOM of an engine it did not read (a KV cache that ran out of memory
// before the restart), as the ranks' reports do.
TEST_F(AnalysisServiceTest, ReportsOfSubprocessesNameTheAttemptsTheyDidNotRead) {
  const std::string job = "engines-restarted";
  std::vector<OpenedStream> open;
  std::map<std::pair<int32_t, uint32_t>, uint32_t> engine_of;  // (rank, attempt) -> its number
  for (uint32_t attempt : {0u, 1u}) {
    for (int32_t rank = 0; rank < 2; ++rank) {
      const int64_t t0 = kHandT0 + attempt * 100 * kS;
      HandWrittenEvents trainer;
      trainer.Alloc(t0 + 1000, 0x1000, 1024 * kMiB);
      for (int step = 0; step < 10; ++step) trainer.Step(t0 + step * 2 * kS, step);
      absl::StatusOr<OpenedStream> t = trainer.AppendAsRunning(
          server_->store(), SimulatedRankIdentity(job, Base(), rank, attempt));
      ASSERT_TRUE(t.ok()) << t.status();
      open.push_back(*t);
      HandWrittenEvents engine;
      engine.Alloc(t0 + 2000, 0x2000, 4096 * kMiB);
      for (int s = 0; s < 20; ++s) {
        engine.Alloc(t0 + s * kS + kS / 10, 0x100000 + s, kMiB)
            .Free(t0 + s * kS + kS / 2, 0x100000 + s, kMiB);
      }
      if (attempt == 0 && rank == 1) engine.Oom(t0 + 19 * kS, 8192 * kMiB);
      v1::RankIdentity id = SimulatedRankIdentity(job, Base(), rank, attempt);
      id.set_rank(-1);
      id.set_pid(7000 + 10 * attempt + rank);
      id.set_subprocess_of_rank(rank);
      absl::StatusOr<OpenedStream> e = engine.AppendAsRunning(server_->store(), id);
      ASSERT_TRUE(e.ok()) << e.status();
      open.push_back(*e);
      engine_of[{rank, attempt}] = e->key.rank;
    }
  }
  for (const OpenedStream& s : open) {
    ASSERT_TRUE(server_->store().CloseStream(s.key, true, s.connection).ok());
  }
  const auto expect_note = [&](const v1::AttemptsNote& note, const std::string& which) {
    EXPECT_EQ(note.attempts(), 2u) << which;
    EXPECT_EQ(note.unread(), 2u) << which;
    ASSERT_EQ(note.unread_ooms_size(), 1) << which;
    EXPECT_EQ(note.unread_ooms(0).attempt(), 0u) << which;
    EXPECT_EQ(note.unread_ooms(0).rank(), (engine_of[{1, 0}])) << which;
    EXPECT_EQ(note.unread_ooms(0).subprocess_of_rank(), 1u) << which;
  };
  // Each report of the subprocesses, asked through `rpc` (a stub method), with `ask` set.
  const auto attempts_of = [&](auto request, auto report, auto rpc,
                               const std::function<void(decltype(request)*)>& ask = nullptr) {
    grpc::ClientContext context;
    request.set_job_id(job);
    request.set_subprocesses(true);
    if (ask) ask(&request);
    const grpc::Status status = (stub_.get()->*rpc)(&context, request, &report);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return std::make_pair(report.attempts(), report.ranks());
  };
  const auto [leaks_note, engines_read] =
      attempts_of(v1::LeaksRequest(), v1::LeakReport(), &v1::Analysis::Stub::Leaks);
  expect_note(leaks_note, "leaks");
  EXPECT_EQ(engines_read, 2u) << "attempt 1's two engines";
  expect_note(
      attempts_of(v1::DivergedRequest(), v1::DivergenceReport(), &v1::Analysis::Stub::Diverged)
          .first,
      "diverged");
  expect_note(attempts_of(v1::PeakRequest(), v1::PeakReport(), &v1::Analysis::Stub::Peak).first,
              "peak");
  expect_note(
      attempts_of(v1::GrowthRequest(), v1::GrowthReport(), &v1::Analysis::Stub::Growth).first,
      "growth");
  expect_note(
      attempts_of(v1::HeadroomRequest(), v1::HeadroomReport(), &v1::Analysis::Stub::Headroom).first,
      "headroom");
  // One engine examined alone (leaks --rank): its rank's engine before the restart is its to
  // speak of, the other rank's not.
  const v1::AttemptsNote one =
      attempts_of(v1::LeaksRequest(), v1::LeakReport(), &v1::Analysis::Stub::Leaks,
                  [&](v1::LeaksRequest* r) {
                    r->set_rank(engine_of[{1, 1}]);
                  })
          .first;
  EXPECT_EQ(one.unread(), 1u);
  ASSERT_EQ(one.unread_ooms_size(), 1);
  EXPECT_EQ(one.unread_ooms(0).rank(), (engine_of[{1, 0}]));
  // At a moment before the restart, the engines begun later could be read by no attempt: one
  // attempt's, nothing to note.
  const v1::AttemptsNote before =
      attempts_of(v1::LeaksRequest(), v1::LeakReport(), &v1::Analysis::Stub::Leaks,
                  [&](v1::LeaksRequest* r) { r->set_at_ns(kHandT0 + 50 * kS); })
          .first;
  EXPECT_EQ(before.attempts(), 0u) << before.DebugString();
  // --attempt 0 reads the engine that ran out of memory: nothing unread of note.
  grpc::ClientContext context;
  v1::LeaksRequest request;
  request.set_job_id(job);
  request.set_subprocesses(true);
  request.mutable_params()->set_attempt(0);
  v1::LeakReport first;
  ASSERT_TRUE(stub_->Leaks(&context, request, &first).ok());
  EXPECT_EQ(first.attempts().asked(), 0u);
  EXPECT_TRUE(first.attempts().has_asked());
  EXPECT_EQ(first.attempts().unread(), 2u);
  EXPECT_EQ(first.attempts().unread_ooms_size(), 0);
}

// A running rank still in its first step (where a model too large for its device fails) has a
// peak so far: `peak --by rank` lists it, with no step, as it lists its --at-peak.
TEST_F(AnalysisServiceTest, PeakByRankListsARankInItsFirstStep) {
  absl::StatusOr<OpenedStream> stream = HandWrittenEvents()
                                            .Step(kHandT0, 0)
                                            .Alloc(kHandT0 + 1000, 0xa000, 8 * kMiB)
                                            .Alloc(kHandT0 + 2000, 0xb000, 16 * kMiB)
                                            .Free(kHandT0 + 3000, 0xb000, 16 * kMiB)
                                            .AppendAsRunningRank0(server_->store(), "first-step");
  ASSERT_TRUE(stream.ok()) << stream.status();
  grpc::ClientContext context;
  v1::PeakRequest request;
  request.set_job_id("first-step");
  request.mutable_params()->set_by(v1::PEAK_BY_RANK);
  v1::PeakReport report;
  grpc::Status status = stub_->Peak(&context, request, &report);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(report.entries_size(), 1) << report.DebugString();
  EXPECT_EQ(report.entries(0).peak_bytes(), 24 * kMiB);
  // One step so far in the whole job: read on time buckets, as a job without markers.
  ASSERT_GT(report.bucket_ns(), 0);
  EXPECT_EQ(report.entries(0).peak_step(), kHandT0 / report.bucket_ns());
  EXPECT_EQ(report.entries(0).steps(), 0u);
  EXPECT_EQ(report.entries(0).peak_ns(), kHandT0 + 2000);
  EXPECT_TRUE(server_->store().CloseStream(stream->key, true, stream->connection).ok());
}

// The step a running rank is in holds its highest moment so far: --at-peak reads it there, not
// at the highest of the steps that ended.
TEST_F(AnalysisServiceTest, LiveAtPeakReadsAPeakInTheStepInProgress) {
  absl::StatusOr<OpenedStream> stream = HandWrittenEvents()
                                            .Step(kHandT0, 0)
                                            .Alloc(kHandT0 + 1000, 0xa000, 8 * kMiB)
                                            .Free(kHandT0 + 2000, 0xa000, 8 * kMiB)
                                            .Step(kHandT0 + kS, 1)
                                            .Alloc(kHandT0 + kS + 1000, 0xb000, 16 * kMiB)
                                            .Free(kHandT0 + kS + 2000, 0xb000, 16 * kMiB)
                                            .AppendAsRunningRank0(server_->store(), "peak-running");
  ASSERT_TRUE(stream.ok()) << stream.status();
  v1::LiveReport report;
  grpc::Status status = LiveAtPeak("peak-running", &report);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(report.peak_bytes(), 16 * kMiB);
  EXPECT_EQ(report.peak_step(), 1);
  EXPECT_EQ(report.at_ns(), kHandT0 + kS + 1000);
  EXPECT_TRUE(server_->store().CloseStream(stream->key, true, stream->connection).ok());
}

// A running rank's step in progress has begun: an allocation made three steps before it crossed
// three step boundaries, as in the job that ended there. Without that step the candidates came
// out a step short.
TEST_F(AnalysisServiceTest, LeakCandidatesOfARunningRankCountTheStepItIsIn) {
  const auto leaking = [&] {
    HandWrittenEvents events;
    for (uint64_t s = 0; s <= 12; ++s) {
      events.Step(kHandT0 + int64_t(s) * kS, s)
          .Alloc(kHandT0 + int64_t(s) * kS + 1000, 0x100000 * (s + 1), 64 * kMiB);
    }
    return events;
  };
  absl::StatusOr<OpenedStream> running =
      leaking().AppendAsRunningRank0(server_->store(), "leak-running");
  ASSERT_TRUE(running.ok()) << running.status();
  ASSERT_TRUE(leaking().AppendAsRank0(server_->store(), "leak-ended").ok());
  const auto candidate_steps = [&](const std::string& job) {
    grpc::ClientContext context;
    v1::LeaksRequest request;
    request.set_job_id(job);
    v1::LeakReport report;
    const grpc::Status status = stub_->Leaks(&context, request, &report);
    EXPECT_TRUE(status.ok()) << status.error_message();
    std::pair<int64_t, int64_t> steps{-1, -1};
    for (const v1::LeakCandidate& c : report.candidates())
      steps = {c.oldest_step(), c.newest_step()};
    return steps;
  };
  EXPECT_EQ(candidate_steps("leak-ended"), std::make_pair(int64_t{5}, int64_t{9}));
  EXPECT_EQ(candidate_steps("leak-running"), candidate_steps("leak-ended"));
  EXPECT_TRUE(server_->store().CloseStream(running->key, true, running->connection).ok());
}

// A peak's event is of the attempt whose row holds it: read there, even when it was stamped
// before that attempt's first event (an agent's threads stamp out of order), where the time
// alone would pick the attempt before, and replay that stream to a seq of another.
TEST_F(AnalysisServiceTest, LiveAtPeakReadsTheAttemptWhoseRowHoldsThePeak) {
  constexpr int64_t kT1 = kHandT0 + int64_t{60} * 1000000000;
  absl::Status appended = HandWrittenEvents()
                              .Step(kHandT0, 0)
                              .Alloc(kHandT0 + 1000, 0xa000, 64 * kMiB)
                              .Alloc(kHandT0 + 2000, 0xb000, 64 * kMiB)
                              .Alloc(kHandT0 + 3000, 0xc000, 64 * kMiB)
                              .AppendAsRank0(server_->store(), "peak-attempts", 0);
  ASSERT_TRUE(appended.ok()) << appended;
  appended = HandWrittenEvents()
                 .Step(kT1, 0)
                 .Alloc(kT1 + 1000, 0xa000, kMiB)
                 .Alloc(kT1 - 1000, 0xb000, 8 * kMiB)  // the peak, stamped early
                 .Free(kT1 + 2000, 0xb000, 8 * kMiB)
                 .AppendAsRank0(server_->store(), "peak-attempts", 1);
  ASSERT_TRUE(appended.ok()) << appended;
  v1::LiveReport report;
  const grpc::Status status = LiveAtPeak("peak-attempts", &report);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(report.peak_bytes(), 9 * kMiB);
  EXPECT_EQ(report.total_bytes(), 9 * kMiB);
  EXPECT_EQ(report.attempt(), 1u);
}

// A rank that only ever held host memory has no device peak to read at: said so, not blamed on
// an old collector that did not keep the moment.
TEST_F(AnalysisServiceTest, LiveAtPeakOfARankWithoutDeviceMemorySaysSo) {
  const absl::Status appended = HandWrittenEvents()
                                    .Step(kHandT0, 0)
                                    .Alloc(kHandT0 + 1000000, 0x2000, kMiB, kMemoryPinned)
                                    .Step(kHandT0 + 2000000, 1)
                                    .Alloc(kHandT0 + 3000000, 0x4000, kMiB, kMemoryPinned)
                                    .AppendAsRank0(server_->store(), "host-only");
  ASSERT_TRUE(appended.ok()) << appended;
  v1::LiveReport report;
  const grpc::Status status = LiveAtPeak("host-only", &report);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(),
            "job \"host-only\" rank 0 never held device memory: it has no peak");
}

// A moment before the rank's first event has nothing live to show: an error naming when its
// steps start, not an empty set "at step 0 (1970-01-01)".
TEST_F(AnalysisServiceTest, LiveBeforeTheFirstEventSaysSo) {
  grpc::ClientContext context;
  v1::LiveRequest request;
  request.set_job_id("leak");
  request.set_rank(5);
  request.set_at_ns(1);
  v1::LiveReport report;
  grpc::Status status = stub_->Live(&context, request, &report);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_NE(status.error_message().find("has no event at or before 1970-01-01 00:00:00.000 UTC; "
                                        "its first step starts at "),
            std::string::npos)
      << status.error_message();
  // Of a restarted rank, its first attempt's first step (22:13:19.5), not the restart's an
  // hour later.
  grpc::ClientContext restarted_context;
  request.set_job_id("restarted");
  request.set_rank(2);
  status = stub_->Live(&restarted_context, request, &report);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_NE(status.error_message().find("its first step starts at 2023-11-14 22:13:19.500"),
            std::string::npos)
      << status.error_message();
}

// Found importing traces of one job recorded hours apart: a rank that had not begun by the
// moment asked was read as holding 0 B, and the median of the others halved.
TEST_F(AnalysisServiceTest, LiveAtATimeLeavesOutTheRanksThatHadNotBegun) {
  const auto rank = [](uint32_t r, int64_t t0, uint64_t bytes) {
    return HandWrittenEvents()
        .Step(t0, 0)
        .Alloc(t0 + 1000, 0xa000, bytes)
        .Step(t0 + 2 * kS, 1)
        .Step(t0 + 4 * kS, 2)
        .AppendAsRunning(AnalysisServiceTest::server_->store(),
                         SimulatedRankIdentity("late-rank", Base(), r, 0));
  };
  ASSERT_TRUE(rank(0, kHandT0, 4 * kMiB).ok());
  ASSERT_TRUE(rank(1, kHandT0, 6 * kMiB).ok());
  ASSERT_TRUE(rank(2, kHandT0 + 10 * kS, 6 * kMiB).ok());  // begins 10 s later
  const auto live_at = [&](int64_t at_ns, v1::LiveReport* report) {
    grpc::ClientContext context;
    v1::LiveRequest request;
    request.set_job_id("late-rank");
    request.set_rank(0);
    request.set_at_ns(at_ns);
    return stub_->Live(&context, request, report);
  };
  v1::LiveReport early;
  grpc::Status status = live_at(kHandT0 + 3 * kS, &early);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(early.other_ranks(), 1u);
  EXPECT_EQ(early.others_not_begun(), 1u);
  EXPECT_EQ(early.others_median_total_bytes(), 6 * kMiB) << "rank 2's 0 B is no comparison";
  v1::LiveReport later;
  status = live_at(kHandT0 + 11 * kS, &later);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(later.other_ranks(), 2u);
  EXPECT_EQ(later.others_not_begun(), 0u);
  EXPECT_EQ(later.others_median_total_bytes(), 6 * kMiB);
}

// Overwrites every stored block and checkpoint of `stream` in the closed store at `dir` with
// bytes that decode as nothing: a damaged stream, as a failing disk leaves one.
void DamageStream(const std::string& dir, const StreamKey& stream) {
  rocksdb::DBOptions db_options;
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  rocksdb::ConfigOptions config;
  ASSERT_TRUE(rocksdb::LoadLatestOptions(config, dir, &db_options, &families).ok());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(db_options, dir, families, &handles, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  const std::string prefix = StreamPrefix(stream);
  int damaged = 0;
  for (size_t i = 0; i < families.size(); ++i) {
    if (families[i].name != "blocks" && families[i].name != "checkpoints") continue;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), handles[i]));
    std::vector<std::string> keys;
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      keys.push_back(it->key().ToString());
    }
    for (const std::string& key : keys) {
      ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[i], key, "\xff\xfe damaged").ok());
      ++damaged;
    }
  }
  EXPECT_GT(damaged, 0);
  for (rocksdb::ColumnFamilyHandle* h : handles) ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
}

// A rank's live set stands when one of its subprocesses' cannot be read: one damaged engine
// stream failed the rank's whole report.
TEST(AnalysisServiceDamageTest, ARanksLiveSetStandsWhenASubprocessCannotBeRead) {
  CollectorServerOptions options;
  options.listen = "127.0.0.1:0";
  options.store.dir = test_util::TmpDir() + "/damaged_subprocess_db";
  options.store.durability = Durability::kAsync;
  StreamKey engine_key;
  {
    absl::StatusOr<std::unique_ptr<CollectorServer>> server = CollectorServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    EventStore& store = (*server)->store();
    ASSERT_TRUE(HandWrittenEvents()
                    .Step(kHandT0, 0)
                    .Alloc(kHandT0 + 1000, 0xa000, kMiB)
                    .Step(kHandT0 + 2 * kS, 1)
                    .AppendAsRank0(store, "damaged-engine")
                    .ok());
    for (uint32_t pid : {4001u, 4002u}) {
      v1::RankIdentity id = SimulatedRankIdentity("damaged-engine", Base(), 0, 0);
      id.set_rank(-1);
      id.set_pid(pid);
      id.set_subprocess_of_rank(0);
      absl::StatusOr<OpenedStream> engine =
          HandWrittenEvents().Alloc(kHandT0 + kS / 2, 0xa000, 8 * kMiB).AppendAsRunning(store, id);
      ASSERT_TRUE(engine.ok()) << engine.status();
      ASSERT_TRUE(store.CloseStream(engine->key, true, engine->connection).ok());
      if (pid == 4002u) engine_key = engine->key;
    }
  }
  DamageStream(options.store.dir, engine_key);

  absl::StatusOr<std::unique_ptr<CollectorServer>> server = CollectorServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::Analysis::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::LiveRequest request;
  request.set_job_id("damaged-engine");
  request.set_rank(0);
  v1::LiveReport report;
  grpc::Status status = stub->Live(&context, request, &report);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(report.total_bytes(), kMiB);
  ASSERT_EQ(report.subprocesses_size(), 2) << report.DebugString();
  for (const v1::SubprocessLive& sub : report.subprocesses()) {
    if (sub.pid() == 4002u) {
      EXPECT_EQ(sub.rank(), engine_key.rank);
      EXPECT_TRUE(absl::StrContains(sub.unread(), "DATA_LOSS")) << sub.DebugString();
      EXPECT_EQ(sub.live_bytes(), 0u);
    } else {
      EXPECT_EQ(sub.unread(), "");
      EXPECT_EQ(sub.live_bytes(), 8 * kMiB);
    }
  }
}

TEST_F(AnalysisServiceTest, LeaksBeforeTheJobStartedSaysSo) {
  grpc::ClientContext context;
  v1::LeaksRequest request;
  request.set_job_id("leak");
  request.set_at_ns(1);
  v1::LeakReport report;
  grpc::Status status = stub_->Leaks(&context, request, &report);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_NE(status.error_message().find("has no event at or before 1970-01-01 00:00:00.000 UTC; "
                                        "it starts at "),
            std::string::npos)
      << status.error_message();
  // Asked for a restart, before it began: the attempt is what starts later, not the job.
  grpc::ClientContext attempt_context;
  request.set_job_id("restarted");
  request.mutable_params()->set_attempt(1);
  request.set_at_ns(int64_t{1700000000} * 1000000000);
  status = stub_->Leaks(&attempt_context, request, &report);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_NE(status.error_message().find("job \"restarted\" attempt 1 has no event at or before "
                                        "2023-11-14 22:13:20.000 UTC; that attempt starts at "),
            std::string::npos)
      << status.error_message();
}

TEST_F(AnalysisServiceTest, LeaksOfOneRankClassifiesItAndListsItsCandidates) {
  grpc::ClientContext context;
  v1::LeaksRequest request;
  request.set_job_id("leak");
  request.set_rank(5);
  v1::LeakReport report;
  ASSERT_TRUE(stub_->Leaks(&context, request, &report).ok());
  ASSERT_EQ(report.curves_size(), 1) << report.DebugString();
  EXPECT_EQ(report.curves(0).rank(), 5u);
  EXPECT_EQ(report.curves(0).curve(), v1::CURVE_CLASS_LEAK);
  ASSERT_GE(report.candidates_size(), 1);
  EXPECT_EQ(report.candidates(0).tag(), "leak:cache");
  for (const v1::LeakCandidate& c : report.candidates()) EXPECT_EQ(c.rank(), 5u);
}

TEST_F(AnalysisServiceTest, PeakByPhaseListsEveryPhase) {
  grpc::ClientContext context;
  v1::PeakRequest request;
  request.set_job_id("phases");
  v1::PeakReport report;
  ASSERT_TRUE(stub_->Peak(&context, request, &report).ok());
  std::set<std::string> phases;
  for (const v1::PeakSummary& s : report.summaries()) phases.insert(s.group());
  EXPECT_EQ(phases, (std::set<std::string>{"actor_update", "rollout", "weight_sync"}));
  EXPECT_EQ(report.entries_size(), 3 * 8);
}

TEST_F(AnalysisServiceTest, LeaksReportsRolloutMemoryThatOutlivesTheRollout) {
  grpc::ClientContext context;
  v1::LeaksRequest request;
  request.set_job_id("rollout-leak");
  v1::LeakReport report;
  ASSERT_TRUE(stub_->Leaks(&context, request, &report).ok());
  // From the live sets: KV-cache blocks allocated in rollout, live after it ended, every rank.
  // (Adam state made in step 0's actor_update also shows as an actor_update survivor: the
  // analysis does not leave warm-up allocations out of phase survivors.)
  std::set<uint32_t> ranks;
  for (const v1::PhaseSurvivor& s : report.phase_survivors()) {
    if (s.phase() != "rollout") continue;
    EXPECT_EQ(s.tag(), "rollout:kv_cache");
    EXPECT_GE(s.count(), 50u);
    ranks.insert(s.rank());
  }
  EXPECT_EQ(ranks.size(), 8u) << report.DebugString();
  // From the rollups: the rollout-named tag still holds memory at step ends.
  std::set<std::string> residues;
  for (const v1::PhaseResidue& r : report.phase_residues()) residues.insert(r.phase());
  EXPECT_EQ(residues, std::set<std::string>{"rollout"}) << report.DebugString();

  grpc::ClientContext clean_context;
  request.set_job_id("phases");
  v1::LeakReport clean;
  ASSERT_TRUE(stub_->Leaks(&clean_context, request, &clean).ok());
  for (const v1::PhaseSurvivor& s : clean.phase_survivors()) {
    EXPECT_NE(s.phase(), "rollout") << clean.DebugString();
  }
  EXPECT_EQ(clean.phase_residues_size(), 0) << clean.DebugString();
}

TEST_F(AnalysisServiceTest, CompareRunsBothJobsAndHeadroomForecastsTheOomRank) {
  {
    grpc::ClientContext context;
    v1::CompareRequest request;
    request.set_job_a("leak");
    request.set_job_b("phases");
    v1::CompareReport report;
    ASSERT_TRUE(stub_->Compare(&context, request, &report).ok());
    EXPECT_EQ(report.a().diverged().diverged(0).rank(), 5u);
    EXPECT_EQ(report.b().ranks(), 8u);
    EXPECT_GT(report.items_size(), 0);
    EXPECT_EQ(report.a().attempts().attempts(), 0u);
  }
  {
    // A restarted job's column names the OOM of the attempt it did not read.
    grpc::ClientContext context;
    v1::CompareRequest request;
    request.set_job_a("oom");
    request.set_job_b("oom-restarted");
    v1::CompareReport report;
    ASSERT_TRUE(stub_->Compare(&context, request, &report).ok());
    EXPECT_EQ(report.a().attempts().attempts(), 0u);
    EXPECT_EQ(report.b().attempts().attempts(), 2u);
    ASSERT_EQ(report.b().attempts().unread_ooms_size(), 1);
    EXPECT_EQ(report.b().attempts().unread_ooms(0).rank(), 2u);
  }
  grpc::ClientContext context;
  v1::HeadroomRequest request;
  request.set_job_id("oom");
  v1::HeadroomReport report;
  ASSERT_TRUE(stub_->Headroom(&context, request, &report).ok());
  ASSERT_GE(report.entries_size(), 1);
  EXPECT_EQ(report.entries(0).rank(), 2u) << report.DebugString();
  EXPECT_EQ(report.entries(0).status(), v1::HEADROOM_STATUS_OUT_OF_MEMORY);
}

// Live and Leaks read the ranks' live sets on several threads: the reports must be the ones
// read one rank after another, whatever the thread count.
TEST_F(AnalysisServiceTest, LiveAndLeaksAnswerTheSameOnOneThreadAndOnSeveral) {
  AnalysisService one(&server_->store(), 1);
  v1::LiveRequest at_oom;
  at_oom.set_job_id("oom");
  at_oom.set_rank(2);
  at_oom.set_at_oom(true);
  v1::LiveRequest at_step;
  at_step.set_job_id("leak");
  at_step.set_rank(5);
  at_step.set_at_step(40);
  v1::LiveRequest latest;
  latest.set_job_id("phases");
  latest.set_rank(3);
  latest.mutable_params()->set_by(v1::LIVE_GROUP_BY_TAG_SOURCE);
  v1::LeaksRequest leaks;
  leaks.set_job_id("rollout-leak");
  v1::LeaksRequest leaks_before;
  leaks_before.set_job_id("leak");
  for (int threads : {2, 3, 8}) {
    AnalysisService several(&server_->store(), threads);
    for (const v1::LiveRequest& request : {at_oom, at_step, latest}) {
      v1::LiveReport want, got;
      ASSERT_TRUE(one.Live(nullptr, &request, &want).ok()) << request.DebugString();
      ASSERT_TRUE(several.Live(nullptr, &request, &got).ok()) << request.DebugString();
      EXPECT_GE(want.other_ranks(), 7u);
      EXPECT_EQ(got.DebugString(), want.DebugString()) << threads << " threads";
    }
    for (const v1::LeaksRequest& request : {leaks, leaks_before}) {
      v1::LeakReport want, got;
      ASSERT_TRUE(one.Leaks(nullptr, &request, &want).ok()) << request.DebugString();
      ASSERT_TRUE(several.Leaks(nullptr, &request, &got).ok()) << request.DebugString();
      EXPECT_EQ(got.DebugString(), want.DebugString()) << threads << " threads";
    }
  }
}

TEST_F(AnalysisServiceTest, UnknownJobRankOrStepIsNotFoundNamingIt) {
  {
    grpc::ClientContext context;
    v1::DivergedRequest request;
    request.set_job_id("no-such-job");
    v1::DivergenceReport report;
    grpc::Status s = stub_->Diverged(&context, request, &report);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_TRUE(absl::StrContains(s.error_message(), "no-such-job")) << s.error_message();
  }
  {
    grpc::ClientContext context;
    v1::CompareRequest request;
    request.set_job_a("leak");
    request.set_job_b("other-missing-job");
    v1::CompareReport report;
    grpc::Status s = stub_->Compare(&context, request, &report);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_TRUE(absl::StrContains(s.error_message(), "other-missing-job")) << s.error_message();
  }
  {
    // Each column of compare reads one attempt, which its note names: not one per analysis.
    grpc::ClientContext context;
    v1::CompareRequest request;
    request.set_job_a("oom-restarted");
    request.set_job_b("oom-restarted");
    request.mutable_params()->mutable_diverged()->set_attempt(0);
    request.mutable_params()->mutable_growth()->set_attempt(1);
    v1::CompareReport report;
    grpc::Status s = stub_->Compare(&context, request, &report);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(s.error_message(), "different attempts")) << s.error_message();
  }
  {
    grpc::ClientContext context;
    v1::LeaksRequest request;
    request.set_job_id("leak");
    request.set_rank(42);
    v1::LeakReport report;
    grpc::Status s = stub_->Leaks(&context, request, &report);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_TRUE(absl::StrContains(s.error_message(), "rank 42")) << s.error_message();
  }
  {
    grpc::ClientContext context;
    v1::LiveRequest request;
    request.set_job_id("leak");
    request.set_rank(1);
    request.set_at_step(100000);
    v1::LiveReport report;
    grpc::Status s = stub_->Live(&context, request, &report);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_TRUE(absl::StrContains(s.error_message(), "step 100000 (its steps: 0..59)"))
        << s.error_message();
  }
  {
    grpc::ClientContext context;
    v1::LiveRequest request;
    request.set_job_id("leak");
    request.set_rank(1);
    request.set_at_oom(true);
    v1::LiveReport report;
    grpc::Status s = stub_->Live(&context, request, &report);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_TRUE(absl::StrContains(s.error_message(), "OOM event; no rank of the job has one"))
        << s.error_message();
  }
  {
    // Which rank has one, to ask for.
    grpc::ClientContext context;
    v1::LiveRequest request;
    request.set_job_id("oom");
    request.set_rank(1);
    request.set_at_oom(true);
    v1::LiveReport report;
    grpc::Status s = stub_->Live(&context, request, &report);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_TRUE(absl::StrContains(s.error_message(), "OOM event; ranks with one: 2"))
        << s.error_message();
  }
}

TEST_F(AnalysisServiceTest, LiveAtOomReadsTheOtherRanksAtItsMomentWhateverTheirHostsClocks) {
  AnalysisService service(&server_->store(), 2);
  v1::LiveRequest request;
  request.set_rank(0);
  request.set_at_oom(true);
  request.mutable_params()->set_max_other_ranks(16);
  v1::LiveReport aligned, skewed;
  request.set_job_id("oom-16");
  ASSERT_TRUE(service.Live(nullptr, &request, &aligned).ok());
  request.set_job_id("skewed-oom");
  ASSERT_TRUE(service.Live(nullptr, &request, &skewed).ok());
  ASSERT_EQ(skewed.oom().step(), 45);
  EXPECT_EQ(skewed.other_ranks(), 15u);
  // Node 0's clock is exact, so the OOM is at the same collector time in both jobs; read at it,
  // node 1's ranks hold what they held in the job whose clocks agree, not what they held ten
  // steps before.
  EXPECT_EQ(skewed.at_ns(), aligned.at_ns());
  EXPECT_GT(skewed.others_median_total_bytes(), 0u);
  EXPECT_EQ(skewed.others_median_total_bytes(), aligned.others_median_total_bytes());
  ASSERT_EQ(skewed.groups_size(), aligned.groups_size());
  for (int i = 0; i < skewed.groups_size(); ++i) {
    EXPECT_EQ(skewed.groups(i).DebugString(), aligned.groups(i).DebugString());
  }

  // --at TIME is the collector's time on every rank: node 1's rank 12 at the OOM's moment is
  // in the step it was in then, and its report gives the moment back in the collector's clock.
  v1::LiveRequest peer;
  peer.set_job_id("skewed-oom");
  peer.set_rank(12);
  peer.set_at_ns(skewed.at_ns());
  v1::LiveReport at_time;
  ASSERT_TRUE(service.Live(nullptr, &peer, &at_time).ok());
  EXPECT_GE(at_time.at_step(), 44);
  EXPECT_LE(at_time.at_ns(), skewed.at_ns());
  EXPECT_GT(at_time.at_ns(), skewed.at_ns() - 1'000'000'000);

  // 5 s after the job ended (the OOM in step 45 stopped every rank), in the collector's clock,
  // every other rank had ended: node 1's too, whose own clock stamped its last events 10 s
  // later (read in it, they had not).
  v1::LiveRequest after;
  after.set_job_id("skewed-oom");
  after.set_rank(1);
  after.set_at_ns(Base().start_ns + 50'000'000'000);
  v1::LiveReport ended;
  ASSERT_TRUE(service.Live(nullptr, &after, &ended).ok());
  EXPECT_EQ(ended.other_ranks(), 15u);
  EXPECT_EQ(ended.others_ended_before(), 15u);
}

TEST_F(AnalysisServiceTest, LiveOfAnEarlierAttemptComparesThatAttemptsRanks) {
  AnalysisService service(&server_->store(), 2);
  v1::LiveRequest request;
  request.set_rank(2);
  request.set_at_oom(true);
  v1::LiveReport only, earlier;
  request.set_job_id("oom");
  ASSERT_TRUE(service.Live(nullptr, &request, &only).ok());
  request.set_job_id("restarted");
  request.set_attempt(0);
  ASSERT_TRUE(service.Live(nullptr, &request, &earlier).ok());
  // Attempt 1 began an hour after attempt 0's OOM: read then, its ranks held nothing.
  EXPECT_EQ(earlier.other_ranks(), 7u);
  EXPECT_GT(earlier.others_median_total_bytes(), 0u);
  EXPECT_EQ(earlier.others_median_total_bytes(), only.others_median_total_bytes());
}

// A time before the restart (from a log of the crash it followed) with no --attempt is the
// earlier attempt's: "no event at or before" it while attempt 0 had it, and it took
// --attempt 0 to find. So is a step only the earlier attempt reached.
TEST_F(AnalysisServiceTest, LiveAtAMomentBeforeTheRestartReadsTheEarlierAttempt) {
  AnalysisService service(&server_->store(), 2);
  v1::LiveRequest request;
  request.set_job_id("restarted");
  request.set_rank(2);
  request.set_at_ns(Base().start_ns + 20'500'000'000);  // step 20 of attempt 0 (1 s steps)
  v1::LiveReport before_restart;
  ASSERT_TRUE(service.Live(nullptr, &request, &before_restart).ok());
  EXPECT_EQ(before_restart.attempt(), 0u);
  EXPECT_EQ(before_restart.latest_attempt(), 1u);  // the report names the earlier attempt
  EXPECT_EQ(before_restart.at_step(), 20);
  EXPECT_GT(before_restart.total_bytes(), 0u);
  // After the restart began: the latest attempt, as before.
  request.set_at_ns(Base().start_ns + 3'600'000'000'000 + 20'500'000'000);
  v1::LiveReport after;
  ASSERT_TRUE(service.Live(nullptr, &request, &after).ok());
  EXPECT_EQ(after.attempt(), 1u);
}

// Another rank restarted after the moment asked is read at the attempt that held it: its later
// attempt, begun an hour on, read as holding nothing (rank 0's leak showed as "others max 0 B"),
// and a step that attempt never reached read as "1 other rank has no step 40".
TEST_F(AnalysisServiceTest, LiveReadsAnotherRankRestartedAfterTheMomentAtTheAttemptThatHeldIt) {
  AnalysisService service(&server_->store(), 2);
  v1::LiveRequest request;
  request.set_job_id("rank0-restarted");
  request.set_rank(5);
  // What a rank holds of the subject's groups (the leak comes on top of its layers').
  const auto held_by = [](const v1::LiveReport& report, uint32_t rank) -> uint64_t {
    uint64_t bytes = 0;
    for (const v1::LiveGroup& g : report.groups()) {
      for (const v1::RankBytes& other : g.others()) {
        if (other.rank() == rank) bytes += other.bytes();
      }
    }
    return bytes;
  };
  request.set_at_ns(Base().start_ns + 40'500'000'000);  // step 40 of attempt 0 (1 s steps)
  v1::LiveReport at_time;
  ASSERT_TRUE(service.Live(nullptr, &request, &at_time).ok());
  EXPECT_EQ(at_time.attempt(), 0u);
  EXPECT_EQ(at_time.other_ranks(), 7u);
  EXPECT_GT(held_by(at_time, 1), uint64_t{8} << 30);
  EXPECT_GE(held_by(at_time, 0), held_by(at_time, 1)) << at_time.DebugString();

  request.set_at_step(40);
  v1::LiveReport at_step;
  ASSERT_TRUE(service.Live(nullptr, &request, &at_step).ok());
  EXPECT_EQ(at_step.other_ranks(), 7u);
  EXPECT_EQ(at_step.others_without_the_step(), 0u);
  EXPECT_GT(held_by(at_step, 1), uint64_t{8} << 30);
  EXPECT_GE(held_by(at_step, 0), held_by(at_step, 1)) << at_step.DebugString();

  // A step both attempts have: the one running at the subject's end of it (attempt 0, whose
  // layers are rank 1's), not the restart an hour later that numbered its steps afresh (alone,
  // it held the whole model's layers, not an eighth).
  request.set_at_step(15);
  v1::LiveReport both;
  ASSERT_TRUE(service.Live(nullptr, &request, &both).ok());
  EXPECT_EQ(both.other_ranks(), 7u);
  EXPECT_GT(held_by(both, 1), uint64_t{8} << 30);
  EXPECT_EQ(held_by(both, 0), held_by(both, 1)) << both.DebugString();
}

// A subject read at an earlier attempt (1 of 0..2) is compared with the ranks running then,
// whatever their attempt: the ranks never restarted have no attempt 1, and were left out.
TEST_F(AnalysisServiceTest, LiveOfARankAtAnEarlierAttemptComparesTheRanksRunningThen) {
  AnalysisService service(&server_->store(), 2);
  v1::LiveRequest request;
  request.set_job_id("actor-restarts");
  request.set_rank(0);
  request.set_at_ns(Base().start_ns + 40'500'000'000);
  v1::LiveReport report;
  ASSERT_TRUE(service.Live(nullptr, &request, &report).ok());
  EXPECT_EQ(report.attempt(), 1u);
  EXPECT_EQ(report.latest_attempt(), 2u);
  EXPECT_EQ(report.other_ranks(), 7u);
  EXPECT_GT(report.others_median_total_bytes(), uint64_t{8} << 30);
}

// The allocations of `rank`'s leak candidates.
uint64_t CandidateAllocations(const v1::LeakReport& report, uint32_t rank) {
  uint64_t count = 0;
  for (const v1::LeakCandidate& c : report.candidates()) {
    if (c.rank() == rank) count += c.count();
  }
  return count;
}

// So are leaks --at: rank 0's leak, read at its later attempt, was no candidate.
TEST_F(AnalysisServiceTest, LeaksAtAMomentBeforeARanksRestartReadsTheAttemptThatHeldIt) {
  AnalysisService service(&server_->store(), 2);
  v1::LeaksRequest request;
  request.set_job_id("rank0-restarted");
  request.set_at_ns(Base().start_ns + 40'500'000'000);  // step 40 of attempt 0 (1 s steps)
  v1::LeakReport report;
  ASSERT_TRUE(service.Leaks(nullptr, &request, &report).ok());
  // Allocated from step 10 (warm-up ends at 5), live across 3 boundaries by step 40: 28 or so.
  EXPECT_GE(CandidateAllocations(report, 0), 25u) << report.DebugString();
  // Its curve is attempt 0's too, which leaked: the rerun's flat one beside these candidates
  // read "plateau". The report says which attempts it read.
  ASSERT_GE(report.curves_size(), 1);
  EXPECT_EQ(report.curves(0).rank(), 0u);
  EXPECT_EQ(report.curves(0).curve(), v1::CURVE_CLASS_LEAK) << report.DebugString();
  EXPECT_TRUE(report.attempts().at_moment());
  EXPECT_EQ(report.attempts().unread(), 1u);  // rank 0's attempt 1

  // Every rank restarted an hour later (torchrun's way): a time in attempt 0 was "before the
  // job", which starts at attempt 1's first step.
  request.set_job_id("restarted");
  v1::LeakReport whole_job;
  const grpc::Status status = service.Leaks(nullptr, &request, &whole_job);
  ASSERT_TRUE(status.ok()) << status.error_message();
  // Rank 2 leaks towards its OOM in step 50.
  EXPECT_GT(CandidateAllocations(whole_job, 2), 0u) << whole_job.DebugString();
}

TEST_F(AnalysisServiceTest, LeaksOnTheTimeAxisListsTheCandidatesOfTheStepAxis) {
  AnalysisService service(&server_->store(), 2);
  v1::LeaksRequest request;
  request.set_job_id("leak");
  request.set_rank(5);
  v1::LeakReport by_step, by_time;
  ASSERT_TRUE(service.Leaks(nullptr, &request, &by_step).ok());
  request.set_axis(v1::TIMELINE_AXIS_TIME);
  ASSERT_TRUE(service.Leaks(nullptr, &request, &by_time).ok());
  ASSERT_GE(by_step.candidates_size(), 1);
  EXPECT_EQ(by_step.candidates(0).tag(), "leak:cache");
  ASSERT_EQ(by_time.candidates_size(), by_step.candidates_size()) << by_time.DebugString();
  for (int i = 0; i < by_step.candidates_size(); ++i) {
    EXPECT_EQ(by_time.candidates(i).DebugString(), by_step.candidates(i).DebugString());
  }
}

TEST_F(AnalysisServiceTest, LiveOfARankThatStoppedEarlyComparesTheOthersAtItsLastMoment) {
  // Rank 2 of "rank-died" stops at its OOM; the others run to step 59. Their latest state is
  // another point of the job: the comparison takes them at rank 2's last event.
  AnalysisService service(&server_->store(), 2);
  v1::LiveRequest request;
  request.set_job_id("rank-died");
  request.set_rank(2);
  v1::LiveReport latest;
  ASSERT_TRUE(service.Live(nullptr, &request, &latest).ok());
  ASSERT_LT(latest.at_step(), 50) << "rank 2 ran on";
  request.set_at_ns(latest.at_ns());
  v1::LiveReport at_its_moment;
  ASSERT_TRUE(service.Live(nullptr, &request, &at_its_moment).ok());
  ASSERT_EQ(latest.other_ranks(), 7u);
  // A time asked is the one every rank was read at, which the report names.
  EXPECT_EQ(latest.asked_ns(), 0);
  EXPECT_EQ(at_its_moment.asked_ns(), latest.at_ns());
  EXPECT_EQ(latest.others_median_total_bytes(), at_its_moment.others_median_total_bytes());
  ASSERT_EQ(latest.groups_size(), at_its_moment.groups_size());
  for (int i = 0; i < latest.groups_size(); ++i) {
    EXPECT_EQ(latest.groups(i).others_median_bytes(), at_its_moment.groups(i).others_median_bytes())
        << latest.groups(i).tag();
  }
  // A rank that ran to the end is still compared with the others' latest.
  v1::LiveRequest healthy;
  healthy.set_job_id("rank-died");
  healthy.set_rank(3);
  v1::LiveReport healthy_latest;
  ASSERT_TRUE(service.Live(nullptr, &healthy, &healthy_latest).ok());
  EXPECT_EQ(healthy_latest.other_ranks(), 7u);
  // Read at their latest: rank 2 crashed at an earlier step (the others finished the job
  // together, a few ms apart by time, which is no ending before).
  EXPECT_EQ(healthy_latest.others_ended_before(), 1u);
  // At a step rank 2 never reached, rank 2 is not read: it was counted as "ended before" all
  // the same, beside a median of the 6 ranks that were.
  healthy.set_at_step(55);
  v1::LiveReport at_step;
  ASSERT_TRUE(service.Live(nullptr, &healthy, &at_step).ok());
  EXPECT_EQ(at_step.other_ranks(), 6u);
  EXPECT_EQ(at_step.others_ended_before(), 0u);
  EXPECT_EQ(at_step.others_without_the_step(), 1u);  // rank 2, which is said
  // An hour after the job ended every other rank's stream had: by time, not by step (a job
  // without step markers has only step 0, and the hour is in no rank's step).
  v1::LiveRequest later;
  later.set_job_id("rank-died");
  later.set_rank(3);
  later.set_at_ns(healthy_latest.at_ns() + int64_t{3600} * 1'000'000'000);
  v1::LiveReport hour_later;
  ASSERT_TRUE(service.Live(nullptr, &later, &hour_later).ok());
  EXPECT_EQ(hour_later.others_ended_before(), 7u);
}

// A rank whose stream is still open is running, not ended, though its last event is before the
// moment asked (an agent that has not sent for a while).
TEST_F(AnalysisServiceTest, ARankStillConnectedHasNotEndedBeforeTheMoment) {
  sim::WorkloadOptions job = Base();
  job.ranks = 4;
  ASSERT_TRUE(StoreSimulatedJob(server_->store(), "still-connected", job).ok());
  // Rank 2's producer connects again, as StoreSimulatedJob's did, and sends nothing yet.
  absl::StatusOr<OpenedStream> opened =
      server_->store().OpenStream(SimulatedRankIdentity("still-connected", job, 2));
  ASSERT_TRUE(opened.ok()) << opened.status();

  AnalysisService service(&server_->store(), 2);
  v1::LiveRequest request;
  request.set_job_id("still-connected");
  request.set_rank(0);
  request.set_at_ns(Base().start_ns + 70'000'000'000);  // 10 s after the 60 steps
  v1::LiveReport report;
  ASSERT_TRUE(service.Live(nullptr, &request, &report).ok());
  EXPECT_EQ(report.other_ranks(), 3u);
  EXPECT_EQ(report.others_ended_before(), 2u) << "ranks 1 and 3; rank 2 is connected";
  ASSERT_TRUE(server_->store().CloseStream(opened->key, true).ok());
  v1::LiveReport closed;
  ASSERT_TRUE(service.Live(nullptr, &request, &closed).ok());
  EXPECT_EQ(closed.others_ended_before(), 3u);
}

TEST_F(AnalysisServiceTest, LiveAndLeaksSayWhenTheJobHasNoStepMarkers) {
  // Their steps are then all 0: the reports say so, so that nothing shows "since step 0".
  AnalysisService service(&server_->store(), 2);
  for (const char* job : {"leak", "leak-no-steps"}) {
    const bool markers = std::string(job) == "leak";
    v1::LiveRequest live;
    live.set_job_id(job);
    live.set_rank(5);
    v1::LiveReport live_report;
    ASSERT_TRUE(service.Live(nullptr, &live, &live_report).ok()) << job;
    EXPECT_EQ(live_report.no_step_markers(), !markers) << job;
    for (v1::TimelineAxis axis : {v1::TIMELINE_AXIS_STEP, v1::TIMELINE_AXIS_TIME}) {
      v1::LeaksRequest leaks;
      leaks.set_job_id(job);
      leaks.set_axis(axis);
      v1::LeakReport leak_report;
      ASSERT_TRUE(service.Leaks(nullptr, &leaks, &leak_report).ok()) << job;
      EXPECT_EQ(leak_report.no_step_markers(), !markers) << job << " axis " << axis;
    }
  }
}

TEST_F(AnalysisServiceTest, AnAttemptNoRankRanIsNotFoundNotAnEmptyAnswer) {
  AnalysisService service(&server_->store(), 2);
  const auto expect_not_found = [](const grpc::Status& s, absl::string_view what) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << what;
    EXPECT_TRUE(absl::StrContains(s.error_message(), "no attempt 7 (its attempts: 0, 1)"))
        << what << ": " << s.error_message();
  };
  v1::DivergedRequest diverged;
  diverged.set_job_id("restarted");
  diverged.mutable_params()->set_attempt(7);
  v1::DivergenceReport diverged_report;
  expect_not_found(service.Diverged(nullptr, &diverged, &diverged_report), "diverged");
  v1::GrowthRequest growth;
  growth.set_job_id("restarted");
  growth.mutable_params()->set_attempt(7);
  v1::GrowthReport growth_report;
  expect_not_found(service.Growth(nullptr, &growth, &growth_report), "growth");
  v1::LeaksRequest leaks;
  leaks.set_job_id("restarted");
  leaks.mutable_params()->set_attempt(7);
  v1::LeakReport leak_report;
  expect_not_found(service.Leaks(nullptr, &leaks, &leak_report), "leaks");
  v1::PeakRequest peak;
  peak.set_job_id("restarted");
  peak.mutable_params()->set_attempt(7);
  v1::PeakReport peak_report;
  expect_not_found(service.Peak(nullptr, &peak, &peak_report), "peak");
  v1::HeadroomRequest headroom;
  headroom.set_job_id("restarted");
  headroom.mutable_params()->set_attempt(7);
  v1::HeadroomReport headroom_report;
  expect_not_found(service.Headroom(nullptr, &headroom, &headroom_report), "headroom");
  v1::CompareRequest compare;
  compare.set_job_a("oom");
  compare.set_job_b("restarted");
  // (Every analysis of compare reads the one attempt.)
  compare.mutable_params()->mutable_diverged()->set_attempt(1);
  compare.mutable_params()->mutable_growth()->set_attempt(1);
  compare.mutable_params()->mutable_leaks()->set_attempt(1);
  compare.mutable_params()->mutable_peak()->set_attempt(1);
  compare.mutable_params()->mutable_headroom()->set_attempt(1);
  v1::CompareReport compare_report;
  const grpc::Status s = service.Compare(nullptr, &compare, &compare_report);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(
      absl::StrContains(s.error_message(), "job \"oom\" has no attempt 1 (its attempts: 0)"))
      << s.error_message();

  // An attempt that ran answers as before.
  diverged.mutable_params()->set_attempt(1);
  EXPECT_TRUE(service.Diverged(nullptr, &diverged, &diverged_report).ok());
  EXPECT_EQ(diverged_report.ranks(), 8u);
}

TEST_F(AnalysisServiceTest, EmptyJobIdIsInvalidArgument) {
  grpc::ClientContext context;
  v1::GrowthRequest request;
  v1::GrowthReport report;
  grpc::Status s = stub_->Growth(&context, request, &report);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "job_id")) << s.error_message();
}

TEST_F(AnalysisServiceTest, HealthReportsTheAnalysisServiceServing) {
  grpc::GenericStub generic(channel_);
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  // grpc.health.v1.HealthCheckRequest{service}: field 1, length-delimited.
  const std::string service = "memtrace.v1.Analysis";
  grpc::Slice request(std::string("\x0a", 1) + static_cast<char>(service.size()) + service);
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call = generic.PrepareUnaryCall(
      &context, "/grpc.health.v1.Health/Check", grpc::ByteBuffer(&request, 1), &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, &cq);
  void* tag = nullptr;
  bool ok = false;
  ASSERT_TRUE(cq.Next(&tag, &ok));
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  // HealthCheckResponse{status: SERVING (1)}.
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

}  // namespace
}  // namespace memtrace::collector
