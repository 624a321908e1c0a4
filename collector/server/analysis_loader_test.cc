#include "collector/server/analysis_loader.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "collector/server/simulated_job_store.h"
#include "gtest/gtest.h"
#include "proto/codec/batch_codec.h"
#include "tests/util/test_dirs.h"

namespace memtrace::collector {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr int64_t kSecond = 1'000'000'000;
constexpr int64_t kStart = 1'700'000'000'000'000'000;

// Builds one stream's events with increasing seq and time.
class StreamBuilder {
 public:
  StreamBuilder& Add(EventKind kind, uint64_t address = 0, uint64_t bytes = 0, uint32_t tag = 0,
                     uint64_t aux = 0, uint32_t memory_kind = kMemoryDevice) {
    Event e;
    e.seq = ++seq_;
    ts_ += 100'000'000;  // 0.1 s apart
    e.ts_ns = ts_;
    e.kind = kind;
    e.address = address;
    e.bytes = bytes;
    e.tag_id = tag;
    e.aux = aux;
    e.memory_kind = memory_kind;
    batch_.events.push_back(e);
    return *this;
  }
  StreamBuilder& String(uint32_t id, StringKind kind, std::string value) {
    batch_.strings.push_back({id, kind, std::move(value)});
    return *this;
  }
  const DecodedBatch& batch() const { return batch_; }

 private:
  uint64_t seq_ = 0;
  int64_t ts_ = kStart;
  DecodedBatch batch_;
};

class AnalysisLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EventStoreOptions options;
    options.dir =
        test_util::TmpPath(::testing::UnitTest::GetInstance()->current_test_info()->name());
    options.durability = Durability::kAsync;
    options.bucket_ns = kSecond;
    absl::StatusOr<std::unique_ptr<EventStore>> store = EventStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  void Store(const std::string& job, int rank, const StreamBuilder& stream) {
    v1::RankIdentity identity;
    identity.set_job_id(job);
    identity.set_rank(rank);
    identity.set_host("host-a");
    absl::StatusOr<OpenedStream> opened = store_->OpenStream(identity);
    ASSERT_TRUE(opened.ok()) << opened.status();
    ASSERT_TRUE(store_->Append(opened->key, stream.batch()).ok());
    ASSERT_TRUE(store_->CloseStream(opened->key, true).ok());
  }

  // Rank `rank`: rollout (a KV block) in step 0, then step 1 with actor_update still open and
  // a pinned host buffer.
  StreamBuilder PhasedRank() {
    StreamBuilder s;
    s.String(1, StringKind::kPhase, "rollout")
        .String(2, StringKind::kTag, "rollout:kv_cache")
        .String(3, StringKind::kPhase, "actor_update")
        .String(4, StringKind::kTag, "fsdp:grads");
    s.Add(EventKind::kPhaseBegin, 0, 0, 1)
        .Add(EventKind::kAlloc, 0x1000, 100 * kMiB, 2)
        .Add(EventKind::kPhaseEnd, 0, 0, 1)
        .Add(EventKind::kStep, 0, 0, 0, 1)
        .Add(EventKind::kPhaseBegin, 0, 0, 3)
        .Add(EventKind::kAlloc, 0x2000, 50 * kMiB, 4)
        .Add(EventKind::kAlloc, 0x3000, 8 * kMiB, 4, 0, kMemoryPinned);
    return s;
  }

  std::unique_ptr<EventStore> store_;
};

TEST_F(AnalysisLoaderTest, LoadsStepRollupsWithNamesAndHost) {
  Store("job", 0, PhasedRank());
  Store("job", 1, PhasedRank());
  absl::StatusOr<analysis::JobTimeline> job =
      LoadJobTimeline(*store_, "job", v1::TIMELINE_AXIS_STEP);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(job->time_axis);
  ASSERT_EQ(job->ranks.size(), 2u);
  const analysis::RankTimeline& rank = job->ranks[0];
  EXPECT_EQ(rank.host, "host-a");
  ASSERT_EQ(rank.steps.size(), 2u);
  EXPECT_EQ(rank.steps[0].step, 0);
  EXPECT_EQ(rank.steps[1].step, 1);
  // Device memory only: the pinned buffer is not in the step's bytes.
  EXPECT_EQ(rank.steps[1].end_bytes, 150 * kMiB);
  std::optional<analysis::NameId> grads = job->names.Find("fsdp:grads");
  ASSERT_TRUE(grads.has_value());
  const analysis::GroupBytes* g = analysis::FindGroup(rank.steps[1].by_tag(), *grads);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->live_bytes, 50 * kMiB);
  EXPECT_FALSE(rank.steps[1].by_phase().empty());
}

TEST_F(AnalysisLoaderTest, FallsBackToTimeBucketsWhenNoRankHasStepMarkers) {
  StreamBuilder s;
  s.String(1, StringKind::kTag, "t");
  for (int i = 0; i < 30; ++i) s.Add(EventKind::kAlloc, 0x1000 + i, kMiB, 1);  // 3 s of events
  Store("no-steps", 0, s);
  absl::StatusOr<analysis::JobTimeline> job =
      LoadJobTimeline(*store_, "no-steps", v1::TIMELINE_AXIS_STEP);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(job->time_axis);
  EXPECT_EQ(job->bucket_ns, kSecond);
  ASSERT_EQ(job->ranks.size(), 1u);
  EXPECT_GE(job->ranks[0].steps.size(), 3u);
  for (const analysis::StepPoint& p : job->ranks[0].steps) EXPECT_TRUE(p.by_phase().empty());
}

TEST_F(AnalysisLoaderTest, UnknownJobIsNotFoundNamingIt) {
  absl::StatusOr<analysis::JobTimeline> job =
      LoadJobTimeline(*store_, "nope", v1::TIMELINE_AXIS_STEP);
  ASSERT_EQ(job.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(job.status().message(), "nope")) << job.status();
  EXPECT_EQ(LoadJobStepMetrics(*store_, "nope", v1::TIMELINE_AXIS_STEP).status(), job.status());
}

// The step metrics come from the series (and the open rows), the timeline from the rows: both
// must say the same, on either axis and with the fall-back to time buckets.
void ExpectSameColumns(const EventStore& store, const std::string& job_id, v1::TimelineAxis axis) {
  absl::StatusOr<analysis::JobTimeline> timeline = LoadJobTimeline(store, job_id, axis);
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  absl::StatusOr<analysis::JobStepMetrics> got = LoadJobStepMetrics(store, job_id, axis);
  ASSERT_TRUE(got.ok()) << got.status();
  const analysis::JobStepMetrics want = analysis::StepMetricsOf(*timeline);
  EXPECT_EQ(got->time_axis, want.time_axis);
  EXPECT_EQ(got->bucket_ns, want.bucket_ns);
  ASSERT_EQ(got->ranks.size(), want.ranks.size());
  for (size_t i = 0; i < want.ranks.size(); ++i) {
    EXPECT_EQ(got->ranks[i].rank, want.ranks[i].rank);
    EXPECT_EQ(got->ranks[i].host, want.ranks[i].host);
    EXPECT_EQ(got->ranks[i].step, want.ranks[i].step);
    EXPECT_EQ(got->ranks[i].start_ns, want.ranks[i].start_ns);
    EXPECT_EQ(got->ranks[i].floor_bytes, want.ranks[i].floor_bytes);
    EXPECT_EQ(got->ranks[i].end_bytes, want.ranks[i].end_bytes);
    EXPECT_EQ(got->ranks[i].peak_bytes, want.ranks[i].peak_bytes);
    ASSERT_EQ(got->ranks[i].in_progress.has_value(), want.ranks[i].in_progress.has_value());
    if (want.ranks[i].in_progress.has_value()) {
      EXPECT_EQ(got->ranks[i].in_progress->step, want.ranks[i].in_progress->step);
      EXPECT_EQ(got->ranks[i].in_progress->start_ns, want.ranks[i].in_progress->start_ns);
      EXPECT_EQ(got->ranks[i].in_progress->floor_bytes, want.ranks[i].in_progress->floor_bytes);
      EXPECT_EQ(got->ranks[i].in_progress->peak_bytes, want.ranks[i].in_progress->peak_bytes);
      EXPECT_EQ(got->ranks[i].in_progress->end_bytes, want.ranks[i].in_progress->end_bytes);
    }
  }
}

TEST_F(AnalysisLoaderTest, StepMetricsAreTheTimelinesColumns) {
  Store("job", 0, PhasedRank());
  // Rank 1 is still running: its last step is the open row.
  v1::RankIdentity identity;
  identity.set_job_id("job");
  identity.set_rank(1);
  identity.set_host("host-b");
  absl::StatusOr<OpenedStream> opened = store_->OpenStream(identity);
  ASSERT_TRUE(opened.ok()) << opened.status();
  ASSERT_TRUE(store_->Append(opened->key, PhasedRank().batch()).ok());

  StreamBuilder s;
  for (int i = 0; i < 30; ++i) s.Add(EventKind::kAlloc, 0x1000 + i, kMiB);
  Store("no-steps", 0, s);

  for (v1::TimelineAxis axis : {v1::TIMELINE_AXIS_STEP, v1::TIMELINE_AXIS_TIME}) {
    SCOPED_TRACE(axis);
    ExpectSameColumns(*store_, "job", axis);
    ExpectSameColumns(*store_, "no-steps", axis);
  }
  absl::StatusOr<analysis::JobStepMetrics> fallback =
      LoadJobStepMetrics(*store_, "no-steps", v1::TIMELINE_AXIS_STEP);
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_TRUE(fallback->time_axis);
  ASSERT_TRUE(store_->CloseStream(opened->key, true, opened->connection).ok());
}

// The row a connected stream is still filling is not one of the steps the analyses compare: its
// floor is the lowest so far, its peak the highest so far. Once the stream closes, it is.
TEST_F(AnalysisLoaderTest, ARunningRanksLastRowIsInProgressUntilItsStreamCloses) {
  Store("running", 0, PhasedRank());
  v1::RankIdentity identity;
  identity.set_job_id("running");
  identity.set_rank(1);
  absl::StatusOr<OpenedStream> opened = store_->OpenStream(identity);
  ASSERT_TRUE(opened.ok()) << opened.status();
  ASSERT_TRUE(store_->Append(opened->key, PhasedRank().batch()).ok());

  for (v1::TimelineAxis axis : {v1::TIMELINE_AXIS_STEP, v1::TIMELINE_AXIS_TIME}) {
    SCOPED_TRACE(axis);
    absl::StatusOr<analysis::JobTimeline> job = LoadJobTimeline(*store_, "running", axis);
    ASSERT_TRUE(job.ok()) << job.status();
    ASSERT_EQ(job->ranks.size(), 2u);
    const analysis::RankTimeline& ended = job->ranks[0];
    const analysis::RankTimeline& running = job->ranks[1];
    EXPECT_FALSE(ended.in_progress.has_value());
    ASSERT_TRUE(running.in_progress.has_value());
    ASSERT_EQ(running.steps.size() + 1, ended.steps.size());
    EXPECT_EQ(running.in_progress->step, ended.steps.back().step);
    EXPECT_EQ(running.in_progress->end_bytes, ended.steps.back().end_bytes);
    if (axis == v1::TIMELINE_AXIS_STEP) {
      // Step 0 and step 1 in progress: a job with step markers, not read by time bucket.
      EXPECT_FALSE(job->time_axis);
      EXPECT_EQ(running.in_progress->step, 1);
    }
    ExpectSameColumns(*store_, "running", axis);
  }
  ASSERT_TRUE(store_->CloseStream(opened->key, true, opened->connection).ok());
  absl::StatusOr<analysis::JobTimeline> job =
      LoadJobTimeline(*store_, "running", v1::TIMELINE_AXIS_STEP);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(job->ranks[1].in_progress.has_value());
  EXPECT_EQ(job->ranks[1].steps.size(), job->ranks[0].steps.size());
}

TEST_F(AnalysisLoaderTest, LiveSetNamesThePhaseEachAllocationWasMadeIn) {
  Store("job", 0, PhasedRank());
  absl::StatusOr<LoadedLiveSet> live =
      LoadLiveSet(*store_, "job", 0, std::nullopt, LivePoint{}, /*with_phases=*/true);
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_EQ(live->live_bytes, 150 * kMiB);
  EXPECT_EQ(live->set.at_step, 1);
  ASSERT_EQ(live->set.allocations.size(), 2u);  // the pinned host buffer is left out
  for (const analysis::LiveAllocation& a : live->set.allocations) {
    if (a.address == 0x1000) {
      EXPECT_EQ(a.phase, "rollout");
      EXPECT_EQ(a.tag, "rollout:kv_cache");
      EXPECT_EQ(a.step_allocated, 0);
    } else {
      EXPECT_EQ(a.address, 0x2000u);
      EXPECT_EQ(a.phase, "actor_update");
    }
  }
  EXPECT_EQ(live->set.open_phases, std::vector<std::string>({"actor_update"}));

  absl::StatusOr<LoadedLiveSet> plain =
      LoadLiveSet(*store_, "job", 0, std::nullopt, LivePoint{}, /*with_phases=*/false);
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (const analysis::LiveAllocation& a : plain->set.allocations) EXPECT_EQ(a.phase, "");
  EXPECT_TRUE(plain->set.open_phases.empty());
}

// The phases the live set keeps for its allocations are the ones a replay of the stream's
// markers from its start gives, on an RL job (phases every step, rollout KV blocks kept live
// across later phases), at moments before and after its checkpoints.
TEST_F(AnalysisLoaderTest, TheLiveSetsOwnPhasesAreWhatAReplayOfTheMarkersGives) {
  sim::WorkloadOptions w;
  w.ranks = 2;
  w.steps = 60;  // the store checkpoints every 50 steps and at close
  w.events_per_rank = 6000;
  w.phases = true;
  w.rollout_leak = true;
  ASSERT_TRUE(StoreSimulatedJob(*store_, "rl", w, 1000).ok());
  absl::StatusOr<std::vector<v1::RankSummary>> ranks = store_->ListRanks("rl");
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  ASSERT_EQ(ranks->size(), 2u);
  int with_a_phase = 0;
  for (const v1::RankSummary& r : *ranks) {
    std::vector<LivePoint> points(1);  // now
    for (double at : {0.1, 0.45, 0.9}) {
      LivePoint p;
      p.kind = LivePoint::Kind::kAtTime;
      p.at_ns = r.first_ts_ns() + static_cast<int64_t>(at * (r.last_ts_ns() - r.first_ts_ns()));
      points.push_back(p);
    }
    for (const LivePoint& point : points) {
      const std::string where = absl::StrCat("rank ", r.rank(), " at ", point.at_ns);
      absl::StatusOr<LiveSnapshot> live =
          store_->LiveAllocations("rl", r.rank(), std::nullopt, point);
      ASSERT_TRUE(live.ok()) << live.status();
      EXPECT_TRUE(live->allocation_phases_known) << where;
      absl::StatusOr<LoadedLiveSet> kept =
          LoadLiveSet(*store_, "rl", r.rank(), std::nullopt, point, /*with_phases=*/true);
      ASSERT_TRUE(kept.ok()) << kept.status();
      absl::StatusOr<LoadedLiveSet> replayed =
          LoadLiveSet(*store_, "rl", r.rank(), std::nullopt, point, /*with_phases=*/false);
      ASSERT_TRUE(replayed.ok()) << replayed.status();
      ASSERT_TRUE(ReplayPhases(*store_, "rl", *live, &replayed->set).ok());
      ASSERT_EQ(kept->set.allocations.size(), replayed->set.allocations.size()) << where;
      for (size_t i = 0; i < kept->set.allocations.size(); ++i) {
        const analysis::LiveAllocation& a = kept->set.allocations[i];
        ASSERT_EQ(a.address, replayed->set.allocations[i].address) << where;
        EXPECT_EQ(a.phase, replayed->set.allocations[i].phase) << where << " address " << a.address;
        if (!a.phase.empty()) ++with_a_phase;
      }
      EXPECT_EQ(kept->set.open_phases, replayed->set.open_phases) << where;
    }
  }
  EXPECT_GT(with_a_phase, 8);  // the comparison saw phases, not only empty names
}

TEST_F(AnalysisLoaderTest, LiveSetAtATimeSeesOnlyWhatWasLiveThen) {
  Store("job", 0, PhasedRank());
  LivePoint point;
  point.kind = LivePoint::Kind::kAtTime;
  point.at_ns = kStart + 350'000'000;  // after the rollout's end, before step 1
  absl::StatusOr<LoadedLiveSet> live = LoadLiveSet(*store_, "job", 0, std::nullopt, point, true);
  ASSERT_TRUE(live.ok()) << live.status();
  ASSERT_EQ(live->set.allocations.size(), 1u);
  EXPECT_EQ(live->set.allocations[0].phase, "rollout");
  EXPECT_TRUE(live->set.open_phases.empty());
  EXPECT_EQ(live->set.at_step, 0);
}

TEST_F(AnalysisLoaderTest, LiveSetOfUnknownRankOrMissingOomIsNotFound) {
  Store("job", 0, PhasedRank());
  absl::StatusOr<LoadedLiveSet> rank =
      LoadLiveSet(*store_, "job", 7, std::nullopt, LivePoint{}, false);
  EXPECT_EQ(rank.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(rank.status().message(), "rank 7")) << rank.status();
  LivePoint oom;
  oom.kind = LivePoint::Kind::kFirstOom;
  absl::StatusOr<LoadedLiveSet> none = LoadLiveSet(*store_, "job", 0, std::nullopt, oom, false);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace memtrace::collector
