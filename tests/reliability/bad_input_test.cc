// Hostile and broken inputs against the real collector binary: each must end with a clear
// error or a documented, counted anomaly, and the collector must stay up (health is checked
// after every case). The observed outcome of each case is printed as a table row (the source
// of docs/RELIABILITY.md's list).
#include <signal.h>

#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/stream/transport.h"
#include "gtest/gtest.h"
#include "proto/codec/batch_codec.h"
#include "proto/memtrace/v1/ingest.pb.h"
#include "tests/reliability/harness.h"

namespace memtrace::reliability {
namespace {

constexpr int64_t kTs = 1'700'000'000'000'000'000;

std::string Hello(const std::string& job, int32_t rank, const std::string& host = "node-a",
                  uint32_t pid = 100) {
  v1::IngestRequest r;
  v1::RankIdentity* id = r.mutable_hello()->mutable_identity();
  id->set_job_id(job);
  id->set_rank(rank);
  id->set_host(host);
  id->set_pid(pid);
  return r.SerializeAsString();
}

std::string Batch(const v1::EventBatch& batch) {
  v1::IngestRequest r;
  *r.mutable_batch() = batch;
  return r.SerializeAsString();
}

std::string Batch(const std::vector<Event>& events, const std::vector<StringDef>& strings = {}) {
  v1::EventBatch b;
  EncodeBatch(events, strings, {}, &b);
  return Batch(b);
}

Event Ev(uint64_t seq, EventKind kind, uint64_t address = 0, uint64_t bytes = 0, int64_t ts = 0,
         uint32_t tag = 0) {
  Event e;
  e.seq = seq;
  e.kind = kind;
  e.address = address;
  e.bytes = bytes;
  e.ts_ns = ts == 0 ? kTs + static_cast<int64_t>(seq) * 1000 : ts;
  e.tag_id = tag;
  e.memory_kind = kMemoryDevice;
  return e;
}

// A batch-level EventBatch with a valid Hello before it.
std::vector<std::string> AfterHello(const std::string& job, const std::string& batch_bytes) {
  return {Hello(job, 0), batch_bytes};
}

const char* CodeName(grpc::StatusCode c) {
  switch (c) {
    case grpc::OK:
      return "OK";
    case grpc::CANCELLED:
      return "CANCELLED";
    case grpc::UNKNOWN:
      return "UNKNOWN";
    case grpc::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::INTERNAL:
      return "INTERNAL";
    case grpc::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "other";
  }
}

class BadInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    collector_ = std::make_unique<CollectorProcess>(
        FreshDir("bad-input-db"),
        std::vector<std::string>{"--max_message_bytes=4194304", "--max_ranks_per_job=20000"});
    ASSERT_TRUE(collector_->Start(0).ok());
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(collector_->Stop(), 0) << collector_->child()->Stderr();
    // The cases refused many batches and Hellos: the first of each is logged, once, so that an
    // operator sees why agents store nothing; the rest are not.
    const std::string log = collector_->child()->Stderr();
    for (const char* kind :
         {"memtrace-collector: refused a batch for job", "memtrace-collector: refused a Hello: "}) {
      size_t count = 0;
      for (size_t at = log.find(kind); at != std::string::npos; at = log.find(kind, at + 1)) {
        ++count;
      }
      EXPECT_EQ(count, 1u) << kind << "\n" << log;
    }
    EXPECT_NE(log.find("(later refusals of this kind are not logged)"), std::string::npos) << log;
    collector_.reset();
  }

  // Runs one case, prints its row, checks the code (and message part) and that the collector is
  // still up and healthy.
  grpc::Status Case(const std::string& name, const std::vector<std::string>& messages,
                    grpc::StatusCode expected, const std::string& message_part = "") {
    grpc::Status s = RawIngest(collector_->address(), messages);
    std::printf("| %s | %s: %s |\n", name.c_str(), CodeName(s.error_code()),
                s.error_message().substr(0, 160).c_str());
    EXPECT_EQ(s.error_code(), expected) << name << ": " << s.error_message();
    if (!message_part.empty()) {
      EXPECT_NE(s.error_message().find(message_part), std::string::npos)
          << name << ": " << s.error_message();
    }
    ExpectUp(name);
    return s;
  }

  void ExpectUp(const std::string& name) {
    EXPECT_TRUE(collector_->Running()) << "collector died after: " << name;
    EXPECT_TRUE(Healthy(collector_->address())) << "collector unhealthy after: " << name;
  }

  v1::RankSummary Rank(const std::string& job, uint32_t rank) {
    absl::StatusOr<v1::ListRanksResponse> ranks = ListRanks(collector_->address(), job);
    EXPECT_TRUE(ranks.ok()) << job << ": " << ranks.status();
    if (ranks.ok()) {
      for (const v1::RankSummary& r : ranks->ranks()) {
        if (r.rank() == rank) return r;
      }
    }
    ADD_FAILURE() << job << " rank " << rank << " not stored";
    return v1::RankSummary();
  }

  bool JobStored(const std::string& job) { return ListRanks(collector_->address(), job).ok(); }

  static std::unique_ptr<CollectorProcess> collector_;
};

std::unique_ptr<CollectorProcess> BadInputTest::collector_;

TEST_F(BadInputTest, GarbageAndTruncatedProtobufsAreRejected) {
  Case("garbage bytes as first message", {std::string("\xff\xfe\xfd\xfc\xfb\xfa", 6)},
       grpc::StatusCode::INVALID_ARGUMENT, "message 1 of the stream is not a valid");
  const std::string hello = Hello("trunc-job", 0);
  Case("Hello cut in half", {hello.substr(0, hello.size() / 2)}, grpc::StatusCode::INVALID_ARGUMENT,
       "message 1 of the stream is not a valid");
  std::string batch = Batch({Ev(1, EventKind::kAlloc, 0x1000, 4096)});
  Case("batch cut in half after a valid Hello",
       AfterHello("trunc-job", batch.substr(0, batch.size() / 2)),
       grpc::StatusCode::INVALID_ARGUMENT, "message 2 of the stream is not a valid");
  const v1::RankSummary r = Rank("trunc-job", 0);
  EXPECT_EQ(r.events_stored(), 0u);
  EXPECT_FALSE(r.complete()) << "a stream ended by garbage must not count as complete";
  Case("empty message as first message", {std::string()}, grpc::StatusCode::INVALID_ARGUMENT,
       "first message");
}

TEST_F(BadInputTest, WrongFieldTypesAreRejected) {
  // Field 1 (hello) as a varint: protobuf keeps it as an unknown field, so no body is set.
  Case("hello sent as a varint (wrong wire type)", {std::string("\x08\x01", 2)},
       grpc::StatusCode::INVALID_ARGUMENT, "first message");
  // EventBatch.count (field 1, varint) as a length-delimited blob.
  Case("batch.count as bytes (wrong wire type)",
       AfterHello("types-job", std::string("\x12\x05\x0a\x03\x01\x02\x03", 7)),
       grpc::StatusCode::OK);
  // identity.job_id (a string) as a varint: an unknown field, so the job id is empty.
  Case("identity.job_id sent as a varint", {std::string("\x0a\x04\x0a\x02\x08\x05", 6)},
       grpc::StatusCode::INVALID_ARGUMENT, "empty job_id");
  // A packed column (kind) whose length runs past the message end.
  Case("packed column longer than the message",
       AfterHello("types-job", std::string("\x12\x06\x08\x02\x22\x7f\x01\x01", 8)),
       grpc::StatusCode::INVALID_ARGUMENT, "not a valid");
}

TEST_F(BadInputTest, HugeLengthsAndCountsAreRejected) {
  Case("length prefix of 2 GiB", {std::string("\x12\xff\xff\xff\xff\x07\x08\x01", 8)},
       grpc::StatusCode::INVALID_ARGUMENT, "not a valid");
  Case("length prefix of 2 GiB after a Hello",
       AfterHello("huge-job", std::string("\x12\xff\xff\xff\xff\x07\x08\x01", 8)),
       grpc::StatusCode::INVALID_ARGUMENT, "not a valid");
  v1::EventBatch b;
  b.set_count(UINT32_MAX);
  b.set_first_seq(1);
  Case("count = 2^32-1 without columns", AfterHello("huge-job", Batch(b)),
       grpc::StatusCode::RESOURCE_EXHAUSTED, "limit");
  std::vector<Event> many;
  for (uint64_t i = 1; i <= 70000; ++i) many.push_back(Ev(i, EventKind::kStep));
  Case("70000 events in one batch (limit 65536)", AfterHello("huge-job", Batch(many)),
       grpc::StatusCode::RESOURCE_EXHAUSTED, "limit is 65536");
  Case("5 MiB message (over --max_message_bytes=4 MiB)",
       AfterHello("huge-job", Batch({Ev(1, EventKind::kAlloc, 0x1000, 1, 0, 1)},
                                    {{1, StringKind::kTag, std::string(5 << 20, 'x')}})),
       grpc::StatusCode::RESOURCE_EXHAUSTED);
  v1::EventBatch cols;
  cols.set_count(2);
  cols.set_first_seq(1);
  cols.add_kind(1);
  cols.add_kind(1);
  cols.add_bytes(1);
  Case("column shorter than count", AfterHello("huge-job", Batch(cols)),
       grpc::StatusCode::INVALID_ARGUMENT, "column bytes");
  EXPECT_EQ(Rank("huge-job", 0).events_stored(), 0u);
}

TEST_F(BadInputTest, NegativeAndOverflowingValuesAreRejectedOrStoredAsSent) {
  v1::EventBatch seq;
  seq.set_count(2);
  seq.set_first_seq(UINT64_MAX);
  seq.add_kind(9);
  seq.add_kind(9);
  seq.add_seq_delta(0);
  seq.add_seq_delta(1);
  Case("sequence number overflow (seq_delta)", AfterHello("ovf-job", Batch(seq)),
       grpc::StatusCode::INVALID_ARGUMENT, "overflow");
  // Found by the batch fuzzer: without a seq_delta column the increment must not wrap.
  v1::EventBatch wrap;
  wrap.set_count(2);
  wrap.set_first_seq(UINT64_MAX);
  wrap.add_kind(9);
  wrap.add_kind(9);
  Case("sequence wrap without seq_delta", AfterHello("wrap-job", Batch(wrap)),
       grpc::StatusCode::INVALID_ARGUMENT, "overflow");
  ExpectUp("sequence wrap without seq_delta");
  v1::EventBatch ts;
  ts.set_count(2);
  ts.set_first_seq(1);
  ts.set_base_ts_ns(INT64_MAX);
  ts.add_kind(9);
  ts.add_kind(9);
  ts.add_ts_delta(0);
  ts.add_ts_delta(1);
  Case("timestamp overflow", AfterHello("ovf-job", Batch(ts)), grpc::StatusCode::INVALID_ARGUMENT,
       "timestamp overflow");
  Case("first_seq 0", AfterHello("ovf-job", Batch({Ev(0, EventKind::kStep)})),
       grpc::StatusCode::INVALID_ARGUMENT, "first_seq is 0");
  v1::EventBatch kind;
  kind.set_count(1);
  kind.set_first_seq(1);
  kind.add_kind(99);
  Case("unknown event kind 99", AfterHello("ovf-job", Batch(kind)),
       grpc::StatusCode::INVALID_ARGUMENT, "unknown kind");
  // bytes = 2^64-1 ("-1" as an unsigned size): stored as sent; live bytes saturate? (observed)
  Case("alloc of 2^64-1 bytes (a negative size)",
       AfterHello("neg-job", Batch({Ev(1, EventKind::kAlloc, 0x1000, UINT64_MAX)})),
       grpc::StatusCode::OK);
  const v1::RankSummary neg = Rank("neg-job", 0);
  std::printf("|   -> stored %llu events, live_bytes %llu |\n",
              static_cast<unsigned long long>(neg.events_stored()),
              static_cast<unsigned long long>(neg.live_bytes()));
  EXPECT_EQ(neg.events_stored(), 1u);
  // A rank below -1 in the Hello.
  Case("Hello with rank -5", {Hello("neg-rank-job", -5)}, grpc::StatusCode::OK);
  absl::StatusOr<v1::ListRanksResponse> neg_rank = ListRanks(collector_->address(), "neg-rank-job");
  ASSERT_TRUE(neg_rank.ok()) << neg_rank.status();
  ASSERT_EQ(neg_rank->ranks_size(), 1);
  std::printf("|   -> stored as rank %u, identified by %s |\n", neg_rank->ranks(0).rank(),
              neg_rank->ranks(0).identified_by().c_str());
  ExpectUp("after negative values");
}

TEST_F(BadInputTest, FreeOfUnknownAddressAndDoubleFreeAreCountedAnomalies) {
  Case("free of an unknown address",
       AfterHello("free-job", Batch({Ev(1, EventKind::kFree, 0xdead0000)})), grpc::StatusCode::OK);
  EXPECT_EQ(Rank("free-job", 0).anomaly_counts().free_unknown(), 1u);
  Case("double free",
       {Hello("free-job", 1),
        Batch({Ev(1, EventKind::kAlloc, 0x2000, 4096), Ev(2, EventKind::kFree, 0x2000),
               Ev(3, EventKind::kFree, 0x2000)})},
       grpc::StatusCode::OK);
  const v1::RankSummary r1 = Rank("free-job", 1);
  EXPECT_EQ(r1.anomaly_counts().free_unknown(), 1u);
  EXPECT_EQ(r1.live_bytes(), 0u);
  EXPECT_EQ(r1.events_stored(), 3u);
}

TEST_F(BadInputTest, TimestampsGoingBackwardsAreCounted) {
  Case("timestamps going backwards",
       AfterHello("time-job", Batch({Ev(1, EventKind::kAlloc, 0x1000, 10, kTs + 5000),
                                     Ev(2, EventKind::kAlloc, 0x2000, 10, kTs + 1000),
                                     Ev(3, EventKind::kAlloc, 0x3000, 10, kTs + 500)})),
       grpc::StatusCode::OK);
  const v1::RankSummary r = Rank("time-job", 0);
  EXPECT_EQ(r.anomaly_counts().time_backwards(), 2u);
  EXPECT_EQ(r.events_stored(), 3u);
}

TEST_F(BadInputTest, DuplicateRankFromAnotherHostIsRefusedAndTheFirstKeepsItsData) {
  Case("rank 0 from node-a",
       {Hello("dup-job", 0, "node-a", 100), Batch({Ev(1, EventKind::kAlloc, 0x1000, 4096)})},
       grpc::StatusCode::OK);
  Case("same rank 0 from node-b",
       {Hello("dup-job", 0, "node-b", 200), Batch({Ev(1, EventKind::kAlloc, 0x9000, 1)})},
       grpc::StatusCode::ALREADY_EXISTS, "node-a");
  const v1::RankSummary r = Rank("dup-job", 0);
  EXPECT_EQ(r.identity().host(), "node-a");
  EXPECT_EQ(r.events_stored(), 1u);
  EXPECT_EQ(r.live_bytes(), 4096u);
}

// A rank whose process restarted (a Ray actor restarted, a job rerun under the same id): while
// the first process is connected a second one for its rank is refused; once it has gone, the
// new one is stored as the rank's next attempt, and says so, rather than refused and untraced.
TEST_F(BadInputTest, ARanksNewProcessIsItsNextAttemptOnceTheOldOneHasGone) {
  const auto start = [&](const std::string& host, uint32_t pid) {
    TransportOptions options;
    options.collector_address = collector_->address();
    options.identity.set_job_id("restart-job");
    options.identity.set_rank(0);
    options.identity.set_host(host);
    options.identity.set_pid(pid);
    options.log_failures = false;
    options.initial_backoff = absl::Milliseconds(20);
    absl::StatusOr<std::unique_ptr<Transport>> t = Transport::Start(options);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *std::move(t) : nullptr;
  };
  std::unique_ptr<Transport> first = start("node-a", 100);
  ASSERT_NE(first, nullptr);
  first->Record(Ev(0, EventKind::kAlloc, 0x1000, 4096));
  ASSERT_TRUE(first->Flush(absl::Seconds(10)).ok());
  EXPECT_EQ(first->stats().stored_attempt, 0u);

  std::unique_ptr<Transport> meanwhile = start("node-b", 200);
  ASSERT_NE(meanwhile, nullptr);
  meanwhile->Record(Ev(0, EventKind::kAlloc, 0x2000, 1));
  EXPECT_FALSE(meanwhile->Flush(absl::Milliseconds(500)).ok());
  TransportStats refused = meanwhile->stats();
  EXPECT_TRUE(refused.last_stream_refused);
  EXPECT_EQ(refused.last_stream_code, absl::StatusCode::kAlreadyExists)
      << refused.last_stream_error;
  EXPECT_NE(refused.last_stream_error.find("while it is connected"), std::string::npos)
      << refused.last_stream_error;
  meanwhile->Shutdown(absl::Milliseconds(100)).IgnoreError();
  meanwhile.reset();

  ASSERT_TRUE(first->Shutdown(absl::Seconds(5)).ok());
  first.reset();
  std::unique_ptr<Transport> restarted = start("node-c", 300);
  ASSERT_NE(restarted, nullptr);
  restarted->Record(Ev(0, EventKind::kAlloc, 0x1000, 1024));
  restarted->Record(Ev(0, EventKind::kAlloc, 0x3000, 1024));
  ASSERT_TRUE(restarted->Flush(absl::Seconds(10)).ok());
  EXPECT_EQ(restarted->stats().stored_attempt, 1u);
  ASSERT_TRUE(restarted->Shutdown(absl::Seconds(5)).ok());

  absl::StatusOr<v1::ListRanksResponse> ranks = ListRanks(collector_->address(), "restart-job");
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  std::map<uint32_t, std::pair<std::string, uint64_t>> attempts;  // attempt -> (host, events)
  for (const v1::RankSummary& r : ranks->ranks()) {
    EXPECT_EQ(r.rank(), 0u);
    attempts[r.identity().attempt()] = {r.identity().host(), r.events_stored()};
  }
  EXPECT_EQ(attempts, (std::map<uint32_t, std::pair<std::string, uint64_t>>{{0, {"node-a", 1}},
                                                                            {1, {"node-c", 2}}}));
  std::printf("| a rank's new process after the old one ended | stored as attempt 1 |\n");
  ExpectUp("a rank's new process");
}

TEST_F(BadInputTest, ProtocolViolationsAreRejected) {
  Case("batch before any Hello", {Batch({Ev(1, EventKind::kStep)})},
       grpc::StatusCode::INVALID_ARGUMENT, "first message");
  Case("second Hello on a stream", {Hello("proto-job", 0), Hello("proto-job", 0)},
       grpc::StatusCode::INVALID_ARGUMENT, "second Hello");
  Case("Hello with empty job id", {Hello("", 0)}, grpc::StatusCode::INVALID_ARGUMENT, "job_id");
  Case("Hello without identity", {std::string("\x0a\x00", 2)}, grpc::StatusCode::INVALID_ARGUMENT,
       "no identity");
}

TEST_F(BadInputTest, StringTableAbuseIsRejected) {
  Case("string id 0",
       AfterHello("str-job", Batch({Ev(1, EventKind::kStep)}, {{0, StringKind::kTag, "x"}})),
       grpc::StatusCode::INVALID_ARGUMENT, "id 0");
  Case("string id above --max_string_table",
       AfterHello("str-job", Batch({Ev(1, EventKind::kStep)}, {{300000, StringKind::kTag, "x"}})),
       grpc::StatusCode::RESOURCE_EXHAUSTED, "string-table limit");
  std::vector<StringDef> many;
  for (uint32_t i = 1; i <= 5000; ++i) many.push_back({i, StringKind::kTag, absl::StrCat("t", i)});
  Case("5000 string entries in one batch (limit 4096)",
       AfterHello("str-job", Batch({Ev(1, EventKind::kStep)}, many)),
       grpc::StatusCode::RESOURCE_EXHAUSTED, "string entries");
  Case("64 KiB tag name",
       AfterHello("str-job", Batch({Ev(1, EventKind::kAlloc, 0x1000, 1, 0, 1)},
                                   {{1, StringKind::kTag, std::string(65536, 'x')}})),
       grpc::StatusCode::INVALID_ARGUMENT, "limit is 4096");
  // Invalid UTF-8 in a proto3 string: the collector's protobuf parser refuses the message.
  v1::EventBatch raw;
  EncodeBatch({Ev(1, EventKind::kAlloc, 0x1000, 1, 0, 1)}, {{1, StringKind::kTag, "ok"}}, {}, &raw);
  std::string bytes = Batch(raw);
  const size_t at = bytes.find("ok");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = '\xc3';  // a lead byte followed by 'k': invalid UTF-8
  Case("invalid UTF-8 in a tag name", AfterHello("str-job", bytes),
       grpc::StatusCode::INVALID_ARGUMENT, "invalid UTF-8");
  EXPECT_EQ(Rank("str-job", 0).events_stored(), 0u);
}

TEST_F(BadInputTest, UnicodeTagNamesRoundTrip) {
  const std::vector<StringDef> strings = {
      {1, StringKind::kTag, "fsdp:слой.12"},
      {2, StringKind::kTag, "模型/注意力"},
      {3, StringKind::kTag, "emoji 🔥🧠 e\xcc\x81"},  // combining accent
      {4, StringKind::kSource, "libnccl.so.2"}};
  Case("unicode tag names",
       AfterHello("uni-job", Batch({Ev(1, EventKind::kAlloc, 0x1000, 1, 0, 1),
                                    Ev(2, EventKind::kAlloc, 0x2000, 1, 0, 2),
                                    Ev(3, EventKind::kAlloc, 0x3000, 1, 0, 3)},
                                   strings)),
       grpc::StatusCode::OK);
  // The strings come back through ReadEvents' string table, byte for byte.
  absl::StatusOr<std::vector<Event>> events = ReadAllEvents(collector_->address(), "uni-job", 0);
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ(events->size(), 3u);
}

// The real Transport cuts a 64 KiB tag name to 4096 bytes (valid UTF-8) instead of being refused.
TEST_F(BadInputTest, TransportCutsA64KiBTagNameAndIsStored) {
  TransportOptions options;
  options.collector_address = collector_->address();
  options.identity.set_job_id("transport-long-tag");
  options.identity.set_rank(0);
  options.log_failures = false;
  absl::StatusOr<std::unique_ptr<Transport>> t = Transport::Start(options);
  ASSERT_TRUE(t.ok()) << t.status();
  std::string name;
  while (name.size() < 65536) name += "слой-";  // multi-byte: the cut must not split a rune
  const uint32_t tag = (*t)->Intern(StringKind::kTag, name);
  Event e = Ev(0, EventKind::kAlloc, 0x1000, 4096, 0, tag);
  (*t)->Record(e);
  ASSERT_TRUE((*t)->Flush(absl::Seconds(10)).ok());
  ASSERT_TRUE((*t)->Shutdown(absl::Seconds(5)).ok());
  EXPECT_EQ(Rank("transport-long-tag", 0).events_stored(), 1u);
  std::printf("| 64 KiB tag name through the Transport | OK: cut to <= 4096 bytes, stored |\n");
  ExpectUp("64 KiB tag through the Transport");
}

TEST_F(BadInputTest, TenThousandRanksAreStored) {
  constexpr int kRanks = 10000;
  constexpr int kThreads = 16;
  const absl::Time start = absl::Now();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = t; r < kRanks; r += kThreads) {
        grpc::Status s = RawIngest(collector_->address(),
                                   {Hello("10k-job", r, "node-" + std::to_string(r / 8), 1000 + r),
                                    Batch({Ev(1, EventKind::kAlloc, 0x1000, 4096)})});
        if (!s.ok()) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(failures.load(), 0);
  absl::StatusOr<v1::ListRanksResponse> ranks = ListRanks(collector_->address(), "10k-job");
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  EXPECT_EQ(ranks->ranks_size(), kRanks);
  uint64_t events = 0;
  for (const v1::RankSummary& r : ranks->ranks()) events += r.events_stored();
  EXPECT_EQ(events, static_cast<uint64_t>(kRanks));
  std::printf(
      "| 10k ranks (16 concurrent streams) | OK: %d ranks stored in %.1f s, ListRanks "
      "returns all |\n",
      ranks->ranks_size(), absl::ToDoubleSeconds(took));
  ExpectUp("10k ranks");
}

// A collector with a small --max_ranks_per_job refuses the next rank with RESOURCE_EXHAUSTED.
TEST(RankLimitTest, RanksBeyondTheLimitAreRefused) {
  CollectorProcess collector(FreshDir("rank-limit-db"), {"--max_ranks_per_job=100"});
  ASSERT_TRUE(collector.Start(0).ok());
  for (int r = 0; r < 100; ++r) {
    ASSERT_TRUE(RawIngest(collector.address(), {Hello("limited", r)}).ok()) << r;
  }
  grpc::Status s = RawIngest(collector.address(), {Hello("limited", 100)});
  std::printf("| rank 101 with --max_ranks_per_job=100 | %s: %s |\n", CodeName(s.error_code()),
              s.error_message().c_str());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("max_ranks_per_job"), std::string::npos);
  // Known ranks still reconnect; the limit survives a restart (read back from the store).
  EXPECT_TRUE(RawIngest(collector.address(), {Hello("limited", 7)}).ok());
  collector.Kill9();
  ASSERT_TRUE(collector.Start().ok());
  EXPECT_EQ(RawIngest(collector.address(), {Hello("limited", 100)}).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(Healthy(collector.address()));
}

}  // namespace
}  // namespace memtrace::reliability
