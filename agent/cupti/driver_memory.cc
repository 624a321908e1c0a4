#include "agent/cupti/driver_memory.h"

#include <dlfcn.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace memtrace {
namespace cupti {

struct DriverMemorySource::Api {
  void* handle = nullptr;
  CUresult (*mem_get_info)(size_t*, size_t*) = nullptr;
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
  CUresult (*ctx_get_device)(CUdevice*) = nullptr;
  CUresult (*device_get_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*primary_get_state)(CUdevice, unsigned int*, int*) = nullptr;
  CUresult (*primary_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*primary_release)(CUdevice) = nullptr;

  ~Api() {
    if (handle != nullptr) dlclose(handle);
  }
};

absl::StatusOr<std::unique_ptr<DriverMemorySource>> DriverMemorySource::Open() {
  auto api = std::make_unique<Api>();
  // RTLD_NOLOAD: only the driver the application already uses; loading one ourselves in a
  // process that has none would be wrong.
  api->handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (api->handle == nullptr) {
    return absl::UnavailableError("libcuda.so.1 is not loaded in this process");
  }
  struct Entry {
    const char* name;
    void** slot;
  };
  const Entry entries[] = {
      {"cuMemGetInfo_v2", reinterpret_cast<void**>(&api->mem_get_info)},
      {"cuCtxSetCurrent", reinterpret_cast<void**>(&api->ctx_set_current)},
      {"cuCtxGetDevice", reinterpret_cast<void**>(&api->ctx_get_device)},
      {"cuDeviceGetCount", reinterpret_cast<void**>(&api->device_get_count)},
      {"cuDeviceGet", reinterpret_cast<void**>(&api->device_get)},
      {"cuDevicePrimaryCtxGetState", reinterpret_cast<void**>(&api->primary_get_state)},
      {"cuDevicePrimaryCtxRetain", reinterpret_cast<void**>(&api->primary_retain)},
      {"cuDevicePrimaryCtxRelease_v2", reinterpret_cast<void**>(&api->primary_release)},
  };
  for (const Entry& e : entries) {
    *e.slot = dlsym(api->handle, e.name);
    if (*e.slot == nullptr) {
      return absl::UnavailableError(absl::StrCat("libcuda.so.1 has no symbol ", e.name));
    }
  }
  return std::unique_ptr<DriverMemorySource>(new DriverMemorySource(std::move(api)));
}

DriverMemorySource::DriverMemorySource(std::unique_ptr<Api> api) : api_(std::move(api)) {}

DriverMemorySource::~DriverMemorySource() = default;

bool DriverMemorySource::ReadCurrent(DeviceMemory* out) {
  CUdevice dev = 0;
  size_t free = 0, total = 0;
  if (api_->ctx_get_device(&dev) != CUDA_SUCCESS) return false;
  if (api_->mem_get_info(&free, &total) != CUDA_SUCCESS) return false;
  out->device = static_cast<uint32_t>(dev);
  out->free = free;
  out->total = total;
  return true;
}

std::vector<DeviceMemory> DriverMemorySource::Read() {
  std::vector<DeviceMemory> out;
  int count = 0;
  if (api_->device_get_count(&count) != CUDA_SUCCESS) return out;
  for (int i = 0; i < count && i < 64; ++i) {
    CUdevice dev = 0;
    unsigned int flags = 0;
    int active = 0;
    if (api_->device_get(&dev, i) != CUDA_SUCCESS) continue;
    // Only a primary context the application already made active: retaining an inactive one
    // would create it and cost device memory.
    if (api_->primary_get_state(dev, &flags, &active) != CUDA_SUCCESS || !active) continue;
    CUcontext ctx = nullptr;
    if (api_->primary_retain(&ctx, dev) != CUDA_SUCCESS) continue;
    DeviceMemory d;
    if (api_->ctx_set_current(ctx) == CUDA_SUCCESS && ReadCurrent(&d)) out.push_back(d);
    api_->ctx_set_current(nullptr);
    api_->primary_release(dev);
  }
  return out;
}

}  // namespace cupti
}  // namespace memtrace
