#include "collector/store/event_store.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "collector/store/key_codec.h"
#include "gtest/gtest.h"
#include "rocksdb/convenience.h"
#include "rocksdb/db.h"
#include "rocksdb/metadata.h"
#include "rocksdb/options.h"
#include "rocksdb/slice_transform.h"
#include "rocksdb/utilities/options_util.h"
#include "tests/util/test_dirs.h"

namespace memtrace::collector {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kT0 = 1'700'000'000'000'000'000;  // ns since the epoch

std::string TestDir(const std::string& name) {
  return test_util::ClearedPath("event_store_test/" + name);
}

v1::RankIdentity Identity(const std::string& job, int32_t rank, uint32_t attempt = 0) {
  v1::RankIdentity id;
  id.set_job_id(job);
  id.set_rank(rank);
  id.set_attempt(attempt);
  id.set_world_size(8);
  id.set_host("node-1");
  id.set_pid(4242);
  id.set_device_index(rank < 0 ? 3 : rank);
  id.set_launcher("test");
  return id;
}

// Events with consecutive seq from `first_seq`: at every 10th event a step marker, otherwise an
// allocation at a new address (every third one freed later, so live bytes grow steadily). Event i
// happens at kT0 + i ms.
std::vector<Event> MakeEvents(uint64_t first_seq, uint64_t count) {
  std::vector<Event> out;
  for (uint64_t seq = first_seq; seq < first_seq + count; ++seq) {
    Event e;
    e.seq = seq;
    e.ts_ns = kT0 + static_cast<int64_t>(seq) * kMs;
    if (seq % 10 == 0) {
      e.kind = EventKind::kStep;
      e.aux = seq / 10;
    } else if (seq % 10 == 5 && seq > 10) {
      e.kind = EventKind::kFree;
      e.address = 0x1000 * (seq - 4);  // the allocation of 4 events earlier
    } else {
      e.kind = EventKind::kAlloc;
      e.address = 0x1000 * seq;
      e.bytes = 100;
      e.tag_id = 1 + seq % 2;
      e.source_id = 3;
      e.memory_kind = kMemoryDevice;
    }
    out.push_back(e);
  }
  return out;
}

DecodedBatch Batch(std::vector<Event> events, std::vector<StringDef> strings = {}) {
  DecodedBatch b;
  b.events = std::move(events);
  b.strings = std::move(strings);
  b.counters.events_recorded = b.events.empty() ? 0 : b.events.back().seq;
  return b;
}

// The live bytes MakeEvents(1, n) leaves, computed the slow way.
uint64_t ExpectedLive(uint64_t n) {
  absl::flat_hash_map<uint64_t, uint64_t> live;
  for (const Event& e : MakeEvents(1, n)) {
    if (e.kind == EventKind::kAlloc) live[e.address] = e.bytes;
    if (e.kind == EventKind::kFree) live.erase(e.address);
  }
  uint64_t total = 0;
  for (const auto& [a, b] : live) total += b;
  return total;
}

EventStoreOptions Options(const std::string& dir) {
  EventStoreOptions o;
  o.dir = dir;
  o.durability = Durability::kAsync;  // tests do not need fsync; the write path is the same
  o.checkpoint_every_steps = 3;
  return o;
}

std::unique_ptr<EventStore> OpenOrDie(const EventStoreOptions& options) {
  absl::StatusOr<std::unique_ptr<EventStore>> store = EventStore::Open(options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

v1::RankSummary RankOf(const EventStore& store, const std::string& job, uint32_t rank) {
  absl::StatusOr<std::vector<v1::RankSummary>> ranks = store.ListRanks(job);
  EXPECT_TRUE(ranks.ok()) << ranks.status();
  for (const v1::RankSummary& r : *ranks) {
    if (r.rank() == rank) return r;
  }
  ADD_FAILURE() << "no rank " << rank;
  return {};
}

// Compares job "job"'s one rank's rows on `axis` in `got` with those in `want`, row for row,
// byte for byte. The number of rows compared (0 when they could not be compared).
int ExpectSameRows(const EventStore& got, const EventStore& want, RollupAxis axis) {
  absl::StatusOr<v1::GetRollupsResponse> g = got.Rollups("job", axis);
  absl::StatusOr<v1::GetRollupsResponse> w = want.Rollups("job", axis);
  if (!g.ok() || !w.ok()) {
    ADD_FAILURE() << (g.ok() ? w.status() : g.status());
    return 0;
  }
  if (g->ranks_size() != 1 || w->ranks_size() != 1) {
    ADD_FAILURE() << "ranks: " << g->ranks_size() << " and " << w->ranks_size();
    return 0;
  }
  const v1::RankRollups& a = g->ranks(0);
  const v1::RankRollups& b = w->ranks(0);
  EXPECT_EQ(a.steps_size(), b.steps_size());
  const int n = std::min(a.steps_size(), b.steps_size());
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(a.steps(i).SerializeAsString(), b.steps(i).SerializeAsString()) << "row " << i;
  }
  return a.steps_size() == b.steps_size() ? n : 0;
}

// The options a store opened in `dir` wrote into its OPTIONS file.
struct WrittenOptions {
  rocksdb::DBOptions db;
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
};
WrittenOptions OptionsWrittenIn(const std::string& dir) {
  { OpenOrDie(Options(dir)); }
  WrittenOptions out;
  rocksdb::ConfigOptions config;
  EXPECT_TRUE(rocksdb::LoadLatestOptions(config, dir, &out.db, &out.families).ok());
  return out;
}

TEST(EventStoreTest, EachFamilyIsCompressedAsTheStoreSays) {
  // RocksDB compresses with Snappy unless told otherwise; the store says what it wants per
  // family, and this reads back what it wrote into the directory's OPTIONS file.
  const WrittenOptions written = OptionsWrittenIn(TestDir("compression"));
  ASSERT_EQ(written.families.size(), 6u);
  for (const rocksdb::ColumnFamilyDescriptor& f : written.families) {
    SCOPED_TRACE(f.name);
    if (f.name == "blocks") {
      EXPECT_EQ(f.options.compression, rocksdb::kNoCompression);  // LZ4'd by block_value
    } else {
      EXPECT_EQ(f.options.compression, rocksdb::kLZ4Compression);
    }
  }
}

TEST(EventStoreTest, MemtablesInsertWithAHintPerStream) {
  // RocksDB uses insert hints only without concurrent memtable writes; both are read back
  // from the OPTIONS file.
  const WrittenOptions written = OptionsWrittenIn(TestDir("insert-hints"));
  ASSERT_EQ(written.families.size(), 6u);
  EXPECT_FALSE(written.db.allow_concurrent_memtable_write);
  for (const rocksdb::ColumnFamilyDescriptor& f : written.families) {
    SCOPED_TRACE(f.name);
    ASSERT_NE(f.options.memtable_insert_with_hint_prefix_extractor, nullptr);
    const rocksdb::SliceTransform& hint = *f.options.memtable_insert_with_hint_prefix_extractor;
    const std::string key = BlockKey(StreamKey{7, 3, 1}, 42);
    ASSERT_TRUE(hint.InDomain(key));
    EXPECT_EQ(hint.Transform(key).ToString(), key.substr(0, 13));
  }
}

TEST(EventStoreTest, AppendStoresEventsAndCounts) {
  auto store = OpenOrDie(Options(TestDir("append")));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job-a", 2));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->durable_seq, 0u);
  EXPECT_EQ(s->identified_by, "env");
  const std::vector<Event> events = MakeEvents(1, 100);
  absl::StatusOr<AppendResult> r =
      store->Append(s->key, Batch(events, {{1, StringKind::kTag, "fsdp:layers.0"}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->durable_seq, 100u);
  EXPECT_EQ(r->stored, 100u);
  EXPECT_EQ(r->duplicates, 0u);

  const v1::RankSummary rank = RankOf(*store, "job-a", 2);
  EXPECT_EQ(rank.events_stored(), 100u);
  EXPECT_EQ(rank.durable_seq(), 100u);
  EXPECT_EQ(rank.first_ts_ns(), kT0 + kMs);
  EXPECT_EQ(rank.last_ts_ns(), kT0 + 100 * kMs);
  EXPECT_EQ(rank.live_bytes(), ExpectedLive(100));
  EXPECT_EQ(rank.current_step(), 10);
  EXPECT_FALSE(rank.no_step_markers());
  EXPECT_EQ(rank.counters().events_recorded(), 100u);
  EXPECT_EQ(rank.identity().host(), "node-1");
  EXPECT_FALSE(rank.complete());

  absl::StatusOr<StoredEvents> read = store->ReadEvents("job-a", 2, 0, 1, 0);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->events, events);
  EXPECT_EQ(read->next_seq, 0u);
  ASSERT_EQ(read->strings.size(), 1u);
  EXPECT_EQ(read->strings[0].value, "fsdp:layers.0");

  absl::StatusOr<std::vector<v1::JobSummary>> jobs = store->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].job_id(), "job-a");
  EXPECT_EQ((*jobs)[0].ranks(), 1u);
  EXPECT_EQ((*jobs)[0].events(), 100u);
  EXPECT_EQ((*jobs)[0].first_ts_ns(), kT0 + kMs);
  ASSERT_TRUE(store->CloseStream(s->key, true).ok());
}

// Without a step marker the summary's current_step is 0, which `memtrace ranks` must not show as
// "step 0": the summary says so.
TEST(EventStoreTest, SummarySaysWhenTheRankSentNoStepMarker) {
  auto store = OpenOrDie(Options(TestDir("no-markers")));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job-a", 2));
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<Event> events;
  for (const Event& e : MakeEvents(1, 100)) {
    if (e.kind != EventKind::kStep) events.push_back(e);
  }
  ASSERT_TRUE(store->Append(s->key, Batch(events, {{1, StringKind::kTag, "t"}})).ok());
  EXPECT_TRUE(RankOf(*store, "job-a", 2).no_step_markers());

  Event marker;
  marker.seq = 101;
  marker.ts_ns = kT0 + 101 * kMs;
  marker.kind = EventKind::kStep;
  marker.aux = 0;
  ASSERT_TRUE(store->Append(s->key, Batch({marker})).ok());
  const v1::RankSummary rank = RankOf(*store, "job-a", 2);
  EXPECT_FALSE(rank.no_step_markers());
  EXPECT_EQ(rank.current_step(), 0);
}

TEST(EventStoreTest, ResendOfStoredBatchLeavesEverythingUnchanged) {
  auto store = OpenOrDie(Options(TestDir("resend")));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 0));
  ASSERT_TRUE(s.ok());
  const DecodedBatch batch = Batch(MakeEvents(1, 50));
  ASSERT_TRUE(store->Append(s->key, batch).ok());
  const v1::RankSummary before = RankOf(*store, "job", 0);
  absl::StatusOr<AppendResult> again = store->Append(s->key, batch);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->stored, 0u);
  EXPECT_EQ(again->duplicates, 50u);
  EXPECT_EQ(again->durable_seq, 50u);
  const v1::RankSummary after = RankOf(*store, "job", 0);
  EXPECT_EQ(after.events_stored(), before.events_stored());
  EXPECT_EQ(after.live_bytes(), before.live_bytes());
  EXPECT_EQ(after.anomalies(), 0u);
  EXPECT_EQ(store->ReadEvents("job", 0, 0, 0, 0)->events.size(), 50u);
  ASSERT_TRUE(store->CloseStream(s->key, true).ok());
}

TEST(EventStoreTest, AppendAndCloseAfterTheLastCloseNameTheStreamByItsJobId) {
  auto store = OpenOrDie(Options(TestDir("not-open")));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("train-7b", 4));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(store->CloseStream(s->key, true).ok());
  absl::StatusOr<AppendResult> late = store->Append(s->key, Batch(MakeEvents(1, 2)));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(late.status().message(), "stream of job \"train-7b\" rank 4 attempt 0 is not open");
  absl::Status closed_again = store->CloseStream(s->key, true);
  EXPECT_EQ(closed_again.message(), "stream of job \"train-7b\" rank 4 attempt 0 is not open");
}

TEST(EventStoreTest, PartialOverlapIsTrimmed) {
  auto store = OpenOrDie(Options(TestDir("overlap")));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 1));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(store->Append(s->key, Batch(MakeEvents(1, 100))).ok());
  absl::StatusOr<AppendResult> r = store->Append(s->key, Batch(MakeEvents(51, 100)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stored, 50u);
  EXPECT_EQ(r->duplicates, 50u);
  EXPECT_EQ(r->durable_seq, 150u);
  const v1::RankSummary rank = RankOf(*store, "job", 1);
  EXPECT_EQ(rank.events_stored(), 150u);
  EXPECT_EQ(rank.live_bytes(), ExpectedLive(150));
  EXPECT_EQ(rank.anomalies(), 0u);
  absl::StatusOr<StoredEvents> read = store->ReadEvents("job", 1, 0, 1, 0);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->events, MakeEvents(1, 150));
  ASSERT_TRUE(store->CloseStream(s->key, true).ok());
}

TEST(EventStoreTest, ReadEventsPagesFromAnySequenceNumber) {
  auto store = OpenOrDie(Options(TestDir("read")));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 0));
  ASSERT_TRUE(s.ok());
  for (uint64_t first = 1; first <= 91; first += 30) {
    ASSERT_TRUE(store->Append(s->key, Batch(MakeEvents(first, 30))).ok());
  }
  absl::StatusOr<StoredEvents> page = store->ReadEvents("job", 0, 0, 45, 20);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->events, MakeEvents(45, 20));
  EXPECT_EQ(page->next_seq, 65u);
  page = store->ReadEvents("job", 0, 0, 65, 1000);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->events, MakeEvents(65, 56));
  EXPECT_EQ(page->next_seq, 0u);
  EXPECT_EQ(store->ReadEvents("job", 0, 7, 0, 0).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(store->CloseStream(s->key, true).ok());
}

TEST(EventStoreTest, ReopenAfterCrashRestoresCountsLiveBytesAndRollups) {
  const std::string dir = TestDir("reopen");
  // Reference: the same events in one store without a restart.
  auto reference = OpenOrDie(Options(dir + "-reference"));
  ASSERT_NE(reference, nullptr);
  absl::StatusOr<OpenedStream> ref = reference->OpenStream(Identity("job", 3));
  ASSERT_TRUE(ref.ok());
  for (uint64_t first = 1; first <= 281; first += 40) {
    ASSERT_TRUE(reference->Append(ref->key, Batch(MakeEvents(first, 40))).ok());
  }

  StreamKey key;
  {
    auto store = OpenOrDie(Options(dir));
    ASSERT_NE(store, nullptr);
    absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 3));
    ASSERT_TRUE(s.ok());
    key = s->key;
    for (uint64_t first = 1; first <= 161; first += 40) {
      ASSERT_TRUE(store->Append(s->key, Batch(MakeEvents(first, 40))).ok());
    }
    // No CloseStream: the collector dies with the stream open.
  }
  auto store = OpenOrDie(Options(dir));
  ASSERT_NE(store, nullptr);
  v1::RankSummary rank = RankOf(*store, "job", 3);
  EXPECT_EQ(rank.events_stored(), 200u);
  EXPECT_EQ(rank.durable_seq(), 200u);
  EXPECT_EQ(rank.live_bytes(), ExpectedLive(200));
  EXPECT_FALSE(rank.complete());

  absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 3));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->key, key);
  EXPECT_EQ(s->durable_seq, 200u);
  // The agent resends from its last ack; the overlap is dropped and the state continues.
  ASSERT_TRUE(store->Append(s->key, Batch(MakeEvents(161, 80))).ok());
  ASSERT_TRUE(store->Append(s->key, Batch(MakeEvents(241, 80))).ok());
  rank = RankOf(*store, "job", 3);
  EXPECT_EQ(rank.events_stored(), 320u);
  EXPECT_EQ(rank.live_bytes(), ExpectedLive(320));

  for (RollupAxis axis : {RollupAxis::kStep, RollupAxis::kTime}) {
    EXPECT_GT(ExpectSameRows(*store, *reference, axis), 0);
  }
  ASSERT_TRUE(store->CloseStream(s->key, true).ok());
  ASSERT_TRUE(reference->CloseStream(ref->key, true).ok());
}

// A handler thread reuses the messages of the rows a batch closed for its next batch, and lets
// them go after a batch that closed more than it keeps: whatever the batch sizes, the rows are
// the ones small batches write.
TEST(EventStoreTest, RowsAreTheSameWhateverTheBatchSizes) {
  const std::string dir = TestDir("row-reuse");
  auto small = OpenOrDie(Options(dir + "-small"));
  auto large = OpenOrDie(Options(dir + "-large"));
  ASSERT_TRUE(small != nullptr && large != nullptr);
  absl::StatusOr<OpenedStream> a = small->OpenStream(Identity("job", 1));
  absl::StatusOr<OpenedStream> b = large->OpenStream(Identity("job", 1));
  ASSERT_TRUE(a.ok() && b.ok());
  constexpr uint64_t kEvents = 16000;  // a step every 10 events: 1600 steps
  for (uint64_t first = 1; first <= kEvents; first += 200) {
    ASSERT_TRUE(small->Append(a->key, Batch(MakeEvents(first, 200))).ok());
  }
  // 1200 rows at once (more than a thread keeps), then small batches again, then 200 rows.
  ASSERT_TRUE(large->Append(b->key, Batch(MakeEvents(1, 12000))).ok());
  for (uint64_t first = 12001; first <= 14000; first += 200) {
    ASSERT_TRUE(large->Append(b->key, Batch(MakeEvents(first, 200))).ok());
  }
  ASSERT_TRUE(large->Append(b->key, Batch(MakeEvents(14001, 2000))).ok());
  for (RollupAxis axis : {RollupAxis::kStep, RollupAxis::kTime}) {
    EXPECT_GE(ExpectSameRows(*large, *small, axis), axis == RollupAxis::kStep ? 1600 : 16);
  }
}

// The agent's clock estimate moves time-bucket rows to collector time, batch by batch; a
// restart replays each block with the estimate it was stored with, so the rows come out as
// without the restart.
TEST(EventStoreTest, TimeBucketsFollowTheAgentsClockEstimateAcrossARestart) {
  const std::string dir = TestDir("clock");
  auto with_clock = [](uint64_t first, uint64_t count) {
    DecodedBatch b = Batch(MakeEvents(first, count));
    // The estimate improves over time: 3.010 s, then 3.037 s behind the rank's clock.
    b.clock = ClockEstimate{first < 150 ? -3'010 * kMs : -3'037 * kMs, 400'000};
    return b;
  };
  EventStoreOptions options = Options(dir + "-reference");
  options.bucket_ns = 50 * kMs;
  options.checkpoint_every_steps = 1000;  // replay every block after the restart
  auto reference = OpenOrDie(options);
  absl::StatusOr<OpenedStream> ref = reference->OpenStream(Identity("job", 3));
  ASSERT_TRUE(ref.ok());
  for (uint64_t first = 1; first <= 281; first += 40) {
    ASSERT_TRUE(reference->Append(ref->key, with_clock(first, 40)).ok());
  }
  const v1::RankSummary summary = RankOf(*reference, "job", 3);
  ASSERT_TRUE(summary.has_clock());
  EXPECT_EQ(summary.clock().offset_ns(), -3'037 * kMs);
  EXPECT_EQ(summary.clock().round_trip_ns(), 400'000);
  absl::StatusOr<v1::GetRollupsResponse> want = reference->Rollups("job", RollupAxis::kTime);
  ASSERT_TRUE(want.ok());
  // Event 1 is at kT0 + 1 ms on the rank's clock: kT0 - 3.009 s collector time.
  const v1::StepRollup& first_row = want->ranks(0).steps(0);
  EXPECT_EQ(first_row.step(), (kT0 + 1 * kMs - 3'010 * kMs) / (50 * kMs));
  EXPECT_EQ(first_row.start_ns(), first_row.step() * 50 * kMs);

  options.dir = dir;
  {
    auto store = OpenOrDie(options);
    absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 3));
    ASSERT_TRUE(s.ok());
    for (uint64_t first = 1; first <= 201; first += 40) {
      ASSERT_TRUE(store->Append(s->key, with_clock(first, 40)).ok());
    }
  }  // dies with the stream open
  auto store = OpenOrDie(options);
  absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 3));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(store->Append(s->key, with_clock(241, 40)).ok());
  ASSERT_TRUE(store->Append(s->key, with_clock(281, 40)).ok());
  EXPECT_GT(ExpectSameRows(*store, *reference, RollupAxis::kTime), 0);
  ASSERT_TRUE(store->CloseStream(s->key, true).ok());
  ASSERT_TRUE(reference->CloseStream(ref->key, true).ok());
}

// The rows a kScalars reader gets: (axis, rows) of the job's only stream.
std::vector<std::string> ScalarRows(const EventStore& store, const std::string& job,
                                    RollupAxis axis, RollupDetail detail) {
  std::vector<std::string> rows;
  int64_t bucket_ns = 0;
  absl::Status s = store.VisitRollups(
      job, axis, detail, &bucket_ns, [](const v1::RankRollups&) { return absl::OkStatus(); },
      [&](const v1::StepRollup& row) {
        v1::StepRollup scalars = row;
        scalars.clear_by_tag();
        scalars.clear_by_source();
        scalars.clear_by_phase();
        rows.push_back(scalars.SerializeAsString());
      });
  EXPECT_TRUE(s.ok()) << s;
  return rows;
}

// The series (closed rows' scalars, 64 to a value, plus the open row) must give exactly the
// rows the rollups family has, without their lists: across segment boundaries, a step that
// goes backwards (its row rewritten), time buckets, and a restart in the middle.
TEST(EventStoreTest, ScalarRowsFromTheSeriesEqualTheFullRowsWithoutTheirLists) {
  const std::string dir = TestDir("series");
  EventStoreOptions options = Options(dir);
  options.bucket_ns = 37 * kMs;
  std::vector<Event> events = MakeEvents(1, 2000);  // 200 steps over 2 s: several segments
  // Step 150's marker goes back to step 60 (counted, and step 60's row is written again).
  for (Event& e : events) {
    if (e.kind == EventKind::kStep && e.aux == 150) e.aux = 60;
  }
  {
    auto store = OpenOrDie(options);
    absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 1));
    ASSERT_TRUE(s.ok());
    for (size_t first = 0; first < 1000; first += 77) {
      const size_t n = std::min<size_t>(77, 1000 - first);
      ASSERT_TRUE(store
                      ->Append(s->key, Batch(std::vector<Event>(events.begin() + first,
                                                                events.begin() + first + n)))
                      .ok());
    }
  }  // dies with the stream open: the series segment in memory is gone
  auto store = OpenOrDie(options);
  absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 1));
  ASSERT_TRUE(s.ok()) << s.status();
  // Batches of 101 events: one ends at event 1505, while the reopened step 60 is open (its
  // marker is event 1500, the next one 1510).
  for (size_t first = 1000; first < events.size(); first += 101) {
    const size_t n = std::min<size_t>(101, events.size() - first);
    ASSERT_TRUE(store
                    ->Append(s->key, Batch(std::vector<Event>(events.begin() + first,
                                                              events.begin() + first + n)))
                    .ok());
    for (RollupAxis axis : {RollupAxis::kStep, RollupAxis::kTime}) {
      const std::vector<std::string> full = ScalarRows(*store, "job", axis, RollupDetail::kFull);
      const std::vector<std::string> scalars =
          ScalarRows(*store, "job", axis, RollupDetail::kScalars);
      ASSERT_GT(full.size(), 3u);
      ASSERT_EQ(scalars, full) << "after event " << first + n << ", axis "
                               << static_cast<int>(axis);
    }
  }
  EXPECT_EQ(RankOf(*store, "job", 1).anomaly_counts().step_backwards(), 1u);
  ASSERT_TRUE(store->CloseStream(s->key, true).ok());
}

TEST(EventStoreTest, StepRollupsAreStoredPerStepWithTheOpenOneRewritten) {
  auto store = OpenOrDie(Options(TestDir("rollups")));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 0));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(store->Append(s->key, Batch(MakeEvents(1, 25))).ok());
  absl::StatusOr<v1::GetRollupsResponse> rollups = store->Rollups("job", RollupAxis::kStep);
  ASSERT_TRUE(rollups.ok()) << rollups.status();
  ASSERT_EQ(rollups->ranks_size(), 1);
  const v1::RankRollups& r = rollups->ranks(0);
  // Steps 0 (events 1-9), 1 (10-19) closed, 2 (20-25) open.
  ASSERT_EQ(r.steps_size(), 3);
  EXPECT_EQ(r.steps(0).step(), 0);
  EXPECT_EQ(r.steps(0).allocs(), 9u);
  EXPECT_EQ(r.steps(1).step(), 1);
  EXPECT_EQ(r.steps(2).step(), 2);
  EXPECT_EQ(r.steps(2).end_ns(), kT0 + 25 * kMs);
  ASSERT_TRUE(store->Append(s->key, Batch(MakeEvents(26, 3))).ok());
  rollups = store->Rollups("job", RollupAxis::kStep);
  ASSERT_EQ(rollups->ranks(0).steps_size(), 3);
  EXPECT_EQ(rollups->ranks(0).steps(2).end_ns(), kT0 + 28 * kMs);
  EXPECT_EQ(rollups->ranks(0).steps(2).end_bytes(), ExpectedLive(28));
  EXPECT_EQ(rollups->bucket_ns(), 1'000'000'000);
  ASSERT_TRUE(store->CloseStream(s->key, true).ok());
}

TEST(EventStoreTest, RollupsOfSomeRanksAndWithinABound) {
  auto store = OpenOrDie(Options(TestDir("rollups-selected")));
  ASSERT_NE(store, nullptr);
  for (int32_t rank : {0, 1, 2}) {
    absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", rank));
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(store->Append(s->key, Batch(MakeEvents(1, 25))).ok());
    ASSERT_TRUE(store->CloseStream(s->key, true).ok());
  }
  absl::StatusOr<v1::GetRollupsResponse> all = store->Rollups("job", RollupAxis::kStep);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->ranks_size(), 3);
  RollupSelection selection;
  selection.ranks = {2, 0};
  absl::StatusOr<v1::GetRollupsResponse> some = store->Rollups("job", RollupAxis::kStep, selection);
  ASSERT_TRUE(some.ok()) << some.status();
  ASSERT_EQ(some->ranks_size(), 2);  // in the store's order, as in the whole job's answer
  EXPECT_EQ(some->ranks(0).SerializeAsString(), all->ranks(0).SerializeAsString());
  EXPECT_EQ(some->ranks(1).SerializeAsString(), all->ranks(2).SerializeAsString());
  // The bound counts what the answer serializes to (a few bytes over, per message).
  selection.ranks.clear();
  selection.max_bytes = all->ByteSizeLong() * 2;
  EXPECT_TRUE(store->Rollups("job", RollupAxis::kStep, selection).ok());
  selection.max_bytes = all->ByteSizeLong() / 2;
  absl::Status refused = store->Rollups("job", RollupAxis::kStep, selection).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "max_response_bytes")) << refused;
  // Whatever the bound, an answer given fits in it (the last rank's rows are counted too), and
  // one is refused only when the whole would not fit.
  const uint64_t whole = all->ByteSizeLong();
  for (uint64_t bound = whole / 4; bound <= whole + 64; bound += 7) {
    selection.max_bytes = bound;
    absl::StatusOr<v1::GetRollupsResponse> got =
        store->Rollups("job", RollupAxis::kStep, selection);
    if (got.ok()) {
      EXPECT_LE(got->ByteSizeLong(), bound);
      EXPECT_EQ(got->ranks_size(), 3);
    } else {
      EXPECT_EQ(got.status().code(), absl::StatusCode::kResourceExhausted) << got.status();
    }
  }
}

TEST(EventStoreTest, PagesOfRollupsEndAtRankBoundariesAndTogetherAreTheWhole) {
  auto store = OpenOrDie(Options(TestDir("rollups-paged")));
  ASSERT_NE(store, nullptr);
  // Rank 1 has two attempts: a page holds both or neither.
  for (auto [rank, attempt] : std::vector<std::pair<int32_t, uint32_t>>{
           {0, 0}, {1, 0}, {1, 1}, {2, 0}, {3, 0}, {4, 0}}) {
    absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", rank, attempt));
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(store->Append(s->key, Batch(MakeEvents(1, 25))).ok());
    ASSERT_TRUE(store->CloseStream(s->key, true).ok());
  }
  absl::StatusOr<v1::GetRollupsResponse> all = store->Rollups("job", RollupAxis::kStep);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->ranks_size(), 6);
  EXPECT_FALSE(all->has_next_rank());
  const uint64_t whole = all->ByteSizeLong();
  uint64_t largest_rank = 0;  // the bytes of one rank, both attempts of rank 1 together
  for (int i = 0; i < all->ranks_size(); ++i) {
    uint64_t bytes = all->ranks(i).ByteSizeLong();
    if (i + 1 < all->ranks_size() && all->ranks(i + 1).rank() == all->ranks(i).rank()) {
      bytes += all->ranks(++i).ByteSizeLong();
    }
    largest_rank = std::max(largest_rank, bytes);
  }
  int paged_bounds = 0;
  for (uint64_t bound = largest_rank / 2; bound <= whole + 64; bound += 11) {
    SCOPED_TRACE(bound);
    RollupSelection selection;
    selection.max_bytes = bound;
    selection.partial = true;
    v1::GetRollupsResponse joined;
    int pages = 0;
    absl::Status status;
    for (;;) {
      absl::StatusOr<v1::GetRollupsResponse> page =
          store->Rollups("job", RollupAxis::kStep, selection);
      if (!page.ok()) {
        status = page.status();
        break;
      }
      ++pages;
      EXPECT_LE(page->ByteSizeLong(), bound);
      ASSERT_GT(page->ranks_size(), 0);
      for (const v1::RankRollups& r : page->ranks()) *joined.add_ranks() = r;
      joined.set_bucket_ns(page->bucket_ns());
      if (!page->has_next_rank()) break;
      ASSERT_GT(page->next_rank(), page->ranks(page->ranks_size() - 1).rank());
      selection.from_rank = page->next_rank();
    }
    if (!status.ok()) {
      // Only a rank larger than the bound on its own is refused, and it is named.
      EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
      EXPECT_TRUE(absl::StrContains(status.message(), "alone exceed max_response_bytes"))
          << status;
      EXPECT_LT(bound, largest_rank + 64);
      continue;
    }
    EXPECT_EQ(joined.SerializeAsString(), all->SerializeAsString());
    if (pages > 1) ++paged_bounds;
  }
  EXPECT_GT(paged_bounds, 0);
}

TEST(EventStoreTest, SeedsAtTheFirstMarkersInstantLeaveNoStepZeroRowWhateverTheBatches) {
  // The importer's seeds (memory there before the trace began) and the first ProfilerStep come
  // at one instant; the agent may cut a batch between them. One batch or two, the seeds are
  // the floor of step 5, not a step 0 of their own.
  for (size_t cut : {size_t{3}, size_t{2}, size_t{1}}) {
    SCOPED_TRACE(cut);
    auto store = OpenOrDie(Options(TestDir(absl::StrCat("seeds-", cut))));
    ASSERT_NE(store, nullptr);
    absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 0));
    ASSERT_TRUE(s.ok());
    std::vector<Event> events;
    for (uint64_t seq = 1; seq <= 4; ++seq) {
      Event e;
      e.seq = seq;
      e.ts_ns = kT0 + (seq == 4 ? kMs : 0);
      e.kind = seq == 3 ? EventKind::kStep : EventKind::kAlloc;
      e.aux = seq == 3 ? 5 : 0;
      e.address = 0x1000 * seq;
      e.bytes = seq == 3 ? 0 : 100;
      e.memory_kind = kMemoryDevice;
      events.push_back(e);
    }
    const std::vector<Event> first(events.begin(), events.begin() + cut);
    const std::vector<Event> rest(events.begin() + cut, events.end());
    ASSERT_TRUE(store->Append(s->key, Batch(first)).ok());
    ASSERT_TRUE(store->Append(s->key, Batch(rest)).ok());
    absl::StatusOr<v1::GetRollupsResponse> rollups = store->Rollups("job", RollupAxis::kStep);
    ASSERT_TRUE(rollups.ok()) << rollups.status();
    ASSERT_EQ(rollups->ranks_size(), 1);
    ASSERT_EQ(rollups->ranks(0).steps_size(), 1);
    EXPECT_EQ(rollups->ranks(0).steps(0).step(), 5);
    EXPECT_EQ(rollups->ranks(0).steps(0).floor_bytes(), 200u);
    EXPECT_EQ(rollups->ranks(0).steps(0).end_bytes(), 300u);
  }
}

TEST(EventStoreTest, LiveAllocationsAtATimeReplaysFromTheNearestCheckpoint) {
  auto store = OpenOrDie(Options(TestDir("live")));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 5));
  ASSERT_TRUE(s.ok());
  // Checkpoints every 3 steps (30 events); batches of 7 put the cut points anywhere.
  for (uint64_t first = 1; first <= 197; first += 7) {
    ASSERT_TRUE(store->Append(s->key, Batch(MakeEvents(first, 7))).ok());
  }
  for (uint64_t at : {1, 9, 31, 64, 100, 150, 203}) {
    absl::StatusOr<LiveSnapshot> live = store->LiveAllocations(
        "job", 5, std::nullopt, LivePoint{LivePoint::Kind::kAtTime, kT0 + int64_t(at) * kMs});
    ASSERT_TRUE(live.ok()) << live.status();
    EXPECT_EQ(live->seq, at) << "at " << at;
    EXPECT_EQ(live->ts_ns, kT0 + int64_t(at) * kMs);
    EXPECT_EQ(live->live_bytes, ExpectedLive(at)) << "at " << at;
    EXPECT_EQ(live->step, int64_t(at / 10));
    uint64_t sum = 0;
    for (const auto& [address, a] : live->allocations) {
      sum += a.bytes;
      EXPECT_EQ(address, 0x1000 * a.seq);
      EXPECT_EQ(a.step, int64_t(a.seq / 10));
      EXPECT_EQ(a.tag_id, 1 + a.seq % 2);
    }
    EXPECT_EQ(sum, live->live_bytes);
  }
  // Before the first event: nothing is live.
  absl::StatusOr<LiveSnapshot> early =
      store->LiveAllocations("job", 5, 0, LivePoint{LivePoint::Kind::kAtTime, kT0});
  ASSERT_TRUE(early.ok());
  EXPECT_EQ(early->seq, 0u);
  EXPECT_TRUE(early->allocations.empty());
  absl::StatusOr<LiveSnapshot> now = store->LiveAllocations("job", 5, std::nullopt, LivePoint{});
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->seq, 203u);
  EXPECT_EQ(now->live_bytes, ExpectedLive(203));
  ASSERT_TRUE(store->CloseStream(s->key, true).ok());
}

TEST(EventStoreTest, ACheckpointPastAnEarlierLaterEventIsNotWhereAReplayToATimeStarts) {
  auto store = OpenOrDie(Options(TestDir("live-backwards")));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 0));
  ASSERT_TRUE(s.ok());
  // Times 1, 3, 2 ms: the state "at 2.5 ms" is after event 1 only (a replay stops at the first
  // event past the time), whether or not a checkpoint was written after event 3.
  std::vector<Event> events = MakeEvents(1, 3);
  events[1].ts_ns = kT0 + 3 * kMs;
  events[2].ts_ns = kT0 + 2 * kMs;
  ASSERT_TRUE(store->Append(s->key, Batch(events)).ok());
  const LivePoint at{LivePoint::Kind::kAtTime, kT0 + 2 * kMs + kMs / 2};
  for (bool checkpointed : {false, true}) {
    if (checkpointed) {
      ASSERT_TRUE(store->CloseStream(s->key, true).ok());  // writes one
    }
    absl::StatusOr<LiveSnapshot> live = store->LiveAllocations("job", 0, std::nullopt, at);
    ASSERT_TRUE(live.ok()) << live.status();
    EXPECT_EQ(live->seq, 1u) << "checkpointed " << checkpointed;
    EXPECT_EQ(live->allocations.size(), 1u) << "checkpointed " << checkpointed;
  }
}

// MakeEvents(first, count), with event 42 (an allocation) stamped at `ts_ns` when it is among
// them.
DecodedBatch BatchWithEvent42At(uint64_t first, uint64_t count, int64_t ts_ns) {
  std::vector<Event> events = MakeEvents(first, count);
  for (Event& e : events) {
    if (e.seq == 42) e.ts_ns = ts_ns;
  }
  return Batch(std::move(events));
}

TEST(EventStoreTest, AFarFutureTimestampIsNoTimeWhenStoredNorAfterARestart) {
  constexpr int64_t kYear2200 = int64_t{7'258'118'400} * 1'000'000'000;
  const std::string dir = TestDir("future");
  EventStoreOptions options = Options(dir);
  options.bucket_ns = 20 * kMs;
  options.now_ns = [] { return kT0 + 1'000 * kMs; };
  // The reference: event 42 at the time of event 41, where the garbage one is to be held.
  EventStoreOptions reference_options = options;
  reference_options.dir = dir + "-reference";
  auto reference = OpenOrDie(reference_options);
  absl::StatusOr<OpenedStream> ref = reference->OpenStream(Identity("job", 2));
  ASSERT_TRUE(ref.ok());
  for (uint64_t first = 1; first <= 197; first += 7) {
    ASSERT_TRUE(reference->Append(ref->key, BatchWithEvent42At(first, 7, kT0 + 41 * kMs)).ok());
  }
  {
    // Up to event 48, and the collector dies: no checkpoint after event 42 (every 3 steps), so
    // the restart replays its block.
    auto store = OpenOrDie(options);
    absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 2));
    ASSERT_TRUE(s.ok());
    for (uint64_t first = 1; first <= 43; first += 7) {
      ASSERT_TRUE(store->Append(s->key, BatchWithEvent42At(first, 7, kYear2200)).ok());
    }
  }
  auto store = OpenOrDie(options);
  absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 2));
  ASSERT_TRUE(s.ok()) << s.status();
  for (uint64_t first = 50; first <= 197; first += 7) {
    ASSERT_TRUE(store->Append(s->key, BatchWithEvent42At(first, 7, kYear2200)).ok());
  }
  const v1::RankSummary summary = RankOf(*store, "job", 2);
  EXPECT_EQ(summary.anomaly_counts().time_future(), 1u);
  EXPECT_EQ(summary.anomaly_counts().time_backwards(), 0u);
  EXPECT_EQ(summary.last_ts_ns(), kT0 + 203 * kMs);
  EXPECT_GE(ExpectSameRows(*store, *reference, RollupAxis::kTime), 10);
  EXPECT_GE(ExpectSameRows(*store, *reference, RollupAxis::kStep), 20);
  // A replay to a time after it does not stop at it, from a checkpoint before it or not.
  for (uint64_t at : {45, 150}) {
    absl::StatusOr<LiveSnapshot> live = store->LiveAllocations(
        "job", 2, std::nullopt, LivePoint{LivePoint::Kind::kAtTime, kT0 + int64_t(at) * kMs});
    ASSERT_TRUE(live.ok()) << live.status();
    EXPECT_EQ(live->seq, at);
    EXPECT_EQ(live->live_bytes, ExpectedLive(at)) << "at " << at;
  }
  // The raw event keeps its timestamp.
  absl::StatusOr<StoredEvents> stored = store->ReadEvents("job", 2, 0, 42, 1);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->events.size(), 1u);
  EXPECT_EQ(stored->events[0].ts_ns, kYear2200);
  // With the horizon it was stored with, which places it where the rollups do: every event at
  // the reference's time.
  absl::StatusOr<StoredEvents> all = store->ReadEvents("job", 2, 0, 1, 0);
  absl::StatusOr<StoredEvents> expected = reference->ReadEvents("job", 2, 0, 1, 0);
  ASSERT_TRUE(all.ok() && expected.ok());
  ASSERT_EQ(all->events.size(), 203u);
  ASSERT_EQ(expected->events.size(), 203u);
  size_t i = 0;
  int64_t previous_ts_ns = 0;
  for (const TimeHorizonRun& run : all->time_horizons) {
    EXPECT_EQ(run.horizon_ns, kT0 + 1'000 * kMs + 24 * 3600 * int64_t{1'000'000'000});
    for (uint32_t k = 0; k < run.events && i < all->events.size(); ++k, ++i) {
      const int64_t ts =
          TimeWithinHorizon(all->events[i].ts_ns, run.horizon_ns, i > 0, previous_ts_ns);
      EXPECT_EQ(ts, expected->events[i].ts_ns) << "seq " << all->events[i].seq;
      previous_ts_ns = ts;
    }
  }
  EXPECT_EQ(i, all->events.size());
  ASSERT_TRUE(store->CloseStream(s->key, true).ok());
  ASSERT_TRUE(reference->CloseStream(ref->key, true).ok());
}

TEST(EventStoreTest, LiveAllocationsAtACollectorTimeShiftsItByTheRanksClockOffset) {
  auto store = OpenOrDie(Options(TestDir("live-collector-time")));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 0));
  ASSERT_TRUE(s.ok());
  // The rank's clock runs 1 s ahead of the collector's.
  constexpr int64_t kOffset = -1000 * kMs;
  DecodedBatch batch = Batch(MakeEvents(1, 60));
  batch.clock = ClockEstimate{kOffset, 0};
  ASSERT_TRUE(store->Append(s->key, batch).ok());
  for (uint64_t at : {0, 1, 17, 42, 60}) {
    const int64_t rank_time = kT0 + int64_t(at) * kMs;
    absl::StatusOr<LiveSnapshot> own = store->LiveAllocations(
        "job", 0, std::nullopt, LivePoint{LivePoint::Kind::kAtTime, rank_time});
    absl::StatusOr<LiveSnapshot> collector = store->LiveAllocations(
        "job", 0, std::nullopt, LivePoint{LivePoint::Kind::kAtCollectorTime, rank_time + kOffset});
    ASSERT_TRUE(own.ok() && collector.ok());
    EXPECT_EQ(collector->seq, at);
    EXPECT_EQ(collector->seq, own->seq);
    EXPECT_EQ(collector->live_bytes, own->live_bytes);
    EXPECT_EQ(collector->clock_offset_ns, kOffset);
  }
  // At the end of the clock the shift saturates instead of wrapping to the start.
  absl::StatusOr<LiveSnapshot> end = store->LiveAllocations(
      "job", 0, std::nullopt,
      LivePoint{LivePoint::Kind::kAtCollectorTime, std::numeric_limits<int64_t>::max()});
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->seq, 60u);
  ASSERT_TRUE(store->CloseStream(s->key, true).ok());
}

// Two ranks step at the same moments, one on a host whose clock runs 5 s ahead. Step rows and
// the job's span are handed out in the collector's clock, so the ranks' steps line up (bucket
// rows always were).
TEST(EventStoreTest, StepRowsAndTheJobsSpanAreInTheCollectorsClock) {
  auto store = OpenOrDie(Options(TestDir("step-collector-time")));
  ASSERT_NE(store, nullptr);
  constexpr int64_t kAhead = 5000 * kMs;
  for (int32_t rank : {0, 1}) {
    absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", rank));
    ASSERT_TRUE(s.ok());
    DecodedBatch batch = Batch(MakeEvents(1, 60));
    if (rank == 1) {
      for (Event& e : batch.events) e.ts_ns += kAhead;
      batch.clock = ClockEstimate{-kAhead, 0};
    }
    ASSERT_TRUE(store->Append(s->key, batch).ok());
    ASSERT_TRUE(store->CloseStream(s->key, true).ok());
  }
  for (RollupDetail detail : {RollupDetail::kFull, RollupDetail::kScalars}) {
    std::map<int64_t, std::vector<std::tuple<int64_t, int64_t, int64_t>>> times_by_step;
    int64_t bucket_ns = 0;
    ASSERT_TRUE(store
                    ->VisitRollups(
                        "job", RollupAxis::kStep, detail, &bucket_ns,
                        [](const v1::RankRollups&) { return absl::OkStatus(); },
                        [&](const v1::StepRollup& row) {
                          times_by_step[row.step()].push_back(
                              {row.start_ns(), row.end_ns(), row.peak_ns()});
                        })
                    .ok());
    ASSERT_EQ(times_by_step.size(), 7u);  // steps 1..6 and the 0 before the first marker
    for (const auto& [step, times] : times_by_step) {
      ASSERT_EQ(times.size(), 2u) << "step " << step;
      EXPECT_EQ(times[0], times[1]) << "step " << step;
    }
    EXPECT_EQ(std::get<0>(times_by_step[3][0]), kT0 + 30 * kMs);
    EXPECT_GT(std::get<2>(times_by_step[3][0]), kT0 + 30 * kMs - kMs);  // the peak's moment too
  }
  absl::StatusOr<std::vector<v1::JobSummary>> jobs = store->ListJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ(jobs->front().first_ts_ns(), kT0 + 1 * kMs);
  EXPECT_EQ(jobs->front().last_ts_ns(), kT0 + 60 * kMs);
  // The ranks' own summaries keep their own clocks.
  absl::StatusOr<std::vector<v1::RankSummary>> ranks = store->ListRanks("job");
  ASSERT_TRUE(ranks.ok());
  ASSERT_EQ(ranks->size(), 2u);
  EXPECT_EQ((*ranks)[1].first_ts_ns(), kT0 + 1 * kMs + kAhead);
}

TEST(EventStoreTest, LiveAllocationsAtFirstOom) {
  auto store = OpenOrDie(Options(TestDir("oom")));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 0));
  ASSERT_TRUE(s.ok());
  std::vector<Event> events = MakeEvents(1, 60);
  events[44].kind = EventKind::kOom;  // seq 45
  events[44].bytes = 1 << 30;
  events[44].address = 0;
  ASSERT_TRUE(store->Append(s->key, Batch(events)).ok());
  ASSERT_TRUE(store->Append(s->key, Batch(MakeEvents(61, 40))).ok());
  absl::StatusOr<LiveSnapshot> live =
      store->LiveAllocations("job", 0, std::nullopt, LivePoint{LivePoint::Kind::kFirstOom, 0});
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_EQ(live->seq, 45u);
  EXPECT_EQ(live->oom_requested_bytes, uint64_t{1} << 30);
  EXPECT_EQ(live->live_bytes, ExpectedLive(44));
  const v1::RankSummary rank = RankOf(*store, "job", 0);
  EXPECT_EQ(rank.ooms(), 1u);
  EXPECT_EQ(rank.first_oom_seq(), 45u);

  absl::StatusOr<OpenedStream> other = store->OpenStream(Identity("job", 1));
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(store->Append(other->key, Batch(MakeEvents(1, 5))).ok());
  EXPECT_EQ(store->LiveAllocations("job", 1, std::nullopt, LivePoint{LivePoint::Kind::kFirstOom})
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store->LiveAllocations("job", 9, std::nullopt, LivePoint{}).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(store->CloseStream(s->key, true).ok());
  ASSERT_TRUE(store->CloseStream(other->key, true).ok());
}

TEST(EventStoreTest, UnknownJobIsNotFoundNamingTheJob) {
  auto store = OpenOrDie(Options(TestDir("unknown")));
  ASSERT_NE(store, nullptr);
  const std::vector<absl::Status> statuses = {
      store->ListRanks("nope").status(),
      store->Rollups("nope", RollupAxis::kStep).status(),
      store->ReadEvents("nope", 0, 0, 0, 0).status(),
      store->LiveAllocations("nope", 0, std::nullopt, LivePoint{}).status(),
  };
  for (const absl::Status& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
    EXPECT_NE(s.message().find("\"nope\""), absl::string_view::npos) << s;
  }
}

TEST(EventStoreTest, WorkersWithoutLauncherRankGetStableSyntheticRanks) {
  const std::string dir = TestDir("synthetic");
  StreamKey first;
  {
    auto store = OpenOrDie(Options(dir));
    ASSERT_NE(store, nullptr);
    absl::StatusOr<OpenedStream> a = store->OpenStream(Identity("ray-job", -1));
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->identified_by, "host+device+pid");
    first = a->key;
    v1::RankIdentity other_pid = Identity("ray-job", -1);
    other_pid.set_pid(999);
    absl::StatusOr<OpenedStream> b = store->OpenStream(other_pid);
    ASSERT_TRUE(b.ok());
    EXPECT_NE(b->key.rank, a->key.rank);
    // A launcher rank in the same job does not collide with the synthetic numbers.
    absl::StatusOr<OpenedStream> c = store->OpenStream(Identity("ray-job", 0));
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->key.rank, 0u);
    EXPECT_NE(a->key.rank, 0u);
    // Nor can a launcher rank be one of them: those numbers are refused.
    for (int rank : {1'000'000, static_cast<int>(a->key.rank), 2'000'000'000}) {
      absl::StatusOr<OpenedStream> clash = store->OpenStream(Identity("ray-job", rank));
      EXPECT_EQ(clash.status().code(), absl::StatusCode::kInvalidArgument) << rank;
      EXPECT_NE(clash.status().message().find("below 1000000"), absl::string_view::npos)
          << clash.status();
    }
    absl::StatusOr<OpenedStream> highest = store->OpenStream(Identity("ray-job", 999'999));
    ASSERT_TRUE(highest.ok()) << highest.status();
    ASSERT_TRUE(store->CloseStream(highest->key, true).ok());
    ASSERT_TRUE(store->CloseStream(a->key, true).ok());
    ASSERT_TRUE(store->CloseStream(b->key, true).ok());
    ASSERT_TRUE(store->CloseStream(c->key, true).ok());
    const v1::RankSummary summary = RankOf(*store, "ray-job", a->key.rank);
    EXPECT_EQ(summary.identified_by(), "host+device+pid");
    EXPECT_EQ(summary.identity().rank(), -1);
  }
  auto store = OpenOrDie(Options(dir));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<OpenedStream> again = store->OpenStream(Identity("ray-job", -1));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->key, first);
  ASSERT_TRUE(store->CloseStream(again->key, true).ok());

  // A process that got the same pid later (a restarted container) is another worker: its own
  // synthetic rank, so its events are not taken for resends of the earlier one's.
  v1::RankIdentity started = Identity("ray-job", -1);
  started.set_process_start_ns(1000);
  absl::StatusOr<OpenedStream> earlier = store->OpenStream(started);
  ASSERT_TRUE(earlier.ok());
  ASSERT_TRUE(store->Append(earlier->key, Batch(MakeEvents(1, 10))).ok());
  ASSERT_TRUE(store->CloseStream(earlier->key, true).ok());
  started.set_process_start_ns(2000);
  absl::StatusOr<OpenedStream> later = store->OpenStream(started);
  ASSERT_TRUE(later.ok());
  EXPECT_FALSE(later->key == earlier->key);
  EXPECT_FALSE(later->key == first);
  EXPECT_EQ(later->durable_seq, 0u);
  absl::StatusOr<AppendResult> appended = store->Append(later->key, Batch(MakeEvents(1, 10)));
  ASSERT_TRUE(appended.ok());
  EXPECT_EQ(appended->stored, 10u);
  ASSERT_TRUE(store->CloseStream(later->key, true).ok());
}

TEST(EventStoreTest, CleanCloseMarksCompleteAndReconnectClearsIt) {
  auto store = OpenOrDie(Options(TestDir("complete")));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 0));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(store->Append(s->key, Batch(MakeEvents(1, 5))).ok());
  ASSERT_TRUE(store->CloseStream(s->key, true).ok());
  EXPECT_TRUE(RankOf(*store, "job", 0).complete());
  s = store->OpenStream(Identity("job", 0));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->durable_seq, 5u);
  EXPECT_FALSE(RankOf(*store, "job", 0).complete());
  ASSERT_TRUE(store->CloseStream(s->key, false).ok());
  EXPECT_FALSE(RankOf(*store, "job", 0).complete());
}

TEST(EventStoreTest, AnOlderConnectionClosingLateDoesNotUndoTheNewerOnesCleanClose) {
  // The agent's connection broke on its side only; it reconnected (the same process), finished
  // and closed cleanly; the collector noticed the dead connection later.
  auto store = OpenOrDie(Options(TestDir("late-close")));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<OpenedStream> dead = store->OpenStream(Identity("job", 0));
  ASSERT_TRUE(dead.ok());
  absl::StatusOr<OpenedStream> live = store->OpenStream(Identity("job", 0));
  ASSERT_TRUE(live.ok());
  EXPECT_GT(live->connection, dead->connection);
  ASSERT_TRUE(store->Append(live->key, Batch(MakeEvents(1, 5))).ok());
  ASSERT_TRUE(store->CloseStream(live->key, true, live->connection).ok());
  ASSERT_TRUE(store->CloseStream(dead->key, false, dead->connection).ok());
  EXPECT_TRUE(RankOf(*store, "job", 0).complete());

  // The newest connection vanishing still leaves the rank incomplete, whatever closed first.
  absl::StatusOr<OpenedStream> first = store->OpenStream(Identity("job", 0));
  absl::StatusOr<OpenedStream> second = store->OpenStream(Identity("job", 0));
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE(store->CloseStream(first->key, true, first->connection).ok());
  ASSERT_TRUE(store->CloseStream(second->key, false, second->connection).ok());
  EXPECT_FALSE(RankOf(*store, "job", 0).complete());
}

// The same, raced: the old connection's close has found the stream when the new connection
// opens, writes and closes cleanly; the old close must still see that it was superseded.
TEST(EventStoreTest, ANewerConnectionThatClosesDuringAnOlderOnesCloseDecides) {
  auto store = OpenOrDie(Options(TestDir("close-race")));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<OpenedStream> old_connection = store->OpenStream(Identity("job", 0));
  ASSERT_TRUE(old_connection.ok());
  bool ran = false;
  store->RunInNextCloseForTest([&] {
    ran = true;
    absl::StatusOr<OpenedStream> newer = store->OpenStream(Identity("job", 0));
    ASSERT_TRUE(newer.ok());
    ASSERT_TRUE(store->Append(newer->key, Batch(MakeEvents(1, 5))).ok());
    ASSERT_TRUE(store->CloseStream(newer->key, true, newer->connection).ok());
  });
  ASSERT_TRUE(store->CloseStream(old_connection->key, false, old_connection->connection).ok());
  EXPECT_TRUE(ran);
  EXPECT_TRUE(RankOf(*store, "job", 0).complete());
}

TEST(EventStoreTest, AttemptsAreSeparateStreams) {
  auto store = OpenOrDie(Options(TestDir("attempts")));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<OpenedStream> a0 = store->OpenStream(Identity("job", 0, 0));
  absl::StatusOr<OpenedStream> a1 = store->OpenStream(Identity("job", 0, 1));
  ASSERT_TRUE(a0.ok() && a1.ok());
  ASSERT_TRUE(store->Append(a0->key, Batch(MakeEvents(1, 10))).ok());
  ASSERT_TRUE(store->Append(a1->key, Batch(MakeEvents(1, 4))).ok());
  EXPECT_EQ(store->ListRanks("job")->size(), 2u);
  EXPECT_EQ(store->ListJobs()->at(0).ranks(), 1u);
  absl::StatusOr<LiveSnapshot> latest = store->LiveAllocations("job", 0, std::nullopt, {});
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->key.attempt, 1u);
  EXPECT_EQ(latest->seq, 4u);
  ASSERT_TRUE(store->CloseStream(a0->key, true).ok());
  ASSERT_TRUE(store->CloseStream(a1->key, true).ok());
}

TEST(EventStoreTest, EmptyJobIdIsRejected) {
  auto store = OpenOrDie(Options(TestDir("empty-job")));
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->OpenStream(Identity("", 0)).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(EventStoreTest, AppendToAStreamThatIsNotOpenFails) {
  auto store = OpenOrDie(Options(TestDir("not-open")));
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Append(StreamKey{1, 0, 0}, Batch(MakeEvents(1, 1))).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// Flushes every family of the store in `dir` (closed) into table files, straight through
// RocksDB, and returns the table files of `family`.
std::vector<std::string> FlushAndListTables(const std::string& dir, const std::string& family) {
  rocksdb::DBOptions db_options;
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  rocksdb::ConfigOptions config;
  EXPECT_TRUE(rocksdb::LoadLatestOptions(config, dir, &db_options, &families).ok());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  EXPECT_TRUE(rocksdb::DB::Open(db_options, dir, families, &handles, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  std::vector<std::string> files;
  if (db == nullptr) return files;
  for (rocksdb::ColumnFamilyHandle* h : handles) EXPECT_TRUE(db->Flush({}, h).ok());
  std::vector<rocksdb::LiveFileMetaData> live;
  db->GetLiveFilesMetaData(&live);
  for (const rocksdb::LiveFileMetaData& f : live) {
    if (f.column_family_name == family) files.push_back(f.db_path + f.name);
  }
  for (rocksdb::ColumnFamilyHandle* h : handles) EXPECT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
  return files;
}

TEST(EventStoreTest, ACorruptRollupTableFailsTheReadInsteadOfDroppingRanks) {
  // A checksum error in one rank's rows ended that rank's scan early, and the next rank's Seek
  // cleared it: timeline and leaks answered with a rank missing or cut short, and exit 0.
  const std::string dir = TestDir("corrupt-rollups");
  {
    auto store = OpenOrDie(Options(dir));
    ASSERT_NE(store, nullptr);
    for (int32_t rank = 0; rank < 6; ++rank) {
      absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", rank));
      ASSERT_TRUE(s.ok()) << s.status();
      ASSERT_TRUE(store->Append(s->key, Batch(MakeEvents(1, 16000))).ok());
      ASSERT_TRUE(store->CloseStream(s->key, true).ok());
    }
    absl::StatusOr<v1::GetRollupsResponse> intact = store->Rollups("job", RollupAxis::kStep);
    ASSERT_TRUE(intact.ok()) << intact.status();
    ASSERT_EQ(intact->ranks_size(), 6);
  }
  const std::vector<std::string> tables = FlushAndListTables(dir, "rollups");
  ASSERT_EQ(tables.size(), 1u);
  // Overwrite the middle third of the table: its index and footer at the end stay readable, so
  // the store opens, and the rows of the middle ranks fail their checksums.
  const uintmax_t size = std::filesystem::file_size(tables[0]);
  ASSERT_GT(size, 3 * 32768u) << "too few rows to span several table blocks";
  {
    std::fstream f(tables[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 3));
    const std::string junk(size / 3, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  auto store = OpenOrDie(Options(dir));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<v1::GetRollupsResponse> read = store->Rollups("job", RollupAxis::kStep);
  ASSERT_FALSE(read.ok()) << read->ranks_size() << " ranks, rank 1 with "
                          << (read->ranks_size() > 1 ? read->ranks(1).steps_size() : -1) << " rows";
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_NE(read.status().message().find("reading the rollups of job \"job\" rank "),
            absl::string_view::npos)
      << read.status();
}

TEST(EventStoreTest, OpenFailsClearlyForAnUnusableDirectory) {
  const std::string dir = TestDir("file-in-the-way");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/file") << "x";
  absl::StatusOr<std::unique_ptr<EventStore>> store = EventStore::Open(Options(dir + "/file/db"));
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find(dir + "/file/db"), absl::string_view::npos)
      << store.status();
  // Not a lock held by someone else: no hint sending the reader after another collector.
  EXPECT_EQ(store.status().message().find("another collector"), absl::string_view::npos)
      << store.status();
  EXPECT_FALSE(EventStore::Open(Options("")).ok());
}

// A store that lost its CURRENT file is refused every time: RocksDB's own refusal wrote a new
// CURRENT while refusing, and the next open served an empty store beside the old WAL.
TEST(EventStoreTest, AStoreWithoutItsCurrentFileIsRefusedEveryTime) {
  const std::string dir = TestDir("no-current");
  {
    auto store = OpenOrDie(Options(dir));
    ASSERT_NE(store, nullptr);
    absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 0));
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(store->CloseStream(s->key, true).ok());
  }
  std::filesystem::remove(dir + "/CURRENT");
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<std::unique_ptr<EventStore>> store = EventStore::Open(Options(dir));
    ASSERT_FALSE(store.ok()) << "open " << attempt;
    EXPECT_NE(store.status().message().find("no CURRENT file: a damaged store"),
              absl::string_view::npos)
        << store.status();
    EXPECT_FALSE(std::filesystem::exists(dir + "/CURRENT"));
  }
}

// Connected: a connection of the stream is open now. With `complete` it tells a run still going
// from one that crashed (incomplete, not connected) and one that ended cleanly.
TEST(EventStoreTest, ListRanksSaysWhichStreamsAreConnected) {
  auto store = OpenOrDie(Options(TestDir("connected")));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 0));
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<std::vector<v1::RankSummary>> ranks = store->ListRanks("job");
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  ASSERT_EQ(ranks->size(), 1u);
  EXPECT_TRUE((*ranks)[0].connected());
  EXPECT_FALSE((*ranks)[0].complete());
  ASSERT_TRUE(store->CloseStream(s->key, /*complete=*/false).ok());
  ranks = store->ListRanks("job");
  ASSERT_TRUE(ranks.ok());
  EXPECT_FALSE((*ranks)[0].connected());
  EXPECT_FALSE((*ranks)[0].complete());
}

TEST(EventStoreTest, SecondStoreOnTheSameDirectoryIsRefused) {
  const std::string dir = TestDir("locked");
  auto first = OpenOrDie(Options(dir));
  ASSERT_NE(first, nullptr);
  absl::StatusOr<std::unique_ptr<EventStore>> second = EventStore::Open(Options(dir));
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find(dir), absl::string_view::npos) << second.status();
  EXPECT_NE(second.status().message().find("(is another collector using it?)"),
            absl::string_view::npos)
      << second.status();
}

TEST(EventStoreTest, SyncDurabilityWritesToo) {
  EventStoreOptions options = Options(TestDir("sync"));
  options.durability = Durability::kSync;
  auto store = OpenOrDie(options);
  ASSERT_NE(store, nullptr);
  absl::StatusOr<OpenedStream> s = store->OpenStream(Identity("job", 0));
  ASSERT_TRUE(s.ok());
  absl::StatusOr<AppendResult> r = store->Append(s->key, Batch(MakeEvents(1, 10)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->durable_seq, 10u);
  ASSERT_TRUE(store->CloseStream(s->key, true).ok());
  EXPECT_EQ(*ParseDurability("sync"), Durability::kSync);
  EXPECT_EQ(*ParseDurability("async"), Durability::kAsync);
  EXPECT_FALSE(ParseDurability("fast").ok());
}

}  // namespace
}  // namespace memtrace::collector
