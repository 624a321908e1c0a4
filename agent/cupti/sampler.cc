#include "agent/cupti/sampler.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace memtrace {
namespace cupti {

absl::StatusOr<uint64_t> ParseStatmRssBytes(std::string_view statm, uint64_t page_size) {
  // Fields: size resident shared text lib data dt; we need the second.
  size_t i = 0;
  auto skip_blanks = [&] {
    while (i < statm.size() && (statm[i] == ' ' || statm[i] == '\t')) ++i;
  };
  auto field = [&]() -> std::string {
    skip_blanks();
    size_t start = i;
    while (i < statm.size() && statm[i] >= '0' && statm[i] <= '9') ++i;
    return std::string(statm.substr(start, i - start));
  };
  std::string size = field();
  std::string resident = field();
  uint64_t pages = 0;
  if (size.empty() || resident.empty() || !absl::SimpleAtoi(resident, &pages)) {
    return absl::InvalidArgumentError(
        absl::StrCat("statm \"", std::string(statm.substr(0, 64)), "\" has no resident field"));
  }
  return pages * page_size;
}

absl::StatusOr<uint64_t> ReadHostRssBytes(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return absl::UnavailableError(absl::StrCat("cannot open ", path));
  char buf[256];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  long page = sysconf(_SC_PAGESIZE);
  return ParseStatmRssBytes(std::string_view(buf, n), page > 0 ? page : 4096);
}

Sampler::Sampler(EventSink* sink, DeviceMemorySource* devices, SamplerOptions options, Clock clock)
    : sink_(sink), devices_(devices), options_(std::move(options)), clock_(std::move(clock)) {}

Sampler::~Sampler() { Stop(); }

void Sampler::Start() {
  absl::MutexLock lock(&mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { Run(); });
}

void Sampler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void Sampler::SampleOnce() {
  const int64_t now = clock_();
  if (devices_ != nullptr) {
    for (const DeviceMemory& d : devices_->Read()) {
      Event e;
      e.kind = EventKind::kDeviceSample;
      e.ts_ns = now;
      e.device = d.device;
      e.bytes = d.total >= d.free ? d.total - d.free : 0;
      e.aux = d.total;
      sink_->Record(e);
    }
  }
  absl::StatusOr<uint64_t> rss = ReadHostRssBytes(options_.statm_path);
  if (rss.ok()) {
    Event e;
    e.kind = EventKind::kHostSample;
    e.ts_ns = now;
    e.bytes = *rss;
    sink_->Record(e);
  } else {
    host_errors_.fetch_add(1, std::memory_order_relaxed);
  }
  rounds_.fetch_add(1, std::memory_order_relaxed);
}

void Sampler::Run() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    mu_.Unlock();
    SampleOnce();
    mu_.Lock();
    // Wakes early when Stop() sets stop_.
    mu_.AwaitWithTimeout(absl::Condition(&stop_), options_.period);
  }
}

}  // namespace cupti
}  // namespace memtrace
