#include "query/importers/compressed_input.h"

#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"

namespace memtrace::importers {
namespace {

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  out << data;
}

std::string Gzip(const std::string& data) {
  std::string path = test_util::TmpPath("gzip_scratch.gz");
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, data.data(), data.size());
  gzclose(f);
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string ReadAll(CompressedInput& input) {
  std::string out;
  while (input.Peek() != '\0') out.push_back(input.Take());
  return out;
}

std::string Sample() {
  std::string s;
  for (int i = 0; i < 5000; ++i) s += "{\"ts\": " + std::to_string(i) + "},\n";
  return s;
}

TEST(CompressedInputTest, ReadsPlainFilesThroughAcrossChunkBoundaries) {
  std::string path = test_util::TmpPath("plain.json");
  WriteFile(path, Sample());
  auto input = CompressedInput::Open(path, /*chunk_bytes=*/100);
  ASSERT_TRUE(input.ok()) << input.status();
  EXPECT_EQ(ReadAll(**input), Sample());
  EXPECT_FALSE((*input)->compressed());
  EXPECT_EQ((*input)->Tell(), Sample().size());
  EXPECT_TRUE((*input)->read_status().ok());
}

TEST(CompressedInputTest, DecompressesGzipRegardlessOfName) {
  std::string path = test_util::TmpPath("compressed.json");  // no .gz suffix on purpose
  WriteFile(path, Gzip(Sample()));
  auto input = CompressedInput::Open(path, 4096);
  ASSERT_TRUE(input.ok()) << input.status();
  EXPECT_EQ(ReadAll(**input), Sample());
  EXPECT_TRUE((*input)->compressed());
  EXPECT_TRUE((*input)->read_status().ok()) << (*input)->read_status();
}

TEST(CompressedInputTest, ReportsProgressInCompressedBytes) {
  std::string path = test_util::TmpPath("progress.json.gz");
  std::string gz = Gzip(Sample());
  WriteFile(path, gz);
  auto input = CompressedInput::Open(path, 1024);
  ASSERT_TRUE(input.ok());
  uint64_t last = 0, total = 0;
  int calls = 0;
  (*input)->set_progress([&](uint64_t done, uint64_t of) {
    EXPECT_GE(done, last);
    last = done;
    total = of;
    ++calls;
  });
  ReadAll(**input);
  EXPECT_GT(calls, 5);
  EXPECT_EQ(total, gz.size());
  EXPECT_EQ(last, gz.size());
}

TEST(CompressedInputTest, TruncatedGzipIsDataLossNamingTheFile) {
  std::string path = test_util::TmpPath("truncated.json.gz");
  std::string gz = Gzip(Sample());
  WriteFile(path, gz.substr(0, gz.size() / 2));
  auto input = CompressedInput::Open(path, 4096);
  ASSERT_TRUE(input.ok());
  std::string data = ReadAll(**input);
  EXPECT_LT(data.size(), Sample().size());
  EXPECT_EQ((*input)->read_status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE((*input)->read_status().message().find(path), std::string::npos)
      << (*input)->read_status();
  EXPECT_NE((*input)->read_status().message().find("truncated"), std::string::npos);
  // Not zlib's made-up name of the descriptor ("<fd:3>: unexpected end of file").
  EXPECT_EQ((*input)->read_status().message().find("<fd:"), std::string::npos)
      << (*input)->read_status();
}

TEST(CompressedInputTest, MissingFileIsNotFoundNamingIt) {
  auto input = CompressedInput::Open(test_util::TmpPath("does_not_exist.json"));
  ASSERT_FALSE(input.ok());
  EXPECT_EQ(input.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(input.status().message().find("does_not_exist.json"), std::string::npos);
  EXPECT_NE(input.status().message().find("No such file"), std::string::npos);
}

TEST(CompressedInputTest, DirectoryIsRefused) {
  auto input = CompressedInput::Open(test_util::TmpDir());
  ASSERT_FALSE(input.ok());
  EXPECT_EQ(input.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(input.status().message().find("directory"), std::string::npos);
}

TEST(CompressedInputTest, EmptyFileEndsAtOnce) {
  std::string path = test_util::TmpPath("empty.json");
  WriteFile(path, "");
  auto input = CompressedInput::Open(path);
  ASSERT_TRUE(input.ok());
  EXPECT_EQ((*input)->Peek(), '\0');
  EXPECT_EQ((*input)->Tell(), 0u);
  EXPECT_TRUE((*input)->read_status().ok());
}

}  // namespace
}  // namespace memtrace::importers
