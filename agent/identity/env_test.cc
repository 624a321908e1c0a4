#include "agent/identity/env.h"

#include <cstdlib>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace memtrace {
namespace {

TEST(MapEnvironmentTest, ReturnsSetValuesAndNulloptForMissing) {
  EnvLookup env = MapEnvironment({{"A", "1"}, {"EMPTY", ""}});
  EXPECT_EQ(env("A"), "1");
  EXPECT_EQ(env("EMPTY"), "");
  EXPECT_EQ(env("B"), std::nullopt);
}

TEST(ProcessEnvironmentTest, ReadsTheRealEnvironment) {
  ASSERT_EQ(setenv("MEMTRACE_ENV_TEST_VAR", "xyz", 1), 0);
  EnvLookup env = ProcessEnvironment();
  EXPECT_EQ(env("MEMTRACE_ENV_TEST_VAR"), "xyz");
  unsetenv("MEMTRACE_ENV_TEST_VAR");
  EXPECT_EQ(env("MEMTRACE_ENV_TEST_VAR"), std::nullopt);
}

TEST(EnvNonEmptyTest, TreatsEmptyAsUnset) {
  EnvLookup env = MapEnvironment({{"A", "v"}, {"EMPTY", ""}});
  EXPECT_EQ(EnvNonEmpty(env, "A"), "v");
  EXPECT_EQ(EnvNonEmpty(env, "EMPTY"), std::nullopt);
  EXPECT_EQ(EnvNonEmpty(env, "MISSING"), std::nullopt);
}

TEST(EnvIntegerTest, ParsesIntegersWithinRange) {
  EnvLookup env = MapEnvironment({{"N", " 42 "}, {"EMPTY", ""}});
  absl::StatusOr<std::optional<int64_t>> n = EnvInteger(env, "N", 0, 100);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 42);
  absl::StatusOr<std::optional<int64_t>> empty = EnvInteger(env, "EMPTY", 0, 100);
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->has_value());
}

TEST(EnvIntegerTest, RejectsGarbageAndOutOfRangeNamingVariableAndValue) {
  EnvLookup env = MapEnvironment({{"N", "12abc"}, {"BIG", "101"}});
  absl::StatusOr<std::optional<int64_t>> n = EnvInteger(env, "N", 0, 100);
  ASSERT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(n.status().message().find("N='12abc'"), std::string::npos) << n.status();
  absl::StatusOr<std::optional<int64_t>> big = EnvInteger(env, "BIG", 0, 100);
  ASSERT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(big.status().message().find("BIG='101'"), std::string::npos) << big.status();
  EXPECT_NE(big.status().message().find("0..100"), std::string::npos) << big.status();
}

}  // namespace
}  // namespace memtrace
