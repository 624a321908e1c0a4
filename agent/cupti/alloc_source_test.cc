#include "agent/cupti/alloc_source.h"

#include <dlfcn.h>

#include <string>
#include <vector>

#include "agent/cupti/testing/recording_sink.h"
#include "gtest/gtest.h"

namespace memtrace {
namespace cupti {
namespace {

Frame F(std::string object, std::string symbol = "", uintptr_t offset = 0) {
  Frame f;
  f.pc = 0x1000;
  f.object = std::move(object);
  f.symbol = std::move(symbol);
  f.offset = offset;
  return f;
}

TEST(FrameFilterTest, SkipsCudaLibrariesAndTheAgent) {
  std::vector<Frame> frames = {
      F("/opt/agent/libmemtrace_agent.so"),
      F("/usr/local/cuda/lib64/libcupti.so.13"),
      F("/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
      F("/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13"),
      F("/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so"),
      F("/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so"),
  };
  int owner = FirstOwnerFrame(frames, DefaultSkipPrefixes());
  ASSERT_EQ(owner, 4);
  EXPECT_EQ(Basename(frames[owner].object), "libc10_cuda.so");
}

TEST(FrameFilterTest, UnknownFramesCannotBeOwners) {
  std::vector<Frame> frames = {F(""), F("/usr/lib/libcuda.so.1"), F("/x/libnccl.so.2")};
  EXPECT_EQ(FirstOwnerFrame(frames, DefaultSkipPrefixes()), 2);
}

TEST(FrameFilterTest, AllSkippedMeansNoOwner) {
  std::vector<Frame> frames = {F("/usr/lib/libcuda.so.1"), F("/usr/lib/libcudart.so.13")};
  EXPECT_EQ(FirstOwnerFrame(frames, DefaultSkipPrefixes()), -1);
  EXPECT_EQ(FirstOwnerFrame({}, DefaultSkipPrefixes()), -1);
}

TEST(FrameFilterTest, ExtraPrefixesSkipMore) {
  std::vector<Frame> frames = {F("/t/libc10_cuda.so"), F("/t/libtorch_cuda.so")};
  std::vector<std::string> skip = DefaultSkipPrefixes();
  skip.push_back("libc10_cuda");
  EXPECT_EQ(FirstOwnerFrame(frames, skip), 1);
}

TEST(FormatStackTest, FormatsFromOwnerAndRespectsTheByteBound) {
  std::vector<Frame> frames = {F("/usr/lib/libcuda.so.1", "cuMemAlloc_v2", 0x10),
                               F("/t/libc10_cuda.so", "alloc", 0x1f),
                               F("/t/libtorch_cuda.so", "", 0x2a0)};
  EXPECT_EQ(FormatStack(frames, 1, 4000), "libc10_cuda.so!alloc+0x1f <- libtorch_cuda.so+0x2a0");
  EXPECT_EQ(FormatStack(frames, 1, 30), "libc10_cuda.so!alloc+0x1f");
  EXPECT_EQ(FormatStack(frames, -1, 4000), "");
}

// Real backtrace + dladdr: this code is linked into the test program, so with nothing skipped
// the owner is the test program itself.
TEST(AllocSourceResolverTest, RealBacktraceNamesTheCallingObject) {
  RecordingSink sink;
  AllocSourceOptions options;
  options.skip_prefixes = {};
  AllocSourceResolver resolver(&sink, options);
  uint32_t id = resolver.ResolveCaller();
  ASSERT_NE(id, 0u);
  EXPECT_EQ(sink.Name(id), "alloc_source_test");
  EXPECT_EQ(resolver.ResolveCaller(), id);  // cached, same id
}

TEST(AllocSourceResolverTest, SkippingTheProgramNamesTheNextObjectOnTheStack) {
  RecordingSink sink;
  AllocSourceOptions options;
  options.skip_prefixes = {"alloc_source_test"};
  AllocSourceResolver resolver(&sink, options);
  uint32_t id = resolver.ResolveCaller();
  ASSERT_NE(id, 0u);
  std::string name = sink.Name(id);
  EXPECT_NE(name, "alloc_source_test");
  // gtest (if linked dynamically) or libc's __libc_start_main is further down the stack.
  EXPECT_NE(name.find(".so"), std::string::npos) << name;
}

TEST(AllocSourceResolverTest, ResolvesPcsOfALoadedLibrary) {
  RecordingSink sink;
  AllocSourceResolver resolver(&sink, AllocSourceOptions());
  // The pc of a libc function stands for a frame inside libc.
  void* handle = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr);
  auto pc = reinterpret_cast<uintptr_t>(dlsym(handle, "malloc")) + 8;
  uint32_t id = resolver.ResolvePcs({pc});
  EXPECT_EQ(sink.Name(id), "libc.so.6");
  dlclose(handle);
}

TEST(AllocSourceResolverTest, FullStacksInternTheWholeStack) {
  RecordingSink sink;
  AllocSourceOptions options;
  options.skip_prefixes = {};
  options.full_stacks = true;
  AllocSourceResolver resolver(&sink, options);
  uint32_t id = resolver.ResolveCaller();
  std::string stack = sink.Name(id);
  EXPECT_EQ(stack.rfind("alloc_source_test", 0), 0u) << stack;
  EXPECT_NE(stack.find(" <- "), std::string::npos) << stack;
  EXPECT_LE(stack.size(), 4000u);
}

}  // namespace
}  // namespace cupti
}  // namespace memtrace
