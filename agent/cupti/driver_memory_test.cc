#include "agent/cupti/driver_memory.h"

#include <dlfcn.h>

#include "gtest/gtest.h"

namespace memtrace {
namespace cupti {
namespace {

// This machine has no GPU and the test never loads libcuda: the source must say so cleanly
// instead of loading a driver itself.
TEST(DriverMemorySourceTest, UnavailableWhenNoDriverIsLoaded) {
  ASSERT_EQ(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), nullptr)
      << "this test expects a process without libcuda";
  auto source = DriverMemorySource::Open();
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(source.status().message().find("libcuda.so.1"), std::string::npos);
  EXPECT_EQ(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), nullptr);  // still not loaded
}

}  // namespace
}  // namespace cupti
}  // namespace memtrace
