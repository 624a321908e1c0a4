#include "agent/cupti/correlation_table.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace memtrace {
namespace cupti {
namespace {

TEST(CorrelationTableTest, FindsWhatWasPut) {
  CorrelationTable t(4);
  t.Put(5, {7, 9, false});
  t.Put(6, {0, 3, true});
  EXPECT_EQ(t.Find(5), (CorrelationInfo{7, 9, false}));
  EXPECT_EQ(t.Find(6), (CorrelationInfo{0, 3, true}));
  EXPECT_FALSE(t.Find(4).has_value());
}

TEST(CorrelationTableTest, IdZeroIsNeverStored) {
  CorrelationTable t(4);
  t.Put(0, {1, 1, false});
  EXPECT_FALSE(t.Find(0).has_value());
}

TEST(CorrelationTableTest, ALaterIdInTheSameSlotEvictsTheEarlierOne) {
  CorrelationTable t(4);  // 16 slots
  t.Put(3, {1, 0, false});
  t.Put(3 + 16, {2, 0, false});
  EXPECT_FALSE(t.Find(3).has_value());
  EXPECT_EQ(t.Find(19)->tag_id, 2u);
}

TEST(CorrelationTableTest, ConcurrentWritersNeverYieldAnotherIdsInfo) {
  CorrelationTable t(6);  // small, so writers collide constantly
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      for (uint32_t i = 1; i < 200000; ++i) {
        uint32_t id = i * 4 + w;
        // Info derived from the id, so a reader can check it belongs to the id it asked for.
        t.Put(id, {id ^ 0x5a5a, id & 0x7fffffff, (id & 1) != 0});
      }
    });
  }
  std::thread reader([&] {
    while (!stop.load()) {
      for (uint32_t id = 1; id < 4096; ++id) {
        if (auto info = t.Find(id)) {
          if (info->tag_id != (id ^ 0x5a5a) || info->vmm != ((id & 1) != 0)) ++wrong;
        }
      }
    }
  });
  for (auto& w : writers) w.join();
  stop = true;
  reader.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace cupti
}  // namespace memtrace
