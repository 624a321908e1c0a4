#include "tools/bench/store_footprint.h"

#include <cstdlib>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "tests/util/test_dirs.h"

namespace memtrace::bench {
namespace {

// A store shaped like the collector's: a default and a compressible "blocks" family, whose
// compression is `blocks_compression` (the collector's: none).
std::string MakeStore(const std::string& name,
                      rocksdb::CompressionType blocks_compression = rocksdb::kNoCompression) {
  const std::string dir = test_util::TmpPath(name);
  rocksdb::DBOptions o;
  o.create_if_missing = true;
  o.create_missing_column_families = true;
  rocksdb::ColumnFamilyOptions blocks;
  blocks.compression = blocks_compression;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {{"default", rocksdb::ColumnFamilyOptions()},
                                                      {"blocks", blocks}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  EXPECT_TRUE(rocksdb::DB::Open(o, dir, cfs, &handles, &db).ok());
  // Repetitive values: compressible, as event blocks are.
  for (int i = 0; i < 2000; ++i) {
    char key[16];
    snprintf(key, sizeof key, "k%08d", i);
    EXPECT_TRUE(
        db->Put(rocksdb::WriteOptions(), handles[1], key, std::string(1000, 'a' + i % 3)).ok());
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
  EXPECT_EQ(f->Family("missing").sst_bytes, 0u);
  EXPECT_GE(f->sst_bytes, blocks.sst_bytes);
}

// As the collector: the compression its OPTIONS file names, not RocksDB's default (Snappy),
// which once recompressed the blocks family in this measurement.
TEST(StoreFootprintTest, AsCollectorCompactsWithTheDirectorysOwnOptions) {
  absl::StatusOr<StoreFootprint> plain = MeasureStore(MakeStore("plain"));
  absl::StatusOr<StoreFootprint> lz4 = MeasureStore(MakeStore("lz4", rocksdb::kLZ4Compression));
  ASSERT_TRUE(plain.ok() && lz4.ok());
  EXPECT_GT(plain->Family("blocks").sst_bytes, 2000u * 1000);    // left uncompressed
  EXPECT_LT(lz4->Family("blocks").sst_bytes, 2000u * 1000 / 4);  // repetitive values
}

TEST(StoreFootprintTest, RecompressionOfACopyLeavesTheOriginalAlone) {
  const std::string dir = MakeStore("b");
  ASSERT_TRUE(CopyDirectory(dir, dir + "-lz4").ok());
  FootprintOptions lz4;
  lz4.codec = Codec::kLz4;
  absl::StatusOr<StoreFootprint> recompressed = MeasureStore(dir + "-lz4", lz4);
  absl::StatusOr<StoreFootprint> original = MeasureStore(dir);
  ASSERT_TRUE(recompressed.ok() && original.ok());
  EXPECT_LT(recompressed->Family("blocks").sst_bytes, 2000u * 1000 / 4);
  EXPECT_GT(original->Family("blocks").sst_bytes, 2000u * 1000);
}

TEST(StoreFootprintTest, MissingDirectoryIsAnError) {
  EXPECT_FALSE(MeasureStore(test_util::TmpPath("nothing-here")).ok());
}

}  // namespace
}  // namespace memtrace::bench
