#include "tools/bench/store_footprint.h"

#include <filesystem>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "collector/store/block_value.h"
#include "rocksdb/iterator.h"
#include "rocksdb/db.h"
#include "rocksdb/metadata.h"
#include "rocksdb/options.h"
#include "rocksdb/table_properties.h"
#include "rocksdb/utilities/options_util.h"

namespace memtrace::bench {
namespace {

absl::Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", s.ToString()));
}

rocksdb::CompressionType CompressionOf(Codec codec) {
  switch (codec) {
    case Codec::kZstd:
      return rocksdb::kZSTD;
    case Codec::kNone:
      return rocksdb::kNoCompression;
    case Codec::kAsCollector:
    case Codec::kLz4:
      return rocksdb::kLZ4Compression;
  }
  return rocksdb::kLZ4Compression;
}

// The families a what-if codec recompresses: the blocks (over the store's own LZ4 of each
// value), the rollups and the checkpoints, the bulk of a data directory.
bool Recompressed(const std::string& family) {
  return family == "blocks" || family == "rollups" || family == "checkpoints";
}

}  // namespace

FamilyFootprint StoreFootprint::Family(const std::string& name) const {
  for (const FamilyFootprint& f : families) {
    if (f.name == name) return f;
  }
  FamilyFootprint none;
  none.name = name;
  return none;
}

absl::StatusOr<StoreFootprint> MeasureStore(const std::string& dir,
                                            const FootprintOptions& options) {
  // Start from the options the collector wrote into the directory: RocksDB's defaults differ
  // (Snappy on every family), and measuring with them once recompressed the blocks with Snappy.
  rocksdb::DBOptions db_options;
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  rocksdb::ConfigOptions config;
  if (absl::Status s =
          FromRocks(rocksdb::LoadLatestOptions(config, dir, &db_options, &families),
                    absl::StrCat("reading the options file of ", dir));
      !s.ok()) {
    return s;
  }
  for (rocksdb::ColumnFamilyDescriptor& f : families) {
    if (options.codec == Codec::kAsCollector || !Recompressed(f.name)) continue;
    rocksdb::ColumnFamilyOptions& cf = f.options;
    cf.compression = CompressionOf(options.codec);
    cf.bottommost_compression = cf.compression;
    if (options.codec == Codec::kZstd) {
      cf.compression_opts.level = options.zstd_level;
      cf.bottommost_compression_opts.level = options.zstd_level;
      cf.bottommost_compression_opts.enabled = true;
    }
  }
  db_options.max_background_jobs = 2;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  if (absl::Status s = FromRocks(rocksdb::DB::Open(db_options, dir, families, &handles, &raw),
                                 absl::StrCat("opening ", dir));
      !s.ok()) {
    return s;
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  absl::Status status;
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    if (!status.ok()) break;
    status = FromRocks(db->Flush(rocksdb::FlushOptions(), h), "flushing " + h->GetName());
    if (status.ok() && options.compact) {
      rocksdb::CompactRangeOptions cro;
      cro.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
      status = FromRocks(db->CompactRange(cro, h, nullptr, nullptr),
                         "compacting " + h->GetName());
    }
  }
  StoreFootprint out;
  if (status.ok()) {
    std::vector<rocksdb::LiveFileMetaData> files;
    db->GetLiveFilesMetaData(&files);
    for (rocksdb::ColumnFamilyHandle* h : handles) {
      FamilyFootprint f;
      f.name = h->GetName();
      for (const rocksdb::LiveFileMetaData& m : files) {
        if (m.column_family_name != f.name) continue;
        ++f.files;
        f.sst_bytes += m.size;
      }
      rocksdb::TablePropertiesCollection props;
      if (db->GetPropertiesOfAllTables(h, &props).ok()) {
        for (const auto& [file, p] : props) {
          f.entries += p->num_entries;
          f.raw_key_bytes += p->raw_key_size;
          f.raw_value_bytes += p->raw_value_size;
        }
      }
      f.decompressed_value_bytes = f.raw_value_bytes;
      if (f.name == "blocks") {
        f.decompressed_value_bytes = 0;
        std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), h));
        std::string scratch;
        for (it->SeekToFirst(); it->Valid(); it->Next()) {
          absl::StatusOr<absl::string_view> bytes = collector::BlockBatchBytes(
              absl::string_view(it->value().data(), it->value().size()), &scratch);
          if (bytes.ok()) f.decompressed_value_bytes += bytes->size();
        }
      }
      out.sst_bytes += f.sst_bytes;
      out.families.push_back(f);
    }
  }
  for (rocksdb::ColumnFamilyHandle* h : handles) db->DestroyColumnFamilyHandle(h);
  if (absl::Status s = FromRocks(db->Close(), "closing " + dir); status.ok()) status = s;
  if (!status.ok()) return status;
  return out;
}

absl::Status CopyDirectory(const std::string& from, const std::string& to) {
  std::error_code ec;
  std::filesystem::remove_all(to, ec);
  std::filesystem::copy(from, to, std::filesystem::copy_options::recursive, ec);
  if (ec) return absl::InternalError(absl::StrCat("copying ", from, " to ", to, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace memtrace::bench
