#include "collector/store/event_store.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collector/rollup/saturating.h"
#include "collector/store/block_value.h"
#include "collector/store/info_log.h"
#include "collector/store/records.pb.h"
#include "collector/store/rollup_series.h"
#include "proto/codec/batch_wire.h"
#include "rocksdb/convenience.h"
#include "rocksdb/db.h"
#include "rocksdb/iterator.h"
#include "rocksdb/options.h"
#include "rocksdb/slice_transform.h"
#include "rocksdb/table.h"
#include "rocksdb/write_batch.h"

namespace memtrace::collector {

namespace {

constexpr uint32_t kDefaultReadLimit = 65536;
constexpr uint32_t kMaxReadLimit = 1 << 20;

enum ColumnFamily : size_t {
  kDefault = 0,
  kMeta,
  kBlocks,
  kRollups,
  kCheckpoints,
  kSeries,
  kNumFamilies
};
// Stream (12 bytes) plus the byte before or after it: see the memtable insert hints in Open.
constexpr size_t kMemtableHintPrefixBytes = 13;
// Closed rows whose messages a handler thread keeps for its next batch (a batch of the bench's
// simulated FSDP ranks closes ~70).
constexpr int kReusedRows = 1024;

constexpr const char* kFamilyNames[kNumFamilies] = {"default", "meta",        "blocks",
                                                    "rollups", "checkpoints", "series"};

absl::Status FromRocks(const rocksdb::Status& s, absl::string_view context) {
  if (s.ok()) return absl::OkStatus();
  const std::string message = absl::StrCat(context, ": ", s.ToString());
  switch (s.code()) {
    case rocksdb::Status::kNotFound:
      return absl::NotFoundError(message);
    case rocksdb::Status::kCorruption:
      return absl::DataLossError(message);
    case rocksdb::Status::kInvalidArgument:
    case rocksdb::Status::kNotSupported:
      return absl::InvalidArgumentError(message);
    case rocksdb::Status::kBusy:
    case rocksdb::Status::kTimedOut:
    case rocksdb::Status::kTryAgain:
    case rocksdb::Status::kIOError:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

std::string Describe(const StreamKey& key, absl::string_view job_id) {
  return absl::StrCat("job \"", job_id, "\" rank ", key.rank, " attempt ", key.attempt);
}

absl::Status UnknownJob(absl::string_view job_id) {
  return absl::NotFoundError(absl::StrCat("unknown job \"", job_id, "\""));
}

rocksdb::CompressionType PickCompression() {
  const std::vector<rocksdb::CompressionType> supported = rocksdb::GetSupportedCompressions();
  for (rocksdb::CompressionType want : {rocksdb::kLZ4Compression, rocksdb::kSnappyCompression}) {
    if (std::find(supported.begin(), supported.end(), want) != supported.end()) return want;
  }
  return rocksdb::kNoCompression;
}

// Calls fn(key, value) for every row of `family` whose key starts with `prefix`, in key order.
absl::Status ForEachWithPrefix(
    rocksdb::DB* db, rocksdb::ColumnFamilyHandle* family, const rocksdb::Snapshot* snapshot,
    absl::string_view prefix,
    const std::function<absl::Status(absl::string_view, absl::string_view)>& fn) {
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, family));
  for (it->Seek(rocksdb::Slice(prefix.data(), prefix.size())); it->Valid(); it->Next()) {
    const rocksdb::Slice k = it->key();
    const absl::string_view key(k.data(), k.size());
    if (!absl::StartsWith(key, prefix)) break;
    const rocksdb::Slice v = it->value();
    absl::Status s = fn(key, absl::string_view(v.data(), v.size()));
    if (!s.ok()) return s;
  }
  return FromRocks(it->status(), "scanning the store");
}

template <typename Message>
absl::Status ParseValue(absl::string_view value, absl::string_view what, Message* out) {
  if (!out->ParseFromArray(value.data(), static_cast<int>(value.size()))) {
    return absl::DataLossError(absl::StrCat(what, " (", value.size(), " bytes) does not parse"));
  }
  return absl::OkStatus();
}

v1::ClockEstimate ToProto(const ClockEstimate& clock) {
  v1::ClockEstimate out;
  out.set_offset_ns(clock.offset_ns);
  out.set_round_trip_ns(clock.round_trip_ns);
  return out;
}

BatchLimits StoredBlockLimits() {
  // Blocks were validated on ingest; reading them back must not depend on today's limits.
  BatchLimits limits;
  // (DecodeBatch compares max_strings as an int: stay below INT32_MAX.)
  limits.max_events = std::numeric_limits<int32_t>::max();
  limits.max_strings = std::numeric_limits<int32_t>::max();
  limits.max_string_bytes = std::numeric_limits<int32_t>::max();
  return limits;
}

// A stored block's events, all of them or (with a cutoff) those before the first one past it;
// *stopped then says whether there was one.
absl::StatusOr<DecodedBatch> DecodeBlock(absl::string_view value, absl::string_view where,
                                         const DecodeCutoff* cutoff = nullptr,
                                         bool* stopped = nullptr) {
  thread_local std::string scratch;
  absl::StatusOr<absl::string_view> bytes = BlockBatchBytes(value, &scratch);
  if (!bytes.ok()) {
    return absl::DataLossError(absl::StrCat("block of ", where, ": ", bytes.status().message()));
  }
  DecodedBatch decoded;
  const absl::Status s = cutoff != nullptr ? DecodeBatchWirePrefix(*bytes, StoredBlockLimits(),
                                                                   *cutoff, &decoded, stopped)
                                           : DecodeBatchWire(*bytes, StoredBlockLimits(), &decoded);
  if (!s.ok()) {
    return absl::DataLossError(
        absl::StrCat("block of ", where, " (", value.size(), " bytes) is invalid: ", s.message()));
  }
  return decoded;
}

}  // namespace

absl::StatusOr<Durability> ParseDurability(absl::string_view name) {
  if (name == "sync") return Durability::kSync;
  if (name == "async") return Durability::kAsync;
  return absl::InvalidArgumentError(
      absl::StrCat("durability \"", name, "\" is not one of: sync, async"));
}

const char* DurabilityName(Durability d) { return d == Durability::kSync ? "sync" : "async"; }

// One stream's state while at least one connection has it open.
struct EventStore::Stream {
  explicit Stream(StreamKey k) : key(k) {}
  const StreamKey key;
  int connections = 0;  // guarded by EventStore::mu_
  // Connections opened since the stream was last dropped from memory, the newest's number.
  // Written under EventStore::mu_; atomic so that CloseStream can read it under `mu` alone:
  // read there, a connection opened after the read writes its own close later.
  std::atomic<uint64_t> newest_connection{0};

  absl::Mutex mu;
  std::string job_id ABSL_GUARDED_BY(mu);
  int64_t bucket_ns ABSL_GUARDED_BY(mu) = 0;
  // False until loaded, and again after a failed write (the disk is the truth).
  bool loaded ABSL_GUARDED_BY(mu) = false;
  StreamRecord record ABSL_GUARDED_BY(mu);
  std::optional<RankState> state ABSL_GUARDED_BY(mu);
  // Per axis, the series segment the last closed row went to, as stored (rows close in key
  // order, so the next one almost always goes there too); empty until a row closes after load.
  std::optional<std::pair<int64_t, SeriesSegment>> series[2] ABSL_GUARDED_BY(mu);
};

namespace {

// Creates `dir` (with parents) when missing and checks that the store can write there.
absl::Status PrepareDataDir(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("data directory ", dir, " exists and is not a directory"));
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create data directory ", dir, ": ", ec.message()));
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("data directory ", dir, " is not writable"));
  }
  // A store that lost its CURRENT file: RocksDB refuses to open it once, but writes a new
  // CURRENT and MANIFEST while refusing, and the next start opened an empty store beside the old
  // write-ahead log, which was then never replayed.
  if (!std::filesystem::exists(std::filesystem::path(dir) / "CURRENT", ec)) {
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (absl::StartsWith(name, "MANIFEST-") || absl::StartsWith(name, "OPTIONS-") ||
          absl::EndsWith(name, ".sst") || absl::EndsWith(name, ".log")) {
        return absl::FailedPreconditionError(absl::StrCat(
            "data directory ", dir, " holds a store's files (", name,
            ") but no CURRENT file: a damaged store, not opened and not replaced by a new one "
            "(restore CURRENT, or give another --data)"));
      }
    }
  }
  return absl::OkStatus();
}

rocksdb::DBOptions StoreDbOptions(const std::string& dir, rocksdb::Env* env) {
  rocksdb::DBOptions db_options;
  if (env != nullptr) db_options.env = env;
  db_options.info_log = OpenInfoLog(dir, rocksdb::InfoLogLevel::INFO_LEVEL);
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.max_background_jobs = 2;
  // Small values rewritten every batch (meta, open rollups) make the WAL the main write cost;
  // bound it so that recovery after a crash replays seconds, not hours.
  db_options.max_total_wal_size = 256 << 20;
  // RocksDB ignores insert hints (below) for concurrent memtable writes. The write group's
  // leader inserts for everyone instead; on a collector's few cores that costs nothing
  // measurable, and the hints halve the skip list's share (docs/PERFORMANCE.md).
  db_options.allow_concurrent_memtable_write = false;
  return db_options;
}

std::vector<rocksdb::ColumnFamilyDescriptor> StoreFamilies() {
  const rocksdb::CompressionType compression = PickCompression();
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (size_t i = 0; i < kNumFamilies; ++i) {
    rocksdb::ColumnFamilyOptions cf;
    // Every family says its compression: RocksDB's default is Snappy, not none. Blocks come
    // compressed (block_value.h): RocksDB leaves them as they are. The rest take LZ4 where it
    // is built in. The series (rollup_series.h) is read whole by every cold diverged: with
    // Snappy, decompressing it was a quarter of the load; LZ4 shrinks it 5.6x at no
    // measurable cost to the load against none (docs/PERFORMANCE.md).
    cf.compression = i == kBlocks ? rocksdb::kNoCompression : compression;
    if (i == kBlocks) {
      // Block values are 10-100 KiB; larger memtables mean fewer, larger flushes.
      cf.write_buffer_size = 64 << 20;
    }
    // Each family's keys start with a stream (a 1-byte tag first in meta; an axis byte after it
    // in rollups and series), and a stream's keys mostly arrive in increasing order: a hint
    // per 13-byte prefix lets the memtable insert after the stream's last key instead of
    // searching the skip list from its head, which was a tenth of the collector's ingest CPU
    // with a batch's ~70 rollup rows (docs/profiles/ingest-memtable.txt). Shorter keys go
    // without a hint.
    cf.memtable_insert_with_hint_prefix_extractor.reset(
        rocksdb::NewFixedPrefixTransform(kMemtableHintPrefixBytes));
    if (i == kRollups || i == kSeries) {
      // Rollup rows (a few hundred bytes) and series segments are read a job at a time: larger
      // blocks mean fewer reads and decompressions per row scanned, and compress better.
      rocksdb::BlockBasedTableOptions table;
      table.block_size = 32 << 10;
      cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    }
    families.emplace_back(kFamilyNames[i], cf);
  }
  return families;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EventStore>> EventStore::Open(const EventStoreOptions& options) {
  if (options.dir.empty()) {
    return absl::InvalidArgumentError("store directory is empty: a data directory is required");
  }
  if (options.bucket_ns <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("bucket_ns ", options.bucket_ns, " is not > 0"));
  }
  if (absl::Status s = PrepareDataDir(options.dir); !s.ok()) return s;

  std::vector<rocksdb::ColumnFamilyDescriptor> families = StoreFamilies();
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  const rocksdb::DBOptions db_options = StoreDbOptions(options.dir, options.env);
  rocksdb::Status s = rocksdb::DB::Open(db_options, options.dir, families, &handles, &raw);
  if (!s.ok()) {
    // Only a held LOCK file means another process has the store; a corrupt store or a full disk
    // would send the reader looking for a collector that is not there.
    const std::string why = s.ToString();
    const bool locked =
        s.IsIOError() && (absl::StrContains(why, "Resource temporarily unavailable") ||
                          absl::StrContains(why, "lock hold by current process"));
    return FromRocks(s, absl::StrCat("cannot open store in ", options.dir,
                                     locked ? " (is another collector using it?)" : ""));
  }
  // RocksDB recovers a damaged write-ahead log up to the damage and opens without an error:
  // every write after it, acknowledged or not (the ranks' own high-water marks among them, so
  // `memtrace ranks` cannot count the loss as missing), is gone, said only in LOG.
  if (const std::string dropped = FirstDroppedRecordsLine(*db_options.info_log); !dropped.empty()) {
    std::fprintf(stderr,
                 "memtrace-collector: the write-ahead log of %s was damaged: RocksDB kept what "
                 "came before the damage and dropped the rest (%s); events acknowledged after it "
                 "are lost, and counted only by agents that reconnect (see LOG)\n",
                 options.dir.c_str(), dropped.c_str());
  }
  std::unique_ptr<EventStore> store(
      new EventStore(options, std::unique_ptr<rocksdb::DB>(raw), std::move(handles)));
  if (absl::Status st = store->LoadJobs(); !st.ok()) return st;
  return store;
}

EventStore::EventStore(EventStoreOptions options, std::unique_ptr<rocksdb::DB> db,
                       std::vector<rocksdb::ColumnFamilyHandle*> handles)
    : options_(std::move(options)), db_(std::move(db)), handles_(std::move(handles)) {}

EventStore::~EventStore() {
  for (rocksdb::ColumnFamilyHandle* h : handles_) db_->DestroyColumnFamilyHandle(h);
  db_->Close().PermitUncheckedError();
}

absl::Status EventStore::LoadJobs() {
  absl::MutexLock lock(&mu_);
  return ForEachWithPrefix(
      db_.get(), handles_[kMeta], nullptr, std::string(1, static_cast<char>(MetaTag::kJob)),
      [&](absl::string_view key, absl::string_view value) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        auto job = std::make_unique<JobRecord>();
        if (absl::Status s = ParseValue(value, "job record", job.get()); !s.ok()) return s;
        next_job_no_ = std::max(next_job_no_, job->job_no() + 1);
        jobs_[job->job_id()] = std::move(job);
        return absl::OkStatus();
      });
}

absl::Status EventStore::Write(rocksdb::WriteBatch* batch) const {
  if (write_failed_.load(std::memory_order_acquire)) {
    absl::MutexLock lock(&write_error_mu_);
    return write_error_;
  }
  rocksdb::WriteOptions wo;
  wo.sync = options_.durability == Durability::kSync;
  const rocksdb::Status s = db_->Write(wo, batch);
  if (s.ok()) return absl::OkStatus();
  const absl::Status error = FromRocks(s, absl::StrCat("writing to the store in ", options_.dir));
  if (!s.IsIOError()) return error;
  absl::MutexLock lock(&write_error_mu_);
  if (write_error_.ok()) {
    write_error_ = absl::UnavailableError(absl::StrCat(
        error.message(),
        "; the store takes no more writes until the collector restarts (free space or fix the "
        "disk first: agents keep what was not acknowledged and send it again)"));
    // Said once, where an operator looks: every agent's stream ends with it too.
    std::fprintf(stderr, "memtrace-collector: %s\n", write_error_.ToString().c_str());
    write_failed_.store(true, std::memory_order_release);
    if (on_writes_stopped_) on_writes_stopped_();
  }
  return write_error_;
}

void EventStore::OnWritesStopped(std::function<void()> listener) {
  absl::MutexLock lock(&write_error_mu_);
  on_writes_stopped_ = std::move(listener);
  if (!write_error_.ok() && on_writes_stopped_) on_writes_stopped_();
}

absl::StatusOr<uint32_t> EventStore::ResolveRank(const JobRecord& job,
                                                 const v1::RankIdentity& identity,
                                                 bool* synthetic) {
  *synthetic = identity.rank() < 0;
  if (!*synthetic) return static_cast<uint32_t>(identity.rank());
  const std::string key = SyntheticRankKey(job.job_no(), identity.host(), identity.device_index(),
                                           identity.pid(), identity.process_start_ns());
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), handles_[kMeta], key, &value);
  if (s.ok()) return DecodeU32(value);
  if (!s.IsNotFound()) return FromRocks(s, "reading synthetic rank");
  JobRecord* mutable_job = jobs_.at(job.job_id()).get();
  const uint32_t rank = EventStore::kFirstSyntheticRank + mutable_job->synthetic_ranks();
  mutable_job->set_synthetic_ranks(mutable_job->synthetic_ranks() + 1);
  rocksdb::WriteBatch wb;
  std::string rank_bytes;
  PutU32(&rank_bytes, rank);
  wb.Put(handles_[kMeta], key, rank_bytes);
  wb.Put(handles_[kMeta], JobMetaKey(job.job_id()), mutable_job->SerializeAsString());
  if (absl::Status st = Write(&wb); !st.ok()) {
    mutable_job->set_synthetic_ranks(mutable_job->synthetic_ranks() - 1);
    return st;
  }
  return rank;
}

absl::Status EventStore::CheckIdentity(const v1::RankIdentity& identity) {
  if (identity.job_id().empty()) {
    return absl::InvalidArgumentError("identity has an empty job_id");
  }
  if (identity.rank() >= static_cast<int64_t>(EventStore::kFirstSyntheticRank)) {
    // Those are numbers the store gives workers without a launcher rank (ResolveRank): a
    // launcher rank there would share a stream with one of them.
    return absl::InvalidArgumentError(
        absl::StrCat("identity has rank ", identity.rank(), "; launcher ranks are below ",
                     EventStore::kFirstSyntheticRank,
                     " (the numbers from there on are for workers without one)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<OpenedStream> EventStore::OpenStream(const v1::RankIdentity& identity) {
  if (absl::Status s = CheckIdentity(identity); !s.ok()) return s;
  std::shared_ptr<Stream> stream;
  int64_t bucket_ns = 0;
  bool synthetic = false;
  uint64_t connection = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(identity.job_id());
    if (it == jobs_.end()) {
      auto job = std::make_unique<JobRecord>();
      job->set_job_id(identity.job_id());
      job->set_job_no(next_job_no_);
      job->set_bucket_ns(options_.bucket_ns);
      job->set_created_unix_ns(absl::GetCurrentTimeNanos());
      rocksdb::WriteBatch wb;
      wb.Put(handles_[kMeta], JobMetaKey(job->job_id()), job->SerializeAsString());
      if (absl::Status s = Write(&wb); !s.ok()) return s;
      ++next_job_no_;
      it = jobs_.emplace(identity.job_id(), std::move(job)).first;
    }
    const JobRecord& job = *it->second;
    bucket_ns = job.bucket_ns();
    absl::StatusOr<uint32_t> rank = ResolveRank(job, identity, &synthetic);
    if (!rank.ok()) return rank.status();
    const StreamKey key{job.job_no(), *rank, identity.attempt()};
    std::shared_ptr<Stream>& slot = streams_[key];
    if (slot == nullptr) slot = std::make_shared<Stream>(key);
    ++slot->connections;
    connection = ++slot->newest_connection;
    stream = slot;
  }

  absl::Status status;
  OpenedStream opened;
  {
    absl::MutexLock lock(&stream->mu);
    stream->job_id = identity.job_id();
    stream->bucket_ns = bucket_ns;
    if (!stream->loaded) status = LoadStream(stream.get());
    if (status.ok()) {
      v1::RankSummary* summary = stream->record.mutable_summary();
      *summary->mutable_identity() = identity;
      summary->set_rank(stream->key.rank);
      summary->set_identified_by(
          identity.has_subprocess_of_rank()
              ? absl::StrCat(identity.started_the_rank() ? "started rank " : "subprocess of rank ",
                             identity.subprocess_of_rank(),
                             identity.started_the_rank() ? "'s process" : "")
          : synthetic ? "host+device+pid"
                      : "env");
      summary->set_complete(false);
      rocksdb::WriteBatch wb;
      wb.Put(handles_[kMeta], StreamMetaKey(stream->key), stream->record.SerializeAsString());
      status = Write(&wb);
      opened =
          OpenedStream{stream->key, summary->durable_seq(), summary->identified_by(), connection};
    }
  }
  if (!status.ok()) {
    ReleaseConnection(stream->key);
    return status;
  }
  return opened;
}

void EventStore::ReleaseConnection(const StreamKey& key) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(key);
  if (it == streams_.end()) return;
  if (--it->second->connections <= 0) streams_.erase(it);
}

void EventStore::ForgetState(Stream* stream) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  stream->loaded = false;
  stream->state.reset();
  for (auto& segment : stream->series) segment.reset();
}

absl::Status EventStore::LoadStream(Stream* stream) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  ForgetState(stream);
  std::string value;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), handles_[kMeta], StreamMetaKey(stream->key), &value);
  if (s.IsNotFound()) {
    stream->record.Clear();
    stream->record.mutable_summary()->set_rank(stream->key.rank);
    stream->record.set_has_series(true);
    stream->state.emplace(stream->bucket_ns);
    stream->loaded = true;
    return absl::OkStatus();
  }
  const std::string where = Describe(stream->key, stream->job_id);
  if (!s.ok()) return FromRocks(s, absl::StrCat("reading the record of ", where));
  if (absl::Status st = ParseValue(value, absl::StrCat("record of ", where), &stream->record);
      !st.ok()) {
    return st;
  }
  const uint64_t durable = stream->record.summary().durable_seq();
  absl::StatusOr<RankState> state = Replay(nullptr, stream->key, stream->job_id, stream->bucket_ns,
                                           stream->record.checkpoint_seq(), DecodeCutoff{});
  if (!state.ok()) return state.status();
  if (state->last_seq() != durable) {
    return absl::DataLossError(absl::StrCat(where, " rebuilt to seq ", state->last_seq(),
                                            " but its high-water mark is ", durable));
  }
  stream->state.emplace(std::move(*state));
  stream->loaded = true;
  return absl::OkStatus();
}

absl::StatusOr<RankState> EventStore::Replay(const rocksdb::Snapshot* snapshot,
                                             const StreamKey& key, absl::string_view job_id,
                                             int64_t bucket_ns, uint64_t checkpoint_seq,
                                             const DecodeCutoff& target) const {
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  // The job's id, not its internal number ("job #3"), which no command shows.
  const std::string where = Describe(key, job_id);
  RankState state(bucket_ns);
  if (checkpoint_seq > 0) {
    std::string value;
    rocksdb::Status s =
        db_->Get(ro, handles_[kCheckpoints], CheckpointKey(key, checkpoint_seq), &value);
    if (!s.ok()) {
      return FromRocks(
          s, absl::StrCat("reading the checkpoint at seq ", checkpoint_seq, " of ", where));
    }
    absl::StatusOr<RankState> loaded = RankState::Deserialize(value);
    if (!loaded.ok()) {
      return absl::DataLossError(absl::StrCat("checkpoint at seq ", checkpoint_seq, " of ", where,
                                              ": ", loaded.status().message()));
    }
    state = std::move(*loaded);
  }
  const std::string prefix = StreamPrefix(key);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, handles_[kBlocks]));
  bool done = false;
  for (it->Seek(BlockKey(key, checkpoint_seq + 1)); !done && it->Valid(); it->Next()) {
    const rocksdb::Slice k = it->key();
    if (!absl::StartsWith(absl::string_view(k.data(), k.size()), prefix)) break;
    const rocksdb::Slice v = it->value();
    // Only the events up to the target are decoded: a replay to the middle of a job stops in
    // the middle of a block.
    absl::StatusOr<DecodedBatch> block =
        DecodeBlock(absl::string_view(v.data(), v.size()), where, &target, &done);
    if (!block.ok()) return block.status();
    // The clock offset the block was first applied with (see Append).
    if (block->clock.has_value()) state.SetClockOffset(block->clock->offset_ns);
    // The horizon too, so that a timestamp held as no time then is held now.
    state.SetTimeHorizon(block->time_horizon_ns);
    for (const Event& e : block->events) {
      if (state.events_applied() > 0 && e.seq <= state.last_seq()) continue;
      state.Apply(e, nullptr);
    }
  }
  if (absl::Status s = FromRocks(it->status(), absl::StrCat("replaying blocks of ", where));
      !s.ok()) {
    return s;
  }
  return state;
}

void EventStore::AddCheckpoint(Stream* stream,
                               rocksdb::WriteBatch* batch) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const RankState& state = *stream->state;
  batch->Put(handles_[kCheckpoints], CheckpointKey(stream->key, state.last_seq()),
             state.Serialize());
  // The latest time of any event up to it, not the last event's: a replay to a time may start
  // here only if no event before it is later than that time (time can go backwards).
  std::string ts;
  PutOrderedI64(&ts, state.max_ts_ns());
  batch->Put(handles_[kMeta], CheckpointTsKey(stream->key, state.last_seq()), ts);
  stream->record.set_checkpoint_seq(state.last_seq());
  stream->record.set_checkpoint_steps(state.steps_closed());
  stream->record.set_checkpoint_events(stream->record.summary().events_stored());
}

absl::Status EventStore::AddToSeries(
    Stream* stream, RollupAxis axis, const google::protobuf::RepeatedPtrField<v1::StepRollup>& rows,
    rocksdb::WriteBatch* batch) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (rows.empty()) return absl::OkStatus();
  std::optional<std::pair<int64_t, SeriesSegment>>& current =
      stream->series[static_cast<size_t>(axis)];
  // Rows go to the stream's current segment in place (a failed append forgets the stream's
  // state, this segment with it). Other segments this append changed are gathered here and
  // written once each: a new one, or an earlier one a step that went backwards sends a row to
  // (read from the store).
  bool current_changed = false;
  std::map<int64_t, SeriesSegment> others;
  for (const v1::StepRollup& row : rows) {
    const int64_t index = SeriesSegmentOf(row.step());
    if (current.has_value() && current->first == index) {
      current->second.Put(row);
      current_changed = true;
      continue;
    }
    auto it = others.find(index);
    if (it == others.end()) {
      std::string value;
      rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), handles_[kSeries],
                                   RollupKey(stream->key, axis, index), &value);
      SeriesSegment segment;
      if (s.ok()) {
        absl::StatusOr<SeriesSegment> parsed = SeriesSegment::Parse(value);
        if (!parsed.ok()) return parsed.status();
        segment = std::move(*parsed);
      } else if (!s.IsNotFound()) {
        return FromRocks(s, "reading a rollup series segment");
      }
      it = others.emplace(index, std::move(segment)).first;
    }
    it->second.Put(row);
  }
  thread_local std::string bytes;
  if (current_changed) {
    current->second.SerializeTo(&bytes);
    batch->Put(handles_[kSeries], RollupKey(stream->key, axis, current->first), bytes);
  }
  for (const auto& [index, segment] : others) {
    segment.SerializeTo(&bytes);
    batch->Put(handles_[kSeries], RollupKey(stream->key, axis, index), bytes);
  }
  const int64_t last = SeriesSegmentOf(rows[rows.size() - 1].step());
  if (!current.has_value() || current->first != last) {
    current.emplace(last, std::move(others.at(last)));
  }
  return absl::OkStatus();
}

absl::Status EventStore::NotOpenError(const StreamKey& key) const {
  // A stream's job is known from its first OpenStream on; only a key made up elsewhere has none.
  std::string job_id = absl::StrCat("#", key.job_no);
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, record] : jobs_) {
      if (record->job_no() == key.job_no) job_id = id;
    }
  }
  return absl::FailedPreconditionError(
      absl::StrCat("stream of ", Describe(key, job_id), " is not open"));
}

std::shared_ptr<EventStore::Stream> EventStore::FindOpenStream(const StreamKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(key);
  return it == streams_.end() ? nullptr : it->second;
}

void EventStore::PutStrings(const StreamKey& key, const std::vector<StringDef>& strings,
                            rocksdb::WriteBatch* batch) const {
  for (const StringDef& s : strings) {
    v1::StringEntry entry;
    entry.set_id(s.id);
    entry.set_kind(static_cast<v1::StringKind>(s.kind));
    entry.set_value(s.value);
    batch->Put(handles_[kMeta], StringMetaKey(key, s.id), entry.SerializeAsString());
  }
}

absl::Status EventStore::PutEvents(
    Stream* stream, absl::Span<const Event> events, absl::string_view whole_batch_bytes,
    rocksdb::WriteBatch* batch) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  RankState& state = *stream->state;
  const v1::RankSummary& summary = stream->record.summary();
  // Time buckets follow the agent's latest clock estimate; the block records the one it was
  // applied with, so that a replay buckets its events exactly as this append did.
  std::optional<ClockEstimate> clock;
  if (summary.has_clock()) {
    clock = ClockEstimate{summary.clock().offset_ns(), summary.clock().round_trip_ns()};
    state.SetClockOffset(clock->offset_ns);
  }
  // The latest time these events can have happened at is about now, in the rank's clock.
  const int64_t horizon =
      SaturatingAdd(SaturatingSub(options_.now_ns(), clock.has_value() ? clock->offset_ns : 0),
                    clock.has_value() ? kFutureMarginNs : kFutureMarginWithoutClockNs);
  state.SetTimeHorizon(horizon);
  // Per-thread and cleared, not fresh: its rows' messages are reused batch after batch. But
  // not without bound: each stream has a handler thread, and a batch that closed thousands of
  // rows (a step marker every few events) must not leave them behind on every one of them.
  thread_local ClosedRollups closed;
  struct ReleaseRows {
    ~ReleaseRows() {
      if (closed.steps.size() + closed.buckets.size() > kReusedRows) {
        closed = ClosedRollups();
      } else {
        closed.Clear();
      }
    }
  } release_rows;
  state.Apply(events, &closed);
  PutBlock(stream, events, whole_batch_bytes, clock.has_value() ? &*clock : nullptr, horizon,
           batch);
  return PutRollups(stream, closed, batch);
}

void EventStore::PutBlock(Stream* stream, absl::Span<const Event> events,
                          absl::string_view whole_batch_bytes, const ClockEstimate* clock,
                          int64_t time_horizon_ns,
                          rocksdb::WriteBatch* batch) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Per-thread scratch: a stream's blocks are alike in size, and fresh buffers of a few
  // hundred KiB per batch cost page faults.
  thread_local std::string block;
  block.clear();
  if (whole_batch_bytes.empty() || !AppendEventsOnly(whole_batch_bytes, clock, &block)) {
    AppendBatchWire(events, {}, nullptr, clock, &block);
  }
  AppendTimeHorizonField(time_horizon_ns, &block);
  thread_local std::string compressed;
  const absl::string_view value = CompressBlock(block, &compressed);
  StreamRecord& record = stream->record;
  record.set_blocks(record.blocks() + 1);
  record.set_block_bytes(record.block_bytes() + value.size());
  batch->Put(handles_[kBlocks], BlockKey(stream->key, events.front().seq),
             rocksdb::Slice(value.data(), value.size()));
}

absl::Status EventStore::PutRollups(Stream* stream, const ClosedRollups& closed,
                                    rocksdb::WriteBatch* batch) const
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const StreamKey& key = stream->key;
  StreamRecord& record = stream->record;
  thread_local std::string row_bytes;
  for (int64_t step : closed.abandoned_steps) {
    batch->Delete(handles_[kRollups], RollupKey(key, RollupAxis::kStep, step));
  }
  for (const v1::StepRollup& r : closed.steps) {
    r.SerializeToString(&row_bytes);
    batch->Put(handles_[kRollups], RollupKey(key, RollupAxis::kStep, r.step()), row_bytes);
  }
  for (const v1::StepRollup& r : closed.buckets) {
    r.SerializeToString(&row_bytes);
    batch->Put(handles_[kRollups], RollupKey(key, RollupAxis::kTime, r.step()), row_bytes);
  }
  if (record.has_series()) {
    for (RollupAxis axis : {RollupAxis::kStep, RollupAxis::kTime}) {
      const auto& rows = axis == RollupAxis::kStep ? closed.steps : closed.buckets;
      if (absl::Status st = AddToSeries(stream, axis, rows, batch); !st.ok()) return st;
    }
  }
  // The open rollups are rewritten with every batch, so readers always see the current step.
  const RankState& state = *stream->state;
  const v1::StepRollup open_step = state.OpenStepRollup();
  const v1::StepRollup open_bucket = state.OpenBucketRollup();
  batch->Put(handles_[kRollups], RollupKey(key, RollupAxis::kStep, state.current_step()),
             open_step.SerializeAsString());
  batch->Put(handles_[kRollups], RollupKey(key, RollupAxis::kTime, state.current_bucket()),
             open_bucket.SerializeAsString());
  if (record.has_series()) {
    CopyScalarPart(open_step, record.mutable_open_step());
    CopyScalarPart(open_bucket, record.mutable_open_bucket());
  }
  return absl::OkStatus();
}

void EventStore::UpdateSummary(Stream* stream, absl::Span<const Event> events,
                               const AgentCounterValues& counters) const
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const RankState& state = *stream->state;
  v1::RankSummary& summary = *stream->record.mutable_summary();
  if (summary.events_stored() == 0) summary.set_first_ts_ns(state.first_ts_ns());
  summary.set_events_stored(summary.events_stored() + events.size());
  summary.set_durable_seq(events.back().seq);
  summary.set_last_ts_ns(state.last_ts_ns());
  v1::AgentCounters* c = summary.mutable_counters();
  c->set_events_recorded(counters.events_recorded);
  c->set_events_lost(counters.events_lost);
  c->set_spool_bytes(counters.spool_bytes);
  c->set_reconnects(counters.reconnects);
  c->set_cupti_records_dropped(counters.cupti_records_dropped);
  summary.set_live_bytes(state.live_bytes());
  summary.set_current_step(state.current_step());
  summary.set_no_step_markers(!state.has_step_marker());
  summary.set_anomalies(state.anomalies().total());
  state.anomalies().ToProto(summary.mutable_anomaly_counts());
  summary.set_ooms(state.ooms());
  summary.set_first_oom_seq(state.first_oom_seq());
  summary.set_first_oom_ts_ns(state.first_oom_ts_ns());
  stream->record.set_first_oom_bytes(state.first_oom_bytes());
  stream->record.set_first_oom_tag_id(state.first_oom_tag_id());
  stream->record.set_first_oom_source_id(state.first_oom_source_id());
}

bool EventStore::CheckpointDue(const Stream& stream) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const StreamRecord& record = stream.record;
  const bool steps_due =
      options_.checkpoint_every_steps > 0 &&
      stream.state->steps_closed() - record.checkpoint_steps() >= options_.checkpoint_every_steps;
  const bool events_due = options_.checkpoint_every_events > 0 &&
                          record.summary().events_stored() - record.checkpoint_events() >=
                              options_.checkpoint_every_events;
  return steps_due || events_due;
}

absl::StatusOr<AppendResult> EventStore::Append(const StreamKey& key, const DecodedBatch& batch,
                                                absl::string_view batch_bytes) {
  std::shared_ptr<Stream> stream = FindOpenStream(key);
  if (stream == nullptr) return NotOpenError(key);
  absl::MutexLock lock(&stream->mu);
  if (!stream->loaded) {
    if (absl::Status s = LoadStream(stream.get()); !s.ok()) return s;
  }
  StreamRecord& record = stream->record;
  v1::RankSummary& summary = *record.mutable_summary();
  const uint64_t durable = summary.durable_seq();
  // Sequence numbers strictly increase within a batch (DecodeBatch checked), so everything
  // already stored is one prefix of it.
  const auto first_new = std::upper_bound(batch.events.begin(), batch.events.end(), durable,
                                          [](uint64_t seq, const Event& e) { return seq < e.seq; });
  const absl::Span<const Event> kept =
      absl::MakeConstSpan(batch.events).subspan(first_new - batch.events.begin());
  AppendResult result;
  result.duplicates = static_cast<uint64_t>(first_new - batch.events.begin());
  result.stored = kept.size();
  result.durable_seq = durable;
  if (kept.empty() && batch.strings.empty()) return result;

  rocksdb::WriteBatch wb;
  PutStrings(key, batch.strings, &wb);
  if (batch.clock.has_value()) *summary.mutable_clock() = ToProto(*batch.clock);
  if (!kept.empty()) {
    // A batch stored whole keeps its own bytes; a resent one that overlaps is encoded again.
    const bool whole = kept.size() == batch.events.size();
    if (absl::Status s = PutEvents(stream.get(), kept, whole ? batch_bytes : "", &wb); !s.ok()) {
      ForgetState(stream.get());
      return s;
    }
    UpdateSummary(stream.get(), kept, batch.counters);
    if (CheckpointDue(*stream)) AddCheckpoint(stream.get(), &wb);
  }
  summary.set_last_ack_unix_ns(absl::GetCurrentTimeNanos());
  summary.set_complete(false);
  wb.Put(handles_[kMeta], StreamMetaKey(key), record.SerializeAsString());

  if (absl::Status s = Write(&wb); !s.ok()) {
    // The in-memory state already includes the batch; the disk does not. Rebuild on next use.
    ForgetState(stream.get());
    return s;
  }
  result.durable_seq = summary.durable_seq();
  return result;
}

absl::Status EventStore::CloseStream(const StreamKey& key, bool complete, uint64_t connection) {
  std::shared_ptr<Stream> stream;
  std::function<void()> hook;
  {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(key);
    if (it != streams_.end()) stream = it->second;
    hook.swap(close_hook_);
  }
  if (hook) hook();
  if (stream == nullptr) return NotOpenError(key);
  absl::Status status;
  {
    absl::MutexLock lock(&stream->mu);
    if (stream->loaded) {
      // A later connection of the stream decides `complete`. Checked under stream->mu: one
      // opened after this check closes after this write (its close needs stream->mu too), so
      // the newest connection's word is the last one written.
      const bool superseded = connection != 0 && connection < stream->newest_connection.load();
      rocksdb::WriteBatch wb;
      if (!superseded) stream->record.mutable_summary()->set_complete(complete);
      // A stream that comes back resumes from here instead of replaying its tail.
      if (stream->record.summary().events_stored() > stream->record.checkpoint_events()) {
        AddCheckpoint(stream.get(), &wb);
      }
      wb.Put(handles_[kMeta], StreamMetaKey(key), stream->record.SerializeAsString());
      status = Write(&wb);
      if (!status.ok()) ForgetState(stream.get());
    }
  }
  ReleaseConnection(key);
  return status;
}

void EventStore::RunInNextCloseForTest(std::function<void()> hook) {
  absl::MutexLock lock(&mu_);
  close_hook_ = std::move(hook);
}

absl::StatusOr<JobRecord> EventStore::FindJob(absl::string_view job_id) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return UnknownJob(job_id);
  return *it->second;
}

absl::StatusOr<std::vector<StreamRecord>> EventStore::ReadStreamRecords(
    const rocksdb::Snapshot* snapshot, uint32_t job_no) const {
  return ReadStreamRecords(snapshot, StreamMetaPrefix(job_no));
}

absl::StatusOr<std::vector<StreamRecord>> EventStore::ReadStreamRecords(
    const rocksdb::Snapshot* snapshot, absl::string_view prefix) const {
  std::vector<StreamRecord> out;
  absl::Status s = ForEachWithPrefix(db_.get(), handles_[kMeta], snapshot, prefix,
                                     [&](absl::string_view key, absl::string_view value) {
                                       out.emplace_back();
                                       return ParseValue(value, "stream record", &out.back());
                                     });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::vector<StringDef>> EventStore::ReadStrings(const rocksdb::Snapshot* snapshot,
                                                               const StreamKey& key) const {
  std::vector<StringDef> out;
  absl::Status s = ForEachWithPrefix(
      db_.get(), handles_[kMeta], snapshot, StringMetaPrefix(key),
      [&](absl::string_view k, absl::string_view value) {
        v1::StringEntry entry;
        if (absl::Status st = ParseValue(value, "string entry", &entry); !st.ok()) return st;
        out.push_back(StringDef{entry.id(), static_cast<StringKind>(entry.kind()), entry.value()});
        return absl::OkStatus();
      });
  if (!s.ok()) return s;
  return out;
}

namespace {

// Releases a RocksDB snapshot when the read is over.
class SnapshotGuard {
 public:
  explicit SnapshotGuard(rocksdb::DB* db) : db_(db), snapshot_(db->GetSnapshot()) {}
  ~SnapshotGuard() { db_->ReleaseSnapshot(snapshot_); }
  SnapshotGuard(const SnapshotGuard&) = delete;
  SnapshotGuard& operator=(const SnapshotGuard&) = delete;
  const rocksdb::Snapshot* get() const { return snapshot_; }

 private:
  rocksdb::DB* db_;
  const rocksdb::Snapshot* snapshot_;
};

}  // namespace

absl::StatusOr<std::vector<v1::JobSummary>> EventStore::ListJobs() const {
  std::vector<JobRecord> jobs;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, job] : jobs_) jobs.push_back(*job);
  }
  std::sort(jobs.begin(), jobs.end(),
            [](const JobRecord& a, const JobRecord& b) { return a.job_id() < b.job_id(); });
  SnapshotGuard snapshot(db_.get());
  std::vector<v1::JobSummary> out;
  for (const JobRecord& job : jobs) {
    absl::StatusOr<std::vector<StreamRecord>> records =
        ReadStreamRecords(snapshot.get(), job.job_no());
    if (!records.ok()) return records.status();
    v1::JobSummary summary;
    summary.set_job_id(job.job_id());
    std::vector<uint32_t> ranks;
    bool any_events = false;
    for (const StreamRecord& r : *records) {
      const v1::RankSummary& s = r.summary();
      if (s.identity().started_the_rank()) {
        summary.set_parents(summary.parents() + 1);
      } else if (s.identity().has_subprocess_of_rank()) {
        summary.set_subprocesses(summary.subprocesses() + 1);
      } else {
        ranks.push_back(s.rank());
      }
      summary.set_events(summary.events() + s.events_stored());
      if (s.events_stored() == 0) continue;
      // In the collector's clock: the ranks' own clocks may disagree by more than the job ran.
      const int64_t offset = s.has_clock() ? s.clock().offset_ns() : 0;
      const int64_t first = SaturatingAdd(s.first_ts_ns(), offset);
      const int64_t last = SaturatingAdd(s.last_ts_ns(), offset);
      if (!any_events || first < summary.first_ts_ns()) summary.set_first_ts_ns(first);
      if (!any_events || last > summary.last_ts_ns()) summary.set_last_ts_ns(last);
      any_events = true;
    }
    std::sort(ranks.begin(), ranks.end());
    summary.set_ranks(
        static_cast<uint32_t>(std::unique(ranks.begin(), ranks.end()) - ranks.begin()));
    summary.set_restarts(static_cast<uint32_t>(records->size()) - summary.subprocesses() -
                         summary.parents() - summary.ranks());
    out.push_back(std::move(summary));
  }
  return out;
}

absl::StatusOr<std::vector<v1::RankSummary>> EventStore::ListRanks(absl::string_view job_id) const {
  absl::StatusOr<JobRecord> job = FindJob(job_id);
  if (!job.ok()) return job.status();
  absl::StatusOr<std::vector<StreamRecord>> records = ReadStreamRecords(nullptr, job->job_no());
  if (!records.ok()) return records.status();
  std::vector<v1::RankSummary> out;
  out.reserve(records->size());
  for (StreamRecord& r : *records) {
    v1::RankSummary& summary = *r.mutable_summary();
    const StreamKey key{job->job_no(), summary.rank(), summary.identity().attempt()};
    summary.set_connected(FindOpenStream(key) != nullptr);
    out.push_back(std::move(summary));
  }
  return out;
}

absl::Status EventStore::VisitSeries(
    rocksdb::Iterator* series, const StreamRecord& record, const StreamKey& key, RollupAxis axis,
    v1::StepRollup* row, const std::function<void(const v1::StepRollup&)>& on_row) const {
  // The series holds closed rows; the open one (rewritten with every batch) is in the record.
  std::optional<v1::StepRollup> open;
  if (record.summary().events_stored() > 0) {
    open = axis == RollupAxis::kStep ? record.open_step() : record.open_bucket();
  }
  // Series rows in key order with the open row in its place; it replaces a closed row of the
  // same key (a step that went backwards and is open again, as in the rollups family).
  const std::string prefix = RollupPrefix(key, axis);
  for (series->Seek(prefix); series->Valid(); series->Next()) {
    const rocksdb::Slice k = series->key();
    if (!absl::StartsWith(absl::string_view(k.data(), k.size()), prefix)) break;
    const rocksdb::Slice v = series->value();
    absl::Status s = ForEachSeriesRow(absl::string_view(v.data(), v.size()), row,
                                      [&](const v1::StepRollup& closed) {
                                        if (open.has_value() && open->step() <= closed.step()) {
                                          on_row(*open);
                                          const bool replaced = open->step() == closed.step();
                                          open.reset();
                                          if (replaced) return;
                                        }
                                        on_row(closed);
                                      });
    if (!s.ok()) return s;
  }
  if (absl::Status s = FromRocks(series->status(), "reading a rollup series"); !s.ok()) return s;
  if (open.has_value()) on_row(*open);
  return absl::OkStatus();
}

namespace {

// Moves a rollup row's times by `shift_ns`: its start and end (`whole`: a step row, stored in
// the rank's clock) and its peak moment, which every row stores in the rank's clock. 0 times,
// unset, stay 0.
void ShiftRowTimes(int64_t shift_ns, bool whole, v1::StepRollup* row) {
  if (shift_ns == 0) return;
  if (whole && row->start_ns() != 0) row->set_start_ns(SaturatingAdd(row->start_ns(), shift_ns));
  if (whole && row->end_ns() != 0) row->set_end_ns(SaturatingAdd(row->end_ns(), shift_ns));
  if (row->peak_ns() != 0) row->set_peak_ns(SaturatingAdd(row->peak_ns(), shift_ns));
}

}  // namespace

absl::StatusOr<v1::GetRollupsResponse> EventStore::Rollups(absl::string_view job_id,
                                                           RollupAxis axis,
                                                           const RollupSelection& selection) const {
  v1::GetRollupsResponse out;
  int64_t bucket_ns = 0;
  v1::RankRollups* current = nullptr;
  const std::vector<uint32_t>& wanted = selection.ranks;
  // Serialized bytes so far, a field's tag and length included (at most 6 bytes over a small
  // message's). Checked as each rank ends: the rows of one rank are held before the answer is
  // refused or cut, not the whole job's. A page ends at a rank's boundary, every attempt in it.
  uint64_t bytes = 0;
  int rank_begins_at = 0;
  std::optional<uint32_t> next_rank;
  auto close_rank = [&]() -> absl::Status {
    if (selection.max_bytes == 0 || bytes <= selection.max_bytes) return absl::OkStatus();
    if (selection.partial && rank_begins_at == 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the rollups of rank ", out.ranks(0).rank(), " of job \"", job_id,
          "\" alone exceed max_response_bytes (", selection.max_bytes, " bytes)"));
    }
    if (!selection.partial) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the rollups of job \"", job_id, "\"",
          wanted.empty() ? "" : absl::StrCat(" for ", wanted.size(), " rank(s)"),
          " exceed max_response_bytes (", selection.max_bytes, " bytes): ask for fewer ranks"));
    }
    // The ranks before this one fit (checked as each ended); this one starts the next page.
    next_rank = out.ranks(rank_begins_at).rank();
    out.mutable_ranks()->DeleteSubrange(rank_begins_at, out.ranks_size() - rank_begins_at);
    return absl::CancelledError("the page is full");  // stops the scan; not an error
  };
  absl::Status s = VisitRollups(
      job_id, axis, selection.detail, &bucket_ns,
      [&](const v1::RankRollups& rank) {
        if (current != nullptr && rank.rank() != current->rank()) {
          if (absl::Status st = close_rank(); !st.ok()) return st;
          rank_begins_at = out.ranks_size();
        }
        current = out.add_ranks();
        *current = rank;
        if (selection.max_bytes != 0) bytes += rank.ByteSizeLong() + 6;
        return absl::OkStatus();
      },
      [&](const v1::StepRollup& row) {
        *current->add_steps() = row;
        if (selection.max_bytes != 0) bytes += row.ByteSizeLong() + 6;
      },
      wanted, selection.from_rank, selection.with_subprocesses);
  if (!next_rank.has_value()) {
    if (!s.ok()) return s;
    if (current != nullptr) {
      if (absl::Status st = close_rank(); !st.ok() && !next_rank.has_value()) return st;
    }
  }
  if (next_rank.has_value()) out.set_next_rank(*next_rank);
  out.set_bucket_ns(bucket_ns);
  return out;
}

absl::Status EventStore::VisitRollups(
    absl::string_view job_id, RollupAxis axis, RollupDetail detail, int64_t* bucket_ns,
    const std::function<absl::Status(const v1::RankRollups&)>& on_rank,
    const std::function<void(const v1::StepRollup&)>& on_row,
    const std::vector<uint32_t>& only_ranks, uint32_t from_rank, bool with_subprocesses) const {
  absl::StatusOr<JobRecord> job = FindJob(job_id);
  if (!job.ok()) return job.status();
  *bucket_ns = job->bucket_ns();
  SnapshotGuard snapshot(db_.get());
  absl::StatusOr<std::vector<StreamRecord>> records =
      ReadStreamRecords(snapshot.get(), job->job_no());
  if (!records.ok()) return records.status();
  v1::RankRollups header;
  v1::StepRollup row;
  // One iterator, sought to each stream's rows in turn; the job's rows are read front to back.
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot.get();
  ro.readahead_size = 2 << 20;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, handles_[kRollups]));
  std::unique_ptr<rocksdb::Iterator> series;
  if (detail == RollupDetail::kScalars) {
    // Its blocks are not kept in RocksDB's block cache: every series read is converted whole
    // into a timeline or step metrics, which the analyses cache (TimelineCache). Cached, a cold
    // read first-touched each decompressed block's fresh memory, a third of a cold 1024-rank
    // diverged's page faults (5.8 k -> 3.7 k; 114-133 -> 87-100 ms, analysis_bench); a reload
    // from the OS page cache took no longer (28-30 ms against 30-33).
    rocksdb::ReadOptions series_ro = ro;
    series_ro.fill_cache = false;
    series.reset(db_->NewIterator(series_ro, handles_[kSeries]));
  }
  // Sorted, for a lookup per stream: a job of 16 k ranks with an engine each names 16 k.
  std::vector<uint32_t> named_ranks = only_ranks;
  std::sort(named_ranks.begin(), named_ranks.end());
  for (const StreamRecord& r : *records) {
    const v1::RankSummary& summary = r.summary();
    if (summary.rank() < from_rank) continue;
    const bool named = std::binary_search(named_ranks.begin(), named_ranks.end(), summary.rank());
    if (!only_ranks.empty() && !named) continue;
    // A rank's subprocess is no rank of its own to compare (an engine beside the trainers).
    if (summary.identity().has_subprocess_of_rank() && !named && !with_subprocesses) continue;
    const StreamKey key{job->job_no(), summary.rank(), summary.identity().attempt()};
    header.Clear();
    header.set_rank(summary.rank());
    header.set_attempt(key.attempt);
    *header.mutable_identity() = summary.identity();
    // Only a connected stream adds to its last row; one that closed or vanished never will.
    header.set_last_row_in_progress(FindOpenStream(key) != nullptr);
    if (detail == RollupDetail::kFull) {
      absl::StatusOr<std::vector<StringDef>> strings = ReadStrings(snapshot.get(), key);
      if (!strings.ok()) return strings.status();
      for (const StringDef& d : *strings) {
        v1::StringEntry* e = header.add_strings();
        e->set_id(d.id);
        e->set_kind(static_cast<v1::StringKind>(d.kind));
        e->set_value(d.value);
      }
    }
    if (absl::Status st = on_rank(header); !st.ok()) return st;
    // Step rows carry the rank's own clock (its step markers' times); they are handed out in
    // the collector's, as time buckets are, so that ranks on hosts whose clocks disagree line
    // up (timeline --from/--to, onsets, exports). The shift is the agent's latest estimate, the
    // one LivePoint::kAtCollectorTime takes back off: so is every row's peak moment, which
    // `live --at-peak` reads at (shifted by an earlier estimate, µs off, it read the live set
    // just before the allocation that made the peak).
    const int64_t shift = summary.has_clock() ? summary.clock().offset_ns() : 0;
    const bool whole = axis == RollupAxis::kStep;
    v1::StepRollup shifted;
    auto deliver = [&](const v1::StepRollup& closed) {
      if (shift == 0) return on_row(closed);
      shifted = closed;
      ShiftRowTimes(shift, whole, &shifted);
      on_row(shifted);
    };
    if (detail == RollupDetail::kScalars && r.has_series()) {
      if (absl::Status st = VisitSeries(series.get(), r, key, axis, &row, deliver); !st.ok()) {
        return st;
      }
      continue;
    }
    const std::string prefix = RollupPrefix(key, axis);
    for (it->Seek(prefix); it->Valid(); it->Next()) {
      const rocksdb::Slice k = it->key();
      if (!absl::StartsWith(absl::string_view(k.data(), k.size()), prefix)) break;
      const rocksdb::Slice v = it->value();
      // Parsing clears the message but keeps its repeated fields' elements for reuse.
      if (absl::Status p = ParseValue(absl::string_view(v.data(), v.size()), "rollup row", &row);
          !p.ok()) {
        return p;
      }
      if (detail == RollupDetail::kScalars) {
        row.clear_by_tag();
        row.clear_by_source();
        row.clear_by_phase();
      }
      ShiftRowTimes(shift, whole, &row);
      on_row(row);
    }
    // After each stream: the next Seek clears an error, and a checksum failure only ends the
    // loop early, so checking once at the end passed a rank cut short, or missing, as whole.
    if (absl::Status st =
            FromRocks(it->status(), absl::StrCat("reading the rollups of ", Describe(key, job_id)));
        !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<StoredEvents> EventStore::ReadEvents(absl::string_view job_id, uint32_t rank,
                                                    uint32_t attempt, uint64_t from_seq,
                                                    uint32_t limit) const {
  absl::StatusOr<JobRecord> job = FindJob(job_id);
  if (!job.ok()) return job.status();
  const StreamKey key{job->job_no(), rank, attempt};
  const std::string where = Describe(key, job_id);
  SnapshotGuard snapshot(db_.get());
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot.get();
  std::string value;
  rocksdb::Status s = db_->Get(ro, handles_[kMeta], StreamMetaKey(key), &value);
  if (s.IsNotFound()) return absl::NotFoundError(absl::StrCat(where, " is not stored"));
  if (!s.ok()) return FromRocks(s, absl::StrCat("reading the record of ", where));

  if (limit == 0) limit = kDefaultReadLimit;
  limit = std::min(limit, kMaxReadLimit);
  from_seq = std::max<uint64_t>(from_seq, 1);
  StoredEvents out;
  const std::string prefix = StreamPrefix(key);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, handles_[kBlocks]));
  // The block holding from_seq starts at or before it.
  it->SeekForPrev(BlockKey(key, from_seq));
  if (!it->Valid() ||
      !absl::StartsWith(absl::string_view(it->key().data(), it->key().size()), prefix)) {
    it->Seek(BlockKey(key, 0));
  }
  bool full = false;
  for (; !full && it->Valid(); it->Next()) {
    const rocksdb::Slice k = it->key();
    if (!absl::StartsWith(absl::string_view(k.data(), k.size()), prefix)) break;
    const rocksdb::Slice v = it->value();
    absl::StatusOr<DecodedBatch> block = DecodeBlock(absl::string_view(v.data(), v.size()), where);
    if (!block.ok()) return block.status();
    for (const Event& e : block->events) {
      if (e.seq < from_seq) continue;
      if (out.events.size() >= limit) {
        out.next_seq = e.seq;
        full = true;
        break;
      }
      out.events.push_back(e);
      if (out.time_horizons.empty() ||
          out.time_horizons.back().horizon_ns != block->time_horizon_ns) {
        out.time_horizons.push_back({0, block->time_horizon_ns});
      }
      ++out.time_horizons.back().events;
    }
  }
  if (absl::Status st = FromRocks(it->status(), absl::StrCat("reading blocks of ", where));
      !st.ok()) {
    return st;
  }
  absl::StatusOr<std::vector<StringDef>> strings = ReadStrings(snapshot.get(), key);
  if (!strings.ok()) return strings.status();
  out.strings = std::move(*strings);
  return out;
}

absl::StatusOr<LiveSnapshot> EventStore::LiveAllocations(absl::string_view job_id, uint32_t rank,
                                                         std::optional<uint32_t> attempt,
                                                         const LivePoint& point) const {
  absl::StatusOr<JobRecord> job = FindJob(job_id);
  if (!job.ok()) return job.status();
  SnapshotGuard snapshot(db_.get());
  // This rank's records only: callers ask rank after rank (live sets of a whole job), and
  // reading every rank's record each time made that quadratic.
  absl::StatusOr<std::vector<StreamRecord>> records =
      ReadStreamRecords(snapshot.get(), StreamMetaPrefix(job->job_no(), rank));
  if (!records.ok()) return records.status();
  const StreamRecord* record = nullptr;
  for (const StreamRecord& r : *records) {
    const uint32_t a = r.summary().identity().attempt();
    if (attempt.has_value() ? a == *attempt
                            : (record == nullptr || a > record->summary().identity().attempt())) {
      record = &r;
    }
  }
  if (record == nullptr) {
    return absl::NotFoundError(
        attempt.has_value()
            ? absl::StrCat("job \"", job_id, "\" has no rank ", rank, " attempt ", *attempt)
            : absl::StrCat("job \"", job_id, "\" has no rank ", rank));
  }
  const v1::RankSummary& summary = record->summary();
  const StreamKey key{job->job_no(), rank, summary.identity().attempt()};
  const int64_t clock_offset_ns = summary.has_clock() ? summary.clock().offset_ns() : 0;

  DecodeCutoff target;
  target.last_seq = summary.durable_seq();
  uint64_t checkpoint_seq = record->checkpoint_seq();
  if (point.kind != LivePoint::Kind::kNow) {
    if (point.kind == LivePoint::Kind::kFirstOom) {
      if (summary.first_oom_seq() == 0) {
        return absl::NotFoundError(absl::StrCat(Describe(key, job_id), " has no OOM event"));
      }
      target.last_seq = summary.first_oom_seq();
    } else if (point.through_seq != 0) {
      target.last_seq = std::min(target.last_seq, point.through_seq);
    } else if (point.kind == LivePoint::Kind::kAtCollectorTime) {
      target.max_ts_ns = SaturatingSub(point.at_ns, clock_offset_ns);
    } else {
      target.max_ts_ns = point.at_ns;
    }
    // The newest checkpoint that does not pass the target.
    checkpoint_seq = 0;
    absl::Status s =
        ForEachWithPrefix(db_.get(), handles_[kMeta], snapshot.get(), CheckpointTsPrefix(key),
                          [&](absl::string_view k, absl::string_view value) {
                            absl::StatusOr<CheckpointKeyParts> parts = DecodeCheckpointTsKey(k);
                            if (!parts.ok()) return parts.status();
                            absl::StatusOr<int64_t> ts = DecodeOrderedI64(value);
                            if (!ts.ok()) return ts.status();
                            if (parts->seq <= target.last_seq && *ts <= target.max_ts_ns) {
                              checkpoint_seq = parts->seq;
                            }
                            return absl::OkStatus();
                          });
    if (!s.ok()) return s;
  }
  absl::StatusOr<RankState> state =
      Replay(snapshot.get(), key, job_id, job->bucket_ns(), checkpoint_seq, target);
  if (!state.ok()) return state.status();

  LiveSnapshot out;
  out.key = key;
  out.seq = state->last_seq();
  out.ts_ns = state->last_ts_ns();
  out.step = state->current_step();
  out.live_bytes = state->live_bytes();
  out.clock_offset_ns = clock_offset_ns;
  if (point.kind == LivePoint::Kind::kFirstOom) {
    out.oom_requested_bytes = record->first_oom_bytes();
    out.oom_tag_id = record->first_oom_tag_id();
    out.oom_source_id = record->first_oom_source_id();
  }
  out.open_phases = state->open_phases();
  out.allocation_phases_known = state->allocation_phases_known();
  out.allocations.reserve(state->allocations().size() + state->mappings().size());
  for (const auto* set : {&state->allocations(), &state->mappings()}) {
    for (const auto& [address, a] : *set) out.allocations.emplace_back(address, a);
  }
  std::sort(out.allocations.begin(), out.allocations.end(), [](const auto& a, const auto& b) {
    if (a.second.bytes != b.second.bytes) return a.second.bytes > b.second.bytes;
    return a.first < b.first;
  });
  absl::StatusOr<std::vector<StringDef>> strings = ReadStrings(snapshot.get(), key);
  if (!strings.ok()) return strings.status();
  out.strings = std::move(*strings);
  return out;
}

}  // namespace memtrace::collector
