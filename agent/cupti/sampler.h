// Periodic samples of the memory a process holds: device used/total for every device the
// process has a context on (EVENT_KIND_DEVICE_SAMPLE, bytes = used, aux = total) and the
// process's host resident set size (EVENT_KIND_HOST_SAMPLE, bytes = RSS), because an "OOM" in a
// Ray job can be host RAM.
#ifndef MEMTRACE_AGENT_CUPTI_SAMPLER_H_
#define MEMTRACE_AGENT_CUPTI_SAMPLER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/cupti/clock.h"
#include "agent/stream/event_sink.h"

namespace memtrace {
namespace cupti {

// Resident set size from the contents of /proc/<pid>/statm ("size resident shared ...", in
// pages). INVALID_ARGUMENT when the text is not in that form.
absl::StatusOr<uint64_t> ParseStatmRssBytes(std::string_view statm, uint64_t page_size);

// Reads `path` (default the calling process's statm) and parses it.
absl::StatusOr<uint64_t> ReadHostRssBytes(const std::string& path = "/proc/self/statm");

struct DeviceMemory {
  uint32_t device = 0;
  uint64_t free = 0;
  uint64_t total = 0;
};

// Where device memory figures come from (the CUDA driver in the agent, a fixed list in tests).
class DeviceMemorySource {
 public:
  virtual ~DeviceMemorySource() = default;
  // One entry per device that could be read now; empty when none. Called from the sampler
  // thread only.
  virtual std::vector<DeviceMemory> Read() = 0;
};

struct SamplerOptions {
  absl::Duration period = absl::Milliseconds(100);
  std::string statm_path = "/proc/self/statm";
};

class Sampler {
 public:
  // `sink` and `devices` (null: host samples only) must outlive the sampler.
  Sampler(EventSink* sink, DeviceMemorySource* devices, SamplerOptions options, Clock clock);
  ~Sampler();  // Stop()

  // Starts the sampling thread (first sample immediately). Idempotent.
  void Start();
  // Stops and joins the thread; returns within one sample. Idempotent.
  void Stop();

  // Takes one round of samples on the calling thread.
  void SampleOnce();

  uint64_t rounds() const { return rounds_.load(); }
  uint64_t host_read_errors() const { return host_errors_.load(); }

 private:
  void Run();

  EventSink* sink_;
  DeviceMemorySource* devices_;
  const SamplerOptions options_;
  const Clock clock_;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
  std::atomic<uint64_t> rounds_{0};
  std::atomic<uint64_t> host_errors_{0};
};

}  // namespace cupti
}  // namespace memtrace

#endif  // MEMTRACE_AGENT_CUPTI_SAMPLER_H_
