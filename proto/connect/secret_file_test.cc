#include "proto/connect/secret_file.h"

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"

namespace memtrace::connect {
namespace {

std::string WriteFile(const std::string& name, const std::string& contents) {
  const std::string path = test_util::TmpPath(name);
  std::ofstream(path, std::ios::trunc) << contents;
  return path;
}

TEST(SecretFileTest, TokenFileLosesItsTrailingNewline) {
  absl::StatusOr<std::string> token = ReadTokenFile(WriteFile("t1", "s3cret-token\n\n"));
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "s3cret-token");
}

TEST(SecretFileTest, MissingTokenFileIsNotFoundNamingThePath) {
  absl::StatusOr<std::string> token = ReadTokenFile("/nonexistent/memtrace-token");
  EXPECT_TRUE(absl::IsNotFound(token.status())) << token.status();
  EXPECT_NE(token.status().message().find("/nonexistent/memtrace-token"), std::string::npos);
}

TEST(SecretFileTest, EmptyOrBlankTokenFileIsRefused) {
  EXPECT_TRUE(absl::IsInvalidArgument(ReadTokenFile(WriteFile("t2", "")).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ReadTokenFile(WriteFile("t3", " \n")).status()));
}

TEST(SecretFileTest, TokenWithSpaceOrControlCharacterIsRefused) {
  EXPECT_TRUE(absl::IsInvalidArgument(ReadTokenFile(WriteFile("t4", "two words")).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckToken("env", "a\tb")));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckToken("env", "caf\xc3\xa9")));
  EXPECT_TRUE(CheckToken("env", "abc-DEF_123+/=").ok());
}

TEST(SecretFileTest, PemFileMustLookLikePem) {
  EXPECT_TRUE(ReadPemFile("cert", WriteFile("p1", "-----BEGIN CERTIFICATE-----\nMII\n")).ok());
  absl::StatusOr<std::string> der = ReadPemFile("cert", WriteFile("p2", "\x30\x82\x01"));
  EXPECT_TRUE(absl::IsInvalidArgument(der.status()));
  EXPECT_NE(der.status().message().find("not PEM"), std::string::npos);
}

TEST(SecretFileTest, HugeFileIsRefusedAsAWrongPath) {
  absl::StatusOr<std::string> big =
      ReadSmallFile("cert", WriteFile("big", std::string(2 << 20, 'x')));
  EXPECT_TRUE(absl::IsInvalidArgument(big.status())) << big.status();
}

}  // namespace
}  // namespace memtrace::connect
