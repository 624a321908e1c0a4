#include "tools/bench/store_footprint.h"

#include <cstdlib>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "rocksdb/db.h"

namespace memtrace::bench {
namespace {

// A store shaped like the collector's: a default and a compressible "blocks" family.
std::string MakeStore(const std::string& name) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  rocksdb::DBOptions o;
  o.create_if_missing = true;
  o.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
      {"default", rocksdb::ColumnFamilyOptions()}, {"blocks", rocksdb::ColumnFamilyOptions()}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  EXPECT_TRUE(rocksdb::DB::Open(o, dir, cfs, &handles, &db).ok());
  // Repetitive values: compressible, as event blocks are.
  for (int i = 0; i < 2000; ++i) {
    char key[16];
    snprintf(key, sizeof key, "k%08d", i);
    EXPECT_TRUE(db->Put(rocksdb::WriteOptions(), handles[1], key, std::string(1000, 'a' + i % 3))
                    .ok());
  }
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  std::unique_ptr<rocksdb::DB>(db).reset();  // RocksDB hands out a raw pointer
  return dir;
}

TEST(StoreFootprintTest, CompactedFamiliesReportFilesEntriesAndRawBytes) {
  const std::string dir = MakeStore("a");
  absl::StatusOr<StoreFootprint> f = MeasureStore(dir);
  ASSERT_TRUE(f.ok()) << f.status();
  FamilyFootprint blocks = f->Family("blocks");
  EXPECT_EQ(blocks.entries, 2000u);
  EXPECT_EQ(blocks.raw_value_bytes, 2000u * 1000);
  EXPECT_GE(blocks.files, 1u);
  EXPECT_GT(blocks.sst_bytes, 0u);
  EXPECT_LT(blocks.sst_bytes, blocks.raw_value_bytes / 4);  // LZ4 on repetitive values
  EXPECT_EQ(f->Family("missing").sst_bytes, 0u);
  EXPECT_GE(f->sst_bytes, blocks.sst_bytes);
}

TEST(StoreFootprintTest, RecompressionOfACopyLeavesTheOriginalAlone) {
  const std::string dir = MakeStore("b");
  ASSERT_TRUE(CopyDirectory(dir, dir + "-none").ok());
  FootprintOptions none;
  none.codec = Codec::kNone;
  absl::StatusOr<StoreFootprint> raw = MeasureStore(dir + "-none", none);
  absl::StatusOr<StoreFootprint> lz4 = MeasureStore(dir);
  ASSERT_TRUE(raw.ok() && lz4.ok());
  EXPECT_GT(raw->Family("blocks").sst_bytes, 2000u * 1000);
  EXPECT_LT(lz4->Family("blocks").sst_bytes, raw->Family("blocks").sst_bytes);
}

TEST(StoreFootprintTest, MissingDirectoryIsAnError) {
  EXPECT_FALSE(MeasureStore(std::string(getenv("TEST_TMPDIR")) + "/nothing-here").ok());
}

}  // namespace
}  // namespace memtrace::bench
