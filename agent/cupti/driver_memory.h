// Device memory figures from the CUDA driver, resolved at run time with dlsym from the libcuda
// the process has already loaded (the agent never links libcuda, and never loads it itself).
//
// cuMemGetInfo needs a current context on the calling (sampler) thread. It uses the primary
// context of each device the application has made active (PyTorch and the CUDA runtime use
// primary contexts), retained for the duration of one reading so it cannot be destroyed under
// the reading, and never created by us. Contexts are deliberately not collected from CUPTI
// resource callbacks: a context-creation callback runs inside the driver, and waiting there for
// a sampler that is itself inside the driver could deadlock.
#ifndef MEMTRACE_AGENT_CUPTI_DRIVER_MEMORY_H_
#define MEMTRACE_AGENT_CUPTI_DRIVER_MEMORY_H_

#include <cuda.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/cupti/sampler.h"

namespace memtrace {
namespace cupti {

class DriverMemorySource : public DeviceMemorySource {
 public:
  // UNAVAILABLE when libcuda.so.1 is not loaded in this process or lacks a needed symbol.
  static absl::StatusOr<std::unique_ptr<DriverMemorySource>> Open();
  ~DriverMemorySource() override;

  std::vector<DeviceMemory> Read() override;

 private:
  struct Api;
  explicit DriverMemorySource(std::unique_ptr<Api> api);
  bool ReadCurrent(DeviceMemory* out);

  std::unique_ptr<Api> api_;
};

}  // namespace cupti
}  // namespace memtrace

#endif  // MEMTRACE_AGENT_CUPTI_DRIVER_MEMORY_H_
