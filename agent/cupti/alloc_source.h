// Names the owner of a driver allocation: the shared object of the first stack frame outside
// the CUDA libraries and the agent (libc10_cuda.so for PyTorch's caching allocator, libnccl.so.2,
// a cuBLAS workspace, vLLM's cumem allocator, a user extension, ...), interned as a
// StringKind::kSource. With full stacks on, the source string is the whole stack from the owner
// frame outwards instead ("libc10_cuda.so!sym+0x1f <- libtorch_cuda.so+0x2a0 <- ..."), which
// names the allocation site at the cost of one string per distinct stack.
#ifndef MEMTRACE_AGENT_CUPTI_ALLOC_SOURCE_H_
#define MEMTRACE_AGENT_CUPTI_ALLOC_SOURCE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "agent/stream/event_sink.h"

namespace memtrace {
namespace cupti {

// One resolved stack frame.
struct Frame {
  uintptr_t pc = 0;
  std::string object;    // path of the containing shared object ("" when unknown)
  std::string symbol;    // nearest exported symbol ("" when none)
  uintptr_t offset = 0;  // pc - symbol address, or pc - object base without a symbol
};

// The part of an object's path after the last '/'.
std::string_view Basename(std::string_view path);

// Index of the first frame whose object's basename starts with none of `skip_prefixes`, or -1
// when every frame is skipped. A frame with an unknown object is skipped too (it cannot name an
// owner). Pure.
int FirstOwnerFrame(const std::vector<Frame>& frames,
                    const std::vector<std::string>& skip_prefixes);

// "libfoo.so!sym+0x1f <- libbar.so+0x2a0 <- ..." for frames[first..], at most `max_bytes` long
// (cut at a frame boundary). Pure.
std::string FormatStack(const std::vector<Frame>& frames, int first, size_t max_bytes);

// The default skip list: libcuda, libcudart, libcupti, the agent.
std::vector<std::string> DefaultSkipPrefixes();

struct AllocSourceOptions {
  std::vector<std::string> skip_prefixes = DefaultSkipPrefixes();
  int max_frames = 32;
  bool full_stacks = false;
  // Bounded by the batch codec's max_string_bytes (4096).
  size_t max_stack_bytes = 4000;
};

// Resolves the caller of the current allocation call: a bounded backtrace() plus dladdr() per
// frame, with a cache from pc to resolved frame so a hot allocation site costs one backtrace
// and a few hash lookups.
class AllocSourceResolver {
 public:
  // `sink` (for interning) must outlive the resolver. The path of the shared object holding
  // this code is added to the skip list, whatever it is called.
  AllocSourceResolver(EventSink* sink, AllocSourceOptions options);

  // The source id for the calling thread's current stack, 0 when no frame names an owner.
  // Thread-safe; takes a short internal lock for the cache.
  uint32_t ResolveCaller();

  // Resolves explicit pcs (what ResolveCaller does after backtrace()); exposed for tests.
  uint32_t ResolvePcs(const std::vector<uintptr_t>& pcs);

 private:
  Frame Resolve(uintptr_t pc) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  EventSink* sink_;
  AllocSourceOptions options_;
  absl::Mutex mu_;
  absl::flat_hash_map<uintptr_t, Frame> frame_cache_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint32_t> id_cache_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cupti
}  // namespace memtrace

#endif  // MEMTRACE_AGENT_CUPTI_ALLOC_SOURCE_H_
