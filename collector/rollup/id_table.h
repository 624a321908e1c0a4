// A map from small integer ids to values, for the per-group counters RankState touches on every
// allocation and free (by tag, by source, by memory kind). Ids are string-table ids handed out
// from 1 upward and memory kinds below 128, so a vector indexed by id replaces a hash lookup
// per event (the ingest profile's largest RankState cost, docs/PERFORMANCE.md); ids beyond
// kDenseIds (a hostile or enormous string table) go to a tree, so memory stays bounded by the
// ids actually used. An id never touched reads as T{}. Not thread-safe.
#ifndef MEMTRACE_COLLECTOR_ROLLUP_ID_TABLE_H_
#define MEMTRACE_COLLECTOR_ROLLUP_ID_TABLE_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/container/btree_map.h"

namespace memtrace::collector {

template <typename T>
class IdTable {
 public:
  static constexpr uint32_t kDenseIds = 4096;

  // The value of `id`, default-constructed on first use.
  T& operator[](uint32_t id) {
    if (ABSL_PREDICT_TRUE(id < dense_.size())) return dense_[id];
    return Insert(id);
  }

  // Calls fn(id, value) for every id that was ever used (and possibly some unused ones, whose
  // value is T{}), in ascending id order.
  template <typename Fn>
  void ForEachAscending(Fn fn) const {
    for (size_t id = 0; id < dense_.size(); ++id) fn(static_cast<uint32_t>(id), dense_[id]);
    for (const auto& [id, value] : sparse_) fn(id, value);
  }

 private:
  ABSL_ATTRIBUTE_NOINLINE T& Insert(uint32_t id) {
    if (id < kDenseIds) {
      dense_.resize(std::max<size_t>(id + 1, std::min<size_t>(dense_.size() * 2, kDenseIds)));
      return dense_[id];
    }
    return sparse_[id];
  }

  std::vector<T> dense_;
  // Ordered: every rollup row walks it in id order, and sorting it each time cost more than a
  // lookup in a tree here does (ids this high are rare: ingest checks them against the
  // stream's string-table limit, security/ingest_limits.h).
  absl::btree_map<uint32_t, T> sparse_;
};

}  // namespace memtrace::collector

#endif  // MEMTRACE_COLLECTOR_ROLLUP_ID_TABLE_H_
