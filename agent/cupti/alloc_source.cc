#include "agent/cupti/alloc_source.h"

#include <dlfcn.h>
#include <execinfo.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace memtrace {
namespace cupti {
namespace {

// Caches are bounded; past this many entries they are cleared and rebuilt.
constexpr size_t kMaxCachedFrames = 1 << 14;
constexpr size_t kMaxCachedIds = 1 << 12;

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

std::string_view Basename(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

int FirstOwnerFrame(const std::vector<Frame>& frames,
                    const std::vector<std::string>& skip_prefixes) {
  for (size_t i = 0; i < frames.size(); ++i) {
    std::string_view base = Basename(frames[i].object);
    if (base.empty()) continue;
    bool skipped = false;
    for (const std::string& prefix : skip_prefixes) {
      if (StartsWith(base, prefix)) {
        skipped = true;
        break;
      }
    }
    if (!skipped) return static_cast<int>(i);
  }
  return -1;
}

std::string FormatStack(const std::vector<Frame>& frames, int first, size_t max_bytes) {
  std::string out;
  for (size_t i = first < 0 ? frames.size() : static_cast<size_t>(first); i < frames.size(); ++i) {
    const Frame& f = frames[i];
    std::string one = f.symbol.empty()
                          ? absl::StrFormat("%s+0x%x", Basename(f.object), f.offset)
                          : absl::StrFormat("%s!%s+0x%x", Basename(f.object), f.symbol, f.offset);
    if (f.object.empty()) one = absl::StrFormat("0x%x", f.pc);
    const size_t extra = (out.empty() ? 0 : 4) + one.size();
    if (out.size() + extra > max_bytes) break;
    if (!out.empty()) out += " <- ";
    out += one;
  }
  return out;
}

std::vector<std::string> DefaultSkipPrefixes() {
  return {"libcuda.so", "libcudart.so", "libcupti.so", "libmemtrace_agent"};
}

AllocSourceResolver::AllocSourceResolver(EventSink* sink, AllocSourceOptions options)
    : sink_(sink), options_(std::move(options)) {
  Dl_info self;
  if (dladdr(reinterpret_cast<void*>(&Basename), &self) != 0 && self.dli_fname != nullptr) {
    std::string_view base = Basename(self.dli_fname);
    // In a test binary this code is linked into the program itself; skipping the program
    // would hide every owner, so only a shared object is added.
    if (base.find(".so") != std::string_view::npos)
      options_.skip_prefixes.emplace_back(std::string(base));
  }
  // backtrace() loads libgcc_s on its first call; do that now rather than inside the first
  // allocation callback.
  void* warm[2];
  backtrace(warm, 2);
  if (options_.max_frames < 1) options_.max_frames = 1;
  if (options_.max_frames > 256) options_.max_frames = 256;
}

uint32_t AllocSourceResolver::ResolveCaller() {
  void* buf[256];
  const int n = backtrace(buf, options_.max_frames);
  std::vector<uintptr_t> pcs;
  pcs.reserve(n);
  for (int i = 0; i < n; ++i) pcs.push_back(reinterpret_cast<uintptr_t>(buf[i]));
  return ResolvePcs(pcs);
}

Frame AllocSourceResolver::Resolve(uintptr_t pc) {
  auto it = frame_cache_.find(pc);
  if (it != frame_cache_.end()) return it->second;
  Frame f;
  f.pc = pc;
  Dl_info info;
  // A return address points after the call; pc - 1 is inside the calling instruction, which
  // matters when the call is the last instruction of a function.
  if (dladdr(reinterpret_cast<void*>(pc - 1), &info) != 0) {
    if (info.dli_fname != nullptr) f.object = info.dli_fname;
    if (info.dli_sname != nullptr && info.dli_saddr != nullptr) {
      f.symbol = info.dli_sname;
      f.offset = pc - reinterpret_cast<uintptr_t>(info.dli_saddr);
    } else if (info.dli_fbase != nullptr) {
      f.offset = pc - reinterpret_cast<uintptr_t>(info.dli_fbase);
    }
  }
  if (frame_cache_.size() >= kMaxCachedFrames) frame_cache_.clear();
  frame_cache_.emplace(pc, f);
  return f;
}

uint32_t AllocSourceResolver::ResolvePcs(const std::vector<uintptr_t>& pcs) {
  std::string name;
  {
    absl::MutexLock lock(&mu_);
    std::vector<Frame> frames;
    frames.reserve(pcs.size());
    int owner = -1;
    for (uintptr_t pc : pcs) {
      frames.push_back(Resolve(pc));
      if (!options_.full_stacks) {
        // Without full stacks only the owner frame is needed: stop resolving there.
        owner = FirstOwnerFrame({frames.back()}, options_.skip_prefixes);
        if (owner == 0) break;
      }
    }
    owner = FirstOwnerFrame(frames, options_.skip_prefixes);
    if (owner < 0) return 0;
    name = options_.full_stacks ? FormatStack(frames, owner, options_.max_stack_bytes)
                                : std::string(Basename(frames[owner].object));
    auto id = id_cache_.find(name);
    if (id != id_cache_.end()) return id->second;
  }
  // Intern outside mu_: the sink has its own lock.
  const uint32_t id = sink_->Intern(StringKind::kSource, name);
  absl::MutexLock lock(&mu_);
  if (id_cache_.size() >= kMaxCachedIds) id_cache_.clear();
  id_cache_.emplace(std::move(name), id);
  return id;
}

}  // namespace cupti
}  // namespace memtrace
