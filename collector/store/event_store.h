// The collector's RocksDB store: event blocks, rollups, live-set checkpoints and per-stream meta,
// written so that "appended" means "durable, exactly once" (see collector/README.md).
//
// A stream is one (job, rank, attempt). Append() trims what the stream already has (events at or
// below its high-water mark), applies the rest to the stream's RankState and writes the block, the
// rollup rows it changed, the string-table entries, the new high-water mark and (every N steps)
// a checkpoint in ONE WriteBatch. After a crash, a stream's state is rebuilt from its newest
// checkpoint plus the blocks after it when the stream is next opened.
//
// Thread-safe: streams append concurrently (RocksDB groups their commits); appends to one stream
// are serialized. Reads use a RocksDB snapshot and never block appends. rocksdb::Status stays in
// this module: every error is an absl::Status naming the job, rank or directory.
#ifndef MEMTRACE_COLLECTOR_STORE_EVENT_STORE_H_
#define MEMTRACE_COLLECTOR_STORE_EVENT_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "collector/rollup/rank_state.h"
#include "collector/store/key_codec.h"
#include "proto/codec/batch_codec.h"
#include "proto/codec/batch_wire.h"
#include "proto/codec/event.h"
#include "proto/memtrace/v1/events.pb.h"
#include "proto/memtrace/v1/query.pb.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
class Env;
class Iterator;
class Snapshot;
class WriteBatch;
}  // namespace rocksdb

namespace memtrace::collector {

class JobRecord;
class StreamRecord;

// When a write counts as durable. kSync fsyncs the WAL before Append returns (survives power
// loss); kAsync hands it to the OS (survives a collector crash or kill -9, not a machine crash).
enum class Durability { kSync, kAsync };
absl::StatusOr<Durability> ParseDurability(absl::string_view name);
const char* DurabilityName(Durability d);

// How much of each rollup row a reader needs: every field, or the scalars (all but the
// by_tag / by_source / by_phase lists: what diverged, headroom and growth by rank look at).
enum class RollupDetail { kFull, kScalars };

struct EventStoreOptions {
  // Directory of the RocksDB database; created (with parents) when missing.
  std::string dir;
  Durability durability = Durability::kSync;
  // Time-bucket width for jobs first seen by this store (a job keeps the width it started with).
  int64_t bucket_ns = 1'000'000'000;
  // Checkpoint a stream's live set every N closed steps, and after this many events without a
  // checkpoint (jobs without step markers), and when a stream closes.
  uint32_t checkpoint_every_steps = 50;
  uint64_t checkpoint_every_events = uint64_t{1} << 21;
  // The collector's clock (CLOCK_REALTIME ns) when a batch is stored: with the margins below,
  // it gives the batch's time horizon (RankState::SetTimeHorizon). Tests set their own.
  std::function<int64_t()> now_ns = RealtimeNanos;
  // RocksDB's environment; nullptr = the default. Tests give one whose file system fails
  // writes, as a full disk does (not owned; it must outlive the store).
  rocksdb::Env* env = nullptr;
};

// How far past the collector's clock (in the rank's clock) a timestamp may be and still be a
// time: the agent's clock estimate is good to a round trip, so a timestamp well after the
// batch arrived is a clock gone wrong. Without an estimate (a first batch, an importer), a
// host's clock may be hours off (a time zone): only a day past is taken as garbage.
inline constexpr int64_t kFutureMarginNs = int64_t{10} * 60 * 1'000'000'000;
inline constexpr int64_t kFutureMarginWithoutClockNs = int64_t{24} * 3600 * 1'000'000'000;

// What OpenStream() tells the Ingest service.
struct OpenedStream {
  StreamKey key;
  // Every event with seq <= durable_seq is already stored.
  uint64_t durable_seq = 0;
  // "env" or "host+device+pid".
  std::string identified_by;
  // Which of the stream's connections this is (1, 2, ... since the store opened): for
  // CloseStream, so that a connection opened earlier and closed later (a dead one noticed
  // late) does not undo what the newest one's close wrote.
  uint64_t connection = 0;
};

struct AppendResult {
  uint64_t durable_seq = 0;
  // Events of the batch written now, and those dropped as already stored.
  uint64_t stored = 0;
  uint64_t duplicates = 0;
};

// Which moment LiveAllocations() reconstructs.
struct LivePoint {
  enum class Kind {
    kNow,
    // The state after every event up to the first with ts_ns > at_ns: a time in the rank's
    // own clock, as its events carry it.
    kAtTime,
    // The same moment given in the collector's clock: at_ns minus the rank's clock offset
    // (RankSummary.clock, the agent's latest estimate; 0 without one) in its own clock. What
    // lines up ranks on hosts whose clocks disagree.
    kAtCollectorTime,
    kFirstOom,
  };
  Kind kind = Kind::kNow;
  int64_t at_ns = 0;
  // With kAtTime or kAtCollectorTime, nonzero: the state after exactly the events up to this
  // seq, whatever their times (at_ns, that event's time, is still what the snapshot reports and
  // what other ranks are read at). A rollup's peak is the state after one event: read by time,
  // a free stamped the same microsecond after it was in, and an event stamped late before it
  // out.
  uint64_t through_seq = 0;
};

// One rank's live set at a moment.
struct LiveSnapshot {
  StreamKey key;
  // The state includes every event with seq <= seq; ts_ns / step are those of that event.
  uint64_t seq = 0;
  int64_t ts_ns = 0;
  int64_t step = 0;
  uint64_t live_bytes = 0;
  // The rank's clock offset used for kAtCollectorTime (whatever the point's kind): collector
  // time = a rank time + clock_offset_ns.
  int64_t clock_offset_ns = 0;
  // Allocations and VMM mappings by address, largest first.
  std::vector<std::pair<uint64_t, LiveAllocation>> allocations;
  std::vector<StringDef> strings;
  uint64_t oom_requested_bytes = 0;
  // For kFirstOom: the failed allocation's tag and call site (string ids; 0 = none).
  uint32_t oom_tag_id = 0;
  uint32_t oom_source_id = 0;
  // The phases open at that moment, outermost first (string ids), and whether each
  // allocation's phase_id is known (RankState::allocation_phases_known).
  std::vector<uint32_t> open_phases;
  bool allocation_phases_known = false;
};

// `events` consecutive events stored with one time horizon (DecodedBatch::time_horizon_ns).
struct TimeHorizonRun {
  uint32_t events = 0;
  int64_t horizon_ns = kNoTimeHorizon;
};

struct StoredEvents {
  // As the agent sent them: timestamps past their horizon included.
  std::vector<Event> events;
  // The horizon each event was stored with, in runs that cover `events` in order.
  std::vector<TimeHorizonRun> time_horizons;
  std::vector<StringDef> strings;
  // Where to continue reading; 0 when nothing more is stored.
  uint64_t next_seq = 0;
};

// Which of a job's rollups EventStore::Rollups returns, and how many bytes of them at most.
struct RollupSelection {
  // Stored rank numbers (RankSummary.rank), every attempt of each; empty: every rank.
  std::vector<uint32_t> ranks;
  // Only ranks >= this (with `ranks`, both apply): where a page starts.
  uint32_t from_rank = 0;
  // The serialized size the answer may reach; 0: no bound.
  uint64_t max_bytes = 0;
  // Past max_bytes: the whole ranks that fit and next_rank, instead of RESOURCE_EXHAUSTED.
  bool partial = false;
  // The ranks' subprocesses too (VisitRollups' with_subprocesses).
  bool with_subprocesses = false;
  // kScalars: the rows without their group lists, as VisitRollups reads them.
  RollupDetail detail = RollupDetail::kFull;
};

class EventStore {
 public:
  // Synthetic ranks (workers without a launcher rank, and ranks' subprocesses) are numbered
  // from here, far above any world size, so they can never collide with a rank that a launcher
  // assigned in the same job.
  static constexpr uint32_t kFirstSyntheticRank = 1'000'000;

  // Opens (creating when missing) the store at options.dir. Fails with a message naming the
  // directory when it cannot be created, locked (another collector) or read.
  static absl::StatusOr<std::unique_ptr<EventStore>> Open(const EventStoreOptions& options);
  ~EventStore();
  EventStore(const EventStore&) = delete;
  EventStore& operator=(const EventStore&) = delete;

  // `listener` runs once, on the writing thread, when a write first fails with an I/O error and
  // the store stops taking writes (below); at once when that has already happened. The server
  // marks its Ingest service NOT_SERVING there, so health checks stop reporting a collector that
  // refuses every batch as SERVING. Set once; `listener` must stay valid while the store takes
  // writes (the server clears it at shutdown).
  void OnWritesStopped(std::function<void()> listener);
  // Whether writes are still taken (no write has failed with an I/O error).
  bool TakesWrites() const { return !write_failed_.load(std::memory_order_acquire); }

  // Registers a connection of the stream `identity` names (job_id must be non-empty), numbering
  // a new job and, for identity.rank == -1, naming the worker by host+device+pid with a stable
  // synthetic rank. Loads the stream's state (checkpoint + replay) when it is not in memory.
  // Every OpenStream must be paired with a CloseStream.
  absl::StatusOr<OpenedStream> OpenStream(const v1::RankIdentity& identity);
  // INVALID_ARGUMENT when OpenStream would refuse `identity` whatever the store holds (an empty
  // job id; a launcher rank in the synthetic range): for callers that must check before
  // counting the identity anywhere (stream admission).
  static absl::Status CheckIdentity(const v1::RankIdentity& identity);

  // Stores the events of `batch` above the stream's high-water mark (see the file comment) and
  // returns once the write is durable under the configured policy. On error nothing of the
  // batch is stored and the stream's in-memory state is rebuilt from disk on next use.
  // `batch_bytes`, when given, are the EventBatch bytes `batch` was decoded from: a batch
  // stored whole is then kept as those bytes (batch_wire's AppendEventsOnly) instead of being
  // encoded again.
  absl::StatusOr<AppendResult> Append(const StreamKey& key, const DecodedBatch& batch,
                                      absl::string_view batch_bytes = {});

  // Ends one connection of the stream: `complete` marks the rank cleanly finished (the agent
  // closed its stream), false leaves it incomplete (vanished). The last connection checkpoints
  // the state and drops it from memory. `connection` (OpenedStream::connection): when a later
  // connection of the stream has opened since, this one's `complete` is not written, since the
  // newer connection's close decides it; 0 always writes it.
  absl::Status CloseStream(const StreamKey& key, bool complete, uint64_t connection = 0);
  // Test seam: runs once, inside the next CloseStream, after it found the stream and before it
  // takes the stream's lock, where another connection can open and close (a race a test must
  // be able to force).
  void RunInNextCloseForTest(std::function<void()> hook);

  // Reads. Unknown jobs are NOT_FOUND with the job name in the message.
  absl::StatusOr<std::vector<v1::JobSummary>> ListJobs() const;
  absl::StatusOr<std::vector<v1::RankSummary>> ListRanks(absl::string_view job_id) const;
  // Every stream of the job with its rollup rows on `axis` (step or time-bucket order), its
  // identity and string table; bucket_ns in the response is the job's bucket width.
  // With `selection`, only its ranks, and RESOURCE_EXHAUSTED once the rows would exceed its
  // max_bytes; with selection.partial, the ranks before the one that would exceed it and
  // next_rank set to that one (still RESOURCE_EXHAUSTED when it is the first).
  absl::StatusOr<v1::GetRollupsResponse> Rollups(absl::string_view job_id, RollupAxis axis,
                                                 const RollupSelection& selection = {}) const;
  // The same rows without holding them: for each stream of the job, `on_rank` gets its rank,
  // attempt, identity and string table (no steps), then `on_row` gets its rows in key order,
  // parsed into one message that is reused from row to row (a 1024-rank job has 200 k rows:
  // building them all as messages first cost more than anything done with them). `bucket_ns`
  // receives the job's bucket width. A callback's error stops the scan and is returned.
  // With RollupDetail::kScalars the rows have no by_tag / by_source / by_phase and the string
  // tables are left out; they come from the series family (rollup_series.h), a fraction of the
  // bytes, for every stream that has one. `only_ranks` (stored rank numbers), when not empty,
  // and `from_rank` leave the other ranks unread. Streams come in (rank, attempt) order. A
  // rank's subprocesses (RankIdentity.subprocess_of_rank) only with `with_subprocesses` or
  // when `only_ranks` names them: they are no ranks of their own, and the analyses compare ranks.
  absl::Status VisitRollups(absl::string_view job_id, RollupAxis axis, RollupDetail detail,
                            int64_t* bucket_ns,
                            const std::function<absl::Status(const v1::RankRollups&)>& on_rank,
                            const std::function<void(const v1::StepRollup&)>& on_row,
                            const std::vector<uint32_t>& only_ranks = {}, uint32_t from_rank = 0,
                            bool with_subprocesses = false) const;
  // Up to `limit` stored events of one stream with seq >= from_seq, in order.
  absl::StatusOr<StoredEvents> ReadEvents(absl::string_view job_id, uint32_t rank, uint32_t attempt,
                                          uint64_t from_seq, uint32_t limit) const;
  // The live set of (job, rank, attempt) at `point`; attempt unset = the rank's latest attempt.
  absl::StatusOr<LiveSnapshot> LiveAllocations(absl::string_view job_id, uint32_t rank,
                                               std::optional<uint32_t> attempt,
                                               const LivePoint& point) const;

  const EventStoreOptions& options() const { return options_; }

 private:
  struct Stream;
  EventStore(EventStoreOptions options, std::unique_ptr<rocksdb::DB> db,
             std::vector<rocksdb::ColumnFamilyHandle*> handles);

  absl::Status LoadJobs();
  absl::StatusOr<uint32_t> ResolveRank(const JobRecord& job, const v1::RankIdentity& identity,
                                       bool* synthetic) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<JobRecord> FindJob(absl::string_view job_id) const;
  absl::Status LoadStream(Stream* stream) const;
  // Drops the stream's in-memory state (live set, rollups, series segment), to be rebuilt from
  // disk on next use: after a failed write the disk is the truth. Requires the stream's lock.
  static void ForgetState(Stream* stream);
  // The stream's state from its checkpoint at `checkpoint_seq` (none: 0) through its events up
  // to `target`: those before the first event past it. Errors name the stream by `job_id`.
  absl::StatusOr<RankState> Replay(const rocksdb::Snapshot* snapshot, const StreamKey& key,
                                   absl::string_view job_id, int64_t bucket_ns,
                                   uint64_t checkpoint_seq, const DecodeCutoff& target) const;
  absl::StatusOr<std::vector<StringDef>> ReadStrings(const rocksdb::Snapshot* snapshot,
                                                     const StreamKey& key) const;
  absl::StatusOr<std::vector<StreamRecord>> ReadStreamRecords(const rocksdb::Snapshot* snapshot,
                                                              uint32_t job_no) const;
  // The records whose meta key starts with `prefix` (StreamMetaPrefix).
  absl::StatusOr<std::vector<StreamRecord>> ReadStreamRecords(const rocksdb::Snapshot* snapshot,
                                                              absl::string_view prefix) const;
  // The stream `key` names if a connection has it open, else nullptr.
  std::shared_ptr<Stream> FindOpenStream(const StreamKey& key) const;
  // FAILED_PRECONDITION naming the stream by its job's id.
  absl::Status NotOpenError(const StreamKey& key) const;

  // The parts of one Append's write batch. Each requires the stream's lock.
  void PutStrings(const StreamKey& key, const std::vector<StringDef>& strings,
                  rocksdb::WriteBatch* batch) const;
  // Applies `events` to the stream's state and puts what they change: their block, the rollup
  // rows they closed (and series segments), the open rows. `whole_batch_bytes`: the EventBatch
  // bytes when `events` are all of it, else empty. On an error the caller must ForgetState.
  absl::Status PutEvents(Stream* stream, absl::Span<const Event> events,
                         absl::string_view whole_batch_bytes, rocksdb::WriteBatch* batch) const;
  // The block records the clock estimate and time horizon the events were applied with.
  void PutBlock(Stream* stream, absl::Span<const Event> events, absl::string_view whole_batch_bytes,
                const ClockEstimate* clock, int64_t time_horizon_ns,
                rocksdb::WriteBatch* batch) const;
  absl::Status PutRollups(Stream* stream, const ClosedRollups& closed,
                          rocksdb::WriteBatch* batch) const;
  // The stream's summary after `events` (just applied) and the agent's latest counters.
  void UpdateSummary(Stream* stream, absl::Span<const Event> events,
                     const AgentCounterValues& counters) const;
  // Whether enough steps or events passed since the last checkpoint (EventStoreOptions).
  bool CheckpointDue(const Stream& stream) const;
  void AddCheckpoint(Stream* stream, rocksdb::WriteBatch* batch) const;
  // The scalar rows of one stream that has a series: its closed rows from the series family
  // and its open row from the rollups family, in key order.
  absl::Status VisitSeries(rocksdb::Iterator* series, const StreamRecord& record,
                           const StreamKey& key, RollupAxis axis, v1::StepRollup* row,
                           const std::function<void(const v1::StepRollup&)>& on_row) const;
  // Puts closed `rows` of `axis` (in closing order) into the stream's series segments. It
  // changes the stream's current segment before the write: on an error, here or in the write,
  // the caller must ForgetState.
  absl::Status AddToSeries(Stream* stream, RollupAxis axis,
                           const google::protobuf::RepeatedPtrField<v1::StepRollup>& rows,
                           rocksdb::WriteBatch* batch) const;
  absl::Status Write(rocksdb::WriteBatch* batch) const;
  void ReleaseConnection(const StreamKey& key);

  const EventStoreOptions options_;
  std::unique_ptr<rocksdb::DB> db_;
  // One per family of kFamilyNames (default, meta, blocks, rollups, checkpoints, series; owned,
  // released before db_ closes).
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;

  // The first write that failed with an I/O error (a full or failing disk): every later write
  // is refused with it instead of reaching RocksDB, whose write-ahead log writer is unusable
  // after an error (Debian's librocksdb, built with assertions, aborted the collector on the
  // next write). Reads go on; a restart, once the disk is fixed, takes writes again.
  mutable std::atomic<bool> write_failed_{false};
  mutable absl::Mutex write_error_mu_;
  mutable absl::Status write_error_ ABSL_GUARDED_BY(write_error_mu_);
  std::function<void()> on_writes_stopped_ ABSL_GUARDED_BY(write_error_mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<JobRecord>> jobs_ ABSL_GUARDED_BY(mu_);
  uint32_t next_job_no_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<StreamKey, std::shared_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  std::function<void()> close_hook_ ABSL_GUARDED_BY(mu_);  // RunInNextCloseForTest
};

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_STORE_EVENT_STORE_H_
