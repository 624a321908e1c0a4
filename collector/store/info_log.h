// RocksDB's info log (LOG in the store's directory), written through stdio instead of RocksDB's
// own file writer. On a full disk that writer, once one of its writes failed, asserts on the next
// one in Debian's librocksdb (built with assertions): RocksDB's recovery thread logging "cannot
// clear error" then aborted the collector, queries and all. Lines that cannot be written are
// dropped; the store's data goes through the write-ahead log as before.
#ifndef MEMTRACE_COLLECTOR_STORE_INFO_LOG_H_
#define MEMTRACE_COLLECTOR_STORE_INFO_LOG_H_

#include <cstdint>
#include <memory>
#include <string>

#include "rocksdb/env.h"

namespace memtrace::collector {

// A logger appending to `dir`/LOG (created if missing) at `level` and above; one that drops the
// lines it cannot write, trying to open the file again at the next (with none, RocksDB would
// open its own, the one that asserts). Never nullptr. Thread-safe, as RocksDB requires. Once LOG
// holds `max_bytes` it is renamed LOG.old (replacing the one before) and a new LOG begun: RocksDB's
// info lines (its stats every 10 minutes) add about 1-2 MB a day, which a collector left running
// would keep forever.
inline constexpr uint64_t kInfoLogMaxBytes = 64ull << 20;
std::shared_ptr<rocksdb::Logger> OpenInfoLog(const std::string& dir, rocksdb::InfoLogLevel level,
                                             uint64_t max_bytes = kInfoLogMaxBytes);

// The first line such a logger took about records RocksDB dropped while recovering a damaged
// write-ahead log ("... dropping 32768 bytes; Corruption: checksum mismatch"), or "" when none
// (or `log` is not one of OpenInfoLog's). RocksDB opens such a store without an error: this line
// is the only sign that acknowledged events after the damage are gone.
std::string FirstDroppedRecordsLine(const rocksdb::Logger& log);

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_STORE_INFO_LOG_H_
