// Device memory figures from the CUDA driver, resolved at run time with dlsym from the libcuda
// the process has already loaded (the agent never links libcuda, and never loads it itself).
//
// cuMemGetInfo needs a current context on the calling (sampler) thread. The agent registers
// the contexts it learns of (CUPTI resource callbacks); without any, the active primary
// context of each device is used, retained only for the duration of one reading.
#ifndef MEMTRACE_AGENT_CUPTI_DRIVER_MEMORY_H_
#define MEMTRACE_AGENT_CUPTI_DRIVER_MEMORY_H_

#include <cuda.h>

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/cupti/sampler.h"

namespace memtrace {
namespace cupti {

class DriverMemorySource : public DeviceMemorySource {
 public:
  // UNAVAILABLE when libcuda.so.1 is not loaded in this process or lacks a needed symbol.
  static absl::StatusOr<std::unique_ptr<DriverMemorySource>> Open();
  ~DriverMemorySource() override;

  // Contexts to read through. Thread-safe; RemoveContext waits for a reading in progress, so
  // after it returns the context is no longer used (call it before the context is destroyed).
  void AddContext(CUcontext context);
  void RemoveContext(CUcontext context);

  std::vector<DeviceMemory> Read() override;

 private:
  struct Api;
  explicit DriverMemorySource(std::unique_ptr<Api> api);
  bool ReadCurrent(DeviceMemory* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::unique_ptr<Api> api_;
  absl::Mutex mu_;
  std::vector<CUcontext> contexts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cupti
}  // namespace memtrace

#endif  // MEMTRACE_AGENT_CUPTI_DRIVER_MEMORY_H_
