#include "agent/stream/spool.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"
#include "proto/codec/batch_codec.h"
#include "tests/util/test_dirs.h"

namespace memtrace {
namespace {

v1::RankIdentity Identity() {
  v1::RankIdentity id;
  id.set_job_id("job/with spaces");
  id.set_rank(3);
  return id;
}

// `count` alloc events from `first_seq` as the Transport seals them (strings optional).
SealedBatch MakeBatch(uint64_t first_seq, uint64_t count, bool with_strings = false) {
  std::vector<Event> events(count);
  for (uint64_t i = 0; i < count; ++i) {
    events[i].seq = first_seq + i;
    events[i].kind = EventKind::kAlloc;
    events[i].ts_ns = 1000 + static_cast<int64_t>(first_seq + i);
    events[i].address = 0x1000 * (first_seq + i);
    events[i].bytes = 4096;
  }
  std::vector<StringDef> strings;
  if (with_strings) strings.push_back({static_cast<uint32_t>(first_seq), StringKind::kTag, "t"});
  v1::EventBatch encoded;
  EncodeBatch(events, strings, {}, &encoded);
  SealedBatch b;
  b.first_seq = first_seq;
  b.last_seq = first_seq + count - 1;
  b.events = count;
  b.has_strings = with_strings;
  b.bytes = std::make_shared<std::string>(encoded.SerializeAsString());
  return b;
}

// The batch files in a spool directory (its lock file aside).
int FilesIn(const std::string& dir) {
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.' && std::string(e->d_name) != "lock";
    closedir(d);
  }
  return n;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::unique_ptr<SpoolBatchStore> Create(const std::string& root, uint64_t memory, uint64_t disk) {
  auto store = SpoolBatchStore::Create(root, Identity(), memory, disk, /*log_failures=*/false);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

TEST(SpoolTest, SpillsBeyondTheMemoryBoundAndReadsBackInOrder) {
  const uint64_t one = MakeBatch(1, 100).bytes->size();
  auto store = Create(test_util::ClearedPath("spill"), 2 * one, 1 << 30);
  std::vector<SealedBatch> dropped;
  std::vector<std::string> sent;
  for (int i = 0; i < 10; ++i) {
    SealedBatch b = MakeBatch(1 + 100 * i, 100);
    sent.push_back(*b.bytes);
    store->Append(std::move(b), 0, &dropped);
  }
  EXPECT_TRUE(dropped.empty());
  EXPECT_EQ(store->batches(), 10u);
  EXPECT_GE(store->disk_batches(), 7u);
  EXPECT_EQ(FilesIn(store->dir()), static_cast<int>(store->disk_batches()));
  uint64_t seq = 0;
  for (int i = 0; i < 10; ++i) {
    std::optional<SealedBatch> next = store->NextAfter(seq);
    ASSERT_TRUE(next.has_value()) << i;
    EXPECT_EQ(next->first_seq, 1u + 100 * i);
    ASSERT_NE(next->bytes, nullptr);
    EXPECT_EQ(*next->bytes, sent[i]) << i;
    seq = next->last_seq;
  }
  EXPECT_FALSE(store->NextAfter(seq).has_value());
  // A seq inside a spilled batch finds that batch (resume after a partial ack).
  EXPECT_EQ(store->NextAfter(150)->first_seq, 101u);
  // What waits behind a batch, over disk and memory alike.
  auto bytes_from = [&](int first) {
    uint64_t n = 0;
    for (int i = first; i < 10; ++i) n += sent[i].size();
    return n;
  };
  EXPECT_EQ(store->BytesAfter(0), store->bytes());
  EXPECT_EQ(store->BytesAfter(0), bytes_from(0));
  EXPECT_EQ(store->BytesAfter(100), bytes_from(1));
  EXPECT_EQ(store->BytesAfter(800), bytes_from(8));  // the two in memory
  EXPECT_EQ(store->BytesAfter(1000), 0u);
}

TEST(SpoolTest, BeyondTheDiskBoundBatchesOnTheWireAreDroppedLast) {
  const uint64_t one = MakeBatch(901, 100).bytes->size();
  auto store = Create(test_util::ClearedPath("full-on-wire"), one, 3 * one);
  std::vector<SealedBatch> dropped;
  // Seqs 1..200 were written to the collector (keep_through 200), no answer yet.
  for (int i = 0; i < 10; ++i) store->Append(MakeBatch(1 + 100 * i, 100), 200, &dropped);
  ASSERT_EQ(dropped.size(), 6u);
  for (const SealedBatch& b : dropped) EXPECT_GT(b.first_seq, 200u) << b.first_seq;
  EXPECT_EQ(store->NextAfter(0)->first_seq, 1u);
  EXPECT_EQ(store->NextAfter(100)->first_seq, 101u);
  EXPECT_EQ(store->NextAfter(200)->first_seq, 801u);
  EXPECT_LE(store->disk_bytes(), 3 * one);
  EXPECT_EQ(FilesIn(store->dir()), 3);
  // Everything on disk written too: with nothing else to drop, the oldest goes after all.
  store->Append(MakeBatch(1001, 100), 1000, &dropped);
  ASSERT_EQ(dropped.size(), 7u);
  EXPECT_EQ(dropped[6].first_seq, 1u);
  EXPECT_EQ(store->NextAfter(0)->first_seq, 101u);
}

TEST(SpoolTest, AcknowledgeRemovesSpilledFiles) {
  const uint64_t one = MakeBatch(1, 100).bytes->size();
  auto store = Create(test_util::ClearedPath("ack"), one, 1 << 30);
  std::vector<SealedBatch> dropped;
  for (int i = 0; i < 6; ++i) store->Append(MakeBatch(1 + 100 * i, 100), 0, &dropped);
  ASSERT_EQ(FilesIn(store->dir()), 5);
  store->Acknowledge(300);
  EXPECT_EQ(FilesIn(store->dir()), 2);
  EXPECT_EQ(store->batches(), 3u);
  EXPECT_EQ(store->NextAfter(0)->first_seq, 301u);
  store->Acknowledge(600);
  EXPECT_EQ(FilesIn(store->dir()), 0);
  EXPECT_EQ(store->bytes(), 0u);
}

TEST(SpoolTest, BeyondTheDiskBoundTheOldestAreDroppedWithTheirExactEventCounts) {
  // The largest of the batches below (later seqs and addresses encode a little longer).
  const uint64_t one = MakeBatch(901, 100).bytes->size();
  auto store = Create(test_util::ClearedPath("full"), one, 3 * one);
  std::vector<SealedBatch> dropped;
  for (int i = 0; i < 10; ++i) store->Append(MakeBatch(1 + 100 * i, 100), 0, &dropped);
  uint64_t lost = 0;
  for (const SealedBatch& b : dropped) lost += b.events;
  // 1 batch in memory, at most 3 on disk: the 6 oldest are gone, oldest first.
  ASSERT_EQ(dropped.size(), 6u);
  EXPECT_EQ(lost, 600u);
  EXPECT_EQ(dropped.front().first_seq, 1u);
  EXPECT_EQ(dropped.back().first_seq, 501u);
  EXPECT_LE(store->disk_bytes(), 3 * one);
  EXPECT_EQ(store->NextAfter(0)->first_seq, 601u);
  EXPECT_EQ(FilesIn(store->dir()), 3);
}

TEST(SpoolTest, ADroppedBatchWithStringsComesBackWithItsBytes) {
  const uint64_t one = MakeBatch(1, 100, true).bytes->size();
  auto store = Create(test_util::ClearedPath("strings"), one, one);
  std::vector<SealedBatch> dropped;
  for (int i = 0; i < 4; ++i) store->Append(MakeBatch(1 + 100 * i, 100, i == 0), 0, &dropped);
  ASSERT_FALSE(dropped.empty());
  ASSERT_TRUE(dropped[0].has_strings);
  ASSERT_NE(dropped[0].bytes, nullptr);
  v1::EventBatch batch;
  ASSERT_TRUE(batch.ParseFromString(*dropped[0].bytes));
  EXPECT_EQ(batch.strings_size(), 1);
}

TEST(SpoolTest, StringsAddedToASpilledOldestBatchAreInItsFile) {
  const uint64_t one = MakeBatch(1, 100).bytes->size();
  auto store = Create(test_util::ClearedPath("add"), one, 1 << 30);
  std::vector<SealedBatch> dropped;
  for (int i = 0; i < 3; ++i) store->Append(MakeBatch(1 + 100 * i, 100), 0, &dropped);
  ASSERT_GE(store->disk_batches(), 1u);
  const uint64_t before = store->bytes();
  store->AddStringsAfter(0, {StringDef{7, StringKind::kTag, "fsdp:layers.0"}});
  EXPECT_GT(store->bytes(), before);
  std::optional<SealedBatch> oldest = store->NextAfter(0);
  ASSERT_TRUE(oldest.has_value());
  EXPECT_TRUE(oldest->has_strings);
  v1::EventBatch batch;
  ASSERT_TRUE(batch.ParseFromString(*oldest->bytes));
  ASSERT_EQ(batch.strings_size(), 1);
  EXPECT_EQ(batch.strings(0).value(), "fsdp:layers.0");
}

// Spills two batches, then adds strings to the oldest while a rewrite cannot fit; exits 0 when
// the oldest batch is still there as it was.
[[noreturn]] void RewriteTheOldestWithoutRoom() {
  const uint64_t one = MakeBatch(1, 100).bytes->size();
  auto store = Create(test_util::ClearedPath("rewrite-full"), one, 1 << 30);
  std::vector<SealedBatch> dropped;
  for (int i = 0; i < 3; ++i) store->Append(MakeBatch(1 + 100 * i, 100), 0, &dropped);
  if (store->disk_batches() != 2) _exit(2);
  signal(SIGXFSZ, SIG_IGN);
  const rlimit limit{one + 16, one + 16};  // the file as it is fits, with the strings not
  if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(3);
  store->AddStringsAfter(0, {StringDef{7, StringKind::kTag, std::string(2000, 'x')}});
  std::optional<SealedBatch> oldest = store->NextAfter(0);
  if (!oldest.has_value() || oldest->first_seq != 1) _exit(4);
  if (store->spool_read_lost() != 0 || oldest->has_strings) _exit(5);
  v1::EventBatch batch;
  if (!batch.ParseFromString(*oldest->bytes) || batch.strings_size() != 0) _exit(6);
  _exit(0);
}

TEST(SpoolTest, AFailedRewriteOfTheOldestSpilledBatchKeepsItsEvents) {
  // RLIMIT_FSIZE stands in for a full disk, in a child process so that the limit ends with it.
  EXPECT_EXIT(RewriteTheOldestWithoutRoom(), ::testing::ExitedWithCode(0), "");
}

TEST(SpoolTest, AnUnwritableSpoolDropsLikeTheMemoryStore) {
  const uint64_t one = MakeBatch(1, 100).bytes->size();
  auto store = Create(test_util::ClearedPath("unwritable"), one, 1 << 30);
  ASSERT_EQ(std::system(("rm -rf '" + store->dir() + "'").c_str()), 0);  // the disk "goes away"
  std::vector<SealedBatch> dropped;
  for (int i = 0; i < 4; ++i) store->Append(MakeBatch(1 + 100 * i, 100), 0, &dropped);
  EXPECT_EQ(dropped.size(), 3u);
  EXPECT_EQ(store->batches(), 1u);
  EXPECT_EQ(store->NextAfter(0)->first_seq, 301u);
}

TEST(SpoolTest, AnUnreadableSpilledBatchIsSkippedAndCounted) {
  const uint64_t one = MakeBatch(1, 100).bytes->size();
  auto store = Create(test_util::ClearedPath("unreadable"), one, 1 << 30);
  std::vector<SealedBatch> dropped;
  for (int i = 0; i < 3; ++i) store->Append(MakeBatch(1 + 100 * i, 100), 0, &dropped);
  ASSERT_EQ(store->disk_batches(), 2u);
  ASSERT_EQ(std::system(("rm -f '" + store->dir() + "/0.batch'").c_str()), 0);
  std::optional<SealedBatch> next = store->NextAfter(0);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->first_seq, 101u);
  EXPECT_EQ(store->spool_read_lost(), 100u);
  EXPECT_EQ(store->batches(), 2u);
}

TEST(SpoolTest, DirectoriesOfDeadProcessesAreRemovedAndLiveOnesKept) {
  const std::string root = test_util::ClearedPath("stale");
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);
  const std::string dead = root + "/job.r0.a0.p" + std::to_string(child) + ".0";
  const std::string alive = root + "/job.r0.a0.p1.0";  // pid 1 always runs
  const std::string other = root + "/not-a-spool";
  for (const std::string& d : {root, dead, alive, other}) ASSERT_EQ(mkdir(d.c_str(), 0700), 0);
  std::ofstream(dead + "/0.batch") << "x";
  auto store = Create(root, 1 << 20, 1 << 30);
  EXPECT_FALSE(Exists(dead));
  EXPECT_TRUE(Exists(alive));
  EXPECT_TRUE(Exists(other));
}

// Containers on one node sharing a host spool directory have PID namespaces of their own: the pid
// in a neighbour's directory name is no process here, and probing it with kill() removed that live
// neighbour's spilled batches. Its lock says it lives.
TEST(SpoolTest, ALockedDirectoryIsKeptWhateverItsPid) {
  const std::string root = test_util::ClearedPath("locked");
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);  // a pid that runs nothing here
  const std::string neighbour = root + "/job.r0.a0.p" + std::to_string(child) + ".0";
  for (const std::string& d : {root, neighbour}) ASSERT_EQ(mkdir(d.c_str(), 0700), 0);
  std::ofstream(neighbour + "/0.batch") << "x";
  const int lock = open((neighbour + "/lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(flock(lock, LOCK_EX | LOCK_NB), 0);  // its process, alive in another namespace
  auto store = Create(root, 1 << 20, 1 << 30);
  EXPECT_TRUE(Exists(neighbour + "/0.batch"));
  close(lock);  // that process ends
  auto next = Create(root, 1 << 20, 1 << 30);
  EXPECT_FALSE(Exists(neighbour));
  // And a store's own directory is locked while it lives.
  const int probe = open((store->dir() + "/lock").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(probe, 0);
  EXPECT_NE(flock(probe, LOCK_EX | LOCK_NB), 0);
  close(probe);
}

// A directory is made under a name no sweep reads, locked, then renamed into place: under its final
// name without its lock yet, a neighbour's sweep in another PID namespace took it for a dead
// process's and removed it. What a process that died while making one leaves is swept once its
// lock is free and a minute old.
TEST(SpoolTest, ADirectoryIsLockedBeforeItHasItsName) {
  const std::string root = test_util::ClearedPath("staging");
  auto store = Create(root, 1 << 20, 1 << 30);
  const int probe = open((store->dir() + "/lock").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(probe, 0);
  EXPECT_NE(flock(probe, LOCK_EX | LOCK_NB), 0);
  close(probe);
  const std::string leftover = root + "/staging-1-2-3";
  ASSERT_EQ(mkdir(leftover.c_str(), 0700), 0);
  std::ofstream(leftover + "/lock") << "";
  auto young = Create(root, 1 << 20, 1 << 30);
  EXPECT_TRUE(Exists(leftover));  // could be a live process's, a moment from its rename
  const timespec old[2] = {{time(nullptr) - 120, 0}, {time(nullptr) - 120, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, leftover.c_str(), old, 0), 0);
  auto later = Create(root, 1 << 20, 1 << 30);
  EXPECT_FALSE(Exists(leftover));
}

TEST(SpoolTest, TheStoreRemovesItsDirectoryWhenDestroyed) {
  const uint64_t one = MakeBatch(1, 100).bytes->size();
  auto store = Create(test_util::ClearedPath("destroy"), one, 1 << 30);
  std::vector<SealedBatch> dropped;
  for (int i = 0; i < 3; ++i) store->Append(MakeBatch(1 + 100 * i, 100), 0, &dropped);
  const std::string dir = store->dir();
  ASSERT_TRUE(Exists(dir));
  EXPECT_NE(dir.find("job_with_spaces.r3.a0.p"), std::string::npos) << dir;
  store.reset();
  EXPECT_FALSE(Exists(dir));
}

TEST(MakeBatchStoreTest, SpoolOnlyWhenADirectoryIsConfiguredAndUsable) {
  TransportOptions options;
  options.identity = Identity();
  options.log_failures = false;
  EXPECT_NE(dynamic_cast<MemoryBatchStore*>(MakeBatchStore(options).get()), nullptr);
  options.spool_dir = test_util::ClearedPath("make");
  EXPECT_NE(dynamic_cast<SpoolBatchStore*>(MakeBatchStore(options).get()), nullptr);
  const std::string file = test_util::ClearedPath("a-file");
  std::ofstream(file) << "x";
  options.spool_dir = file + "/spool";
  EXPECT_NE(dynamic_cast<MemoryBatchStore*>(MakeBatchStore(options).get()), nullptr);
}

}  // namespace
}  // namespace memtrace
