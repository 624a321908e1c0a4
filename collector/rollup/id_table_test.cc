#include "collector/rollup/id_table.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace memtrace::collector {
namespace {

TEST(IdTableTest, UnusedIdsReadAsDefaultAndValuesStick) {
  IdTable<int> t;
  EXPECT_EQ(t[7], 0);
  t[7] = 3;
  t[0] = 1;
  t[4095] = 9;  // the last dense id
  EXPECT_EQ(t[7], 3);
  EXPECT_EQ(t[0], 1);
  EXPECT_EQ(t[4095], 9);
}

TEST(IdTableTest, HugeIdsGoToTheMapAndIterationIsAscending) {
  IdTable<int> t;
  t[4000000000u] = 5;
  t[70000] = 4;
  t[4096] = 3;
  t[2] = 2;
  std::vector<std::pair<uint32_t, int>> seen;
  t.ForEachAscending([&](uint32_t id, int v) {
    if (v != 0) seen.emplace_back(id, v);
  });
  const std::vector<std::pair<uint32_t, int>> want = {
      {2, 2}, {4096, 3}, {70000, 4}, {4000000000u, 5}};
  EXPECT_EQ(seen, want);
  // Only ids below kDenseIds take vector room: a hostile id does not allocate 4 G entries.
  uint32_t dense_visited = 0;
  t.ForEachAscending([&](uint32_t id, int) { dense_visited += id < 4096; });
  EXPECT_LE(dense_visited, 4096u);
}

}  // namespace
}  // namespace memtrace::collector
