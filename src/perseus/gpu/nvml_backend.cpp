#include "perseus/gpu/nvml_backend.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>

#include "perseus/gpu/nvml_abi.hpp"

namespace perseus {

struct NvmlBackend::Library {
  void* dl = nullptr;
  nvml::InitV2Fn init = nullptr;
  nvml::ShutdownFn shutdown = nullptr;
  nvml::ErrorStringFn error_string = nullptr;
  nvml::DeviceGetCountV2Fn get_count = nullptr;
  nvml::DeviceGetHandleByIndexV2Fn get_handle = nullptr;
  nvml::DeviceGetNameFn get_name = nullptr;
  nvml::DeviceGetSupportedMemoryClocksFn get_memory_clocks = nullptr;
  nvml::DeviceGetSupportedGraphicsClocksFn get_graphics_clocks = nullptr;
  nvml::DeviceGetMaxClockInfoFn get_max_clock = nullptr;
  nvml::DeviceSetGpuLockedClocksFn set_graphics_lock = nullptr;
  nvml::DeviceResetGpuLockedClocksFn reset_graphics_lock = nullptr;
  nvml::DeviceSetMemoryLockedClocksFn set_memory_lock = nullptr;
  nvml::DeviceResetMemoryLockedClocksFn reset_memory_lock = nullptr;
  nvml::DeviceGetPowerManagementDefaultLimitFn get_default_power_limit = nullptr;
  nvml::DeviceSetPowerManagementLimitFn set_power_limit = nullptr;
  nvml::DeviceGetTotalEnergyConsumptionFn get_energy = nullptr;
  nvml::DeviceGetPowerUsageFn get_power = nullptr;

  ~Library() {
    if (dl != nullptr) {
      ::dlclose(dl);
    }
  }
};

namespace {

template <typename Fn>
void resolve(void* dl, const std::string& library_path, const char* symbol, Fn& out) {
  ::dlerror();  // clear a stale error so that the one read below is ours
  void* address = ::dlsym(dl, symbol);
  if (address == nullptr) {
    const char* reason = ::dlerror();
    throw GpuError("NVML library '" + library_path + "' lacks symbol " + symbol + ": " +
                   (reason != nullptr ? reason : "null address"));
  }
  out = reinterpret_cast<Fn>(address);
}

nvml::Device as_device(void* handle) { return static_cast<nvml::Device>(handle); }

unsigned int as_clock(int mhz, const char* call) {
  if (mhz < 0) {
    throw GpuError(std::string(call) + ": negative clock " + std::to_string(mhz) + " MHz");
  }
  return static_cast<unsigned int>(mhz);
}

// Calls an NVML "fill this array" function, growing the buffer when NVML answers that it is
// too small (it then reports the size it needs in `count`).
std::vector<unsigned int> read_clock_list(const std::function<int(unsigned int*, unsigned int*)>& fill,
                                          const std::function<void(int)>& check) {
  std::vector<unsigned int> clocks(256);
  for (int attempt = 0;; ++attempt) {
    unsigned int count = static_cast<unsigned int>(clocks.size());
    const int code = fill(&count, clocks.data());
    if (code == nvml::kErrorInsufficientSize && attempt < 3 && count > clocks.size()) {
      clocks.resize(count);
      continue;
    }
    check(code);
    clocks.resize(std::min<std::size_t>(count, clocks.size()));
    return clocks;
  }
}

}  // namespace

std::string NvmlBackend::default_library_path() {
  const char* configured = std::getenv("PERSEUS_NVML_LIBRARY");
  if (configured != nullptr && *configured != '\0') {
    return configured;
  }
  return "libnvidia-ml.so.1";
}

NvmlBackend::NvmlBackend(const std::string& library_path)
    : library_path_(library_path), library_(std::make_unique<Library>()) {
  Library& lib = *library_;
  lib.dl = ::dlopen(library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib.dl == nullptr) {
    const char* reason = ::dlerror();
    throw GpuError("cannot load the NVML library '" + library_path + "' (" + (reason != nullptr ? reason : "unknown") +
                   "); install the NVIDIA driver or point PERSEUS_NVML_LIBRARY at libnvidia-ml.so.1");
  }
  resolve(lib.dl, library_path, "nvmlInit_v2", lib.init);
  resolve(lib.dl, library_path, "nvmlShutdown", lib.shutdown);
  resolve(lib.dl, library_path, "nvmlErrorString", lib.error_string);
  resolve(lib.dl, library_path, "nvmlDeviceGetCount_v2", lib.get_count);
  resolve(lib.dl, library_path, "nvmlDeviceGetHandleByIndex_v2", lib.get_handle);
  resolve(lib.dl, library_path, "nvmlDeviceGetName", lib.get_name);
  resolve(lib.dl, library_path, "nvmlDeviceGetSupportedMemoryClocks", lib.get_memory_clocks);
  resolve(lib.dl, library_path, "nvmlDeviceGetSupportedGraphicsClocks", lib.get_graphics_clocks);
  resolve(lib.dl, library_path, "nvmlDeviceGetMaxClockInfo", lib.get_max_clock);
  resolve(lib.dl, library_path, "nvmlDeviceSetGpuLockedClocks", lib.set_graphics_lock);
  resolve(lib.dl, library_path, "nvmlDeviceResetGpuLockedClocks", lib.reset_graphics_lock);
  resolve(lib.dl, library_path, "nvmlDeviceSetMemoryLockedClocks", lib.set_memory_lock);
  resolve(lib.dl, library_path, "nvmlDeviceResetMemoryLockedClocks", lib.reset_memory_lock);
  resolve(lib.dl, library_path, "nvmlDeviceGetPowerManagementDefaultLimit", lib.get_default_power_limit);
  resolve(lib.dl, library_path, "nvmlDeviceSetPowerManagementLimit", lib.set_power_limit);
  resolve(lib.dl, library_path, "nvmlDeviceGetTotalEnergyConsumption", lib.get_energy);
  resolve(lib.dl, library_path, "nvmlDeviceGetPowerUsage", lib.get_power);

  check(lib.init(), "nvmlInit_v2()");
  try {
    unsigned int count = 0;
    check(lib.get_count(&count), "nvmlDeviceGetCount_v2()");
    handles_.reserve(count);
    for (unsigned int i = 0; i < count; ++i) {
      nvml::Device device = nullptr;
      check(lib.get_handle(i, &device), "nvmlDeviceGetHandleByIndex_v2(" + std::to_string(i) + ")");
      handles_.push_back(device);
    }
  } catch (...) {
    lib.shutdown();  // balance the successful nvmlInit_v2 before the library is unloaded
    throw;
  }
}

NvmlBackend::~NvmlBackend() { library_->shutdown(); }

void NvmlBackend::check(int code, const std::string& call) const {
  if (code == nvml::kSuccess) {
    return;
  }
  const char* reason = library_->error_string != nullptr ? library_->error_string(code) : nullptr;
  std::string message = call + ": " + (reason != nullptr ? reason : "unknown error") + " (NVML error " +
                        std::to_string(code) + ")";
  if (code == nvml::kErrorNotSupported) throw GpuNotSupported(std::move(message));
  throw GpuError(std::move(message));
}

void* NvmlBackend::handle(int device) const {
  if (device < 0 || static_cast<std::size_t>(device) >= handles_.size()) {
    throw GpuError("NVML device index " + std::to_string(device) + " out of range: " +
                   std::to_string(handles_.size()) + " device(s)");
  }
  return handles_[static_cast<std::size_t>(device)];
}

int NvmlBackend::device_count() const { return static_cast<int>(handles_.size()); }

std::string NvmlBackend::name(int device) const {
  char buffer[nvml::kDeviceNameBufferSize] = {};
  check(library_->get_name(as_device(handle(device)), buffer, sizeof buffer),
        "nvmlDeviceGetName(device " + std::to_string(device) + ")");
  buffer[sizeof buffer - 1] = '\0';
  return buffer;
}

int NvmlBackend::max_memory_clock(int device) const {
  const nvml::Device h = as_device(handle(device));
  const std::string call = "nvmlDeviceGetSupportedMemoryClocks(device " + std::to_string(device) + ")";
  const std::vector<unsigned int> clocks = read_clock_list(
      [&](unsigned int* count, unsigned int* out) { return library_->get_memory_clocks(h, count, out); },
      [&](int code) { check(code, call); });
  if (clocks.empty()) {
    throw GpuError(call + ": the device reports no memory clocks");
  }
  return static_cast<int>(*std::max_element(clocks.begin(), clocks.end()));
}

std::vector<int> NvmlBackend::supported_graphics_clocks(int device) const {
  const unsigned int memory_mhz = static_cast<unsigned int>(max_memory_clock(device));
  const nvml::Device h = as_device(handle(device));
  const std::string call = "nvmlDeviceGetSupportedGraphicsClocks(device " + std::to_string(device) + ", " +
                           std::to_string(memory_mhz) + ")";
  const std::vector<unsigned int> clocks = read_clock_list(
      [&](unsigned int* count, unsigned int* out) { return library_->get_graphics_clocks(h, memory_mhz, count, out); },
      [&](int code) { check(code, call); });
  if (clocks.empty()) {
    throw GpuError(call + ": the device reports no graphics clocks");
  }
  std::vector<int> result(clocks.begin(), clocks.end());
  std::sort(result.begin(), result.end(), std::greater<>());
  result.erase(std::unique(result.begin(), result.end()), result.end());
  return result;
}

void NvmlBackend::set_locked_graphics_clocks(int device, int min_mhz, int max_mhz) {
  const std::string call = "nvmlDeviceSetGpuLockedClocks(device " + std::to_string(device) + ", " +
                           std::to_string(min_mhz) + ", " + std::to_string(max_mhz) + ")";
  check(library_->set_graphics_lock(as_device(handle(device)), as_clock(min_mhz, call.c_str()),
                                    as_clock(max_mhz, call.c_str())),
        call);
}

void NvmlBackend::reset_locked_graphics_clocks(int device) {
  check(library_->reset_graphics_lock(as_device(handle(device))),
        "nvmlDeviceResetGpuLockedClocks(device " + std::to_string(device) + ")");
}

void NvmlBackend::set_locked_memory_clocks(int device, int min_mhz, int max_mhz) {
  const std::string call = "nvmlDeviceSetMemoryLockedClocks(device " + std::to_string(device) + ", " +
                           std::to_string(min_mhz) + ", " + std::to_string(max_mhz) + ")";
  check(library_->set_memory_lock(as_device(handle(device)), as_clock(min_mhz, call.c_str()),
                                  as_clock(max_mhz, call.c_str())),
        call);
}

void NvmlBackend::reset_locked_memory_clocks(int device) {
  check(library_->reset_memory_lock(as_device(handle(device))),
        "nvmlDeviceResetMemoryLockedClocks(device " + std::to_string(device) + ")");
}

void NvmlBackend::reset_power_limit(int device) {
  const nvml::Device h = as_device(handle(device));
  unsigned int default_mw = 0;
  check(library_->get_default_power_limit(h, &default_mw),
        "nvmlDeviceGetPowerManagementDefaultLimit(device " + std::to_string(device) + ")");
  check(library_->set_power_limit(h, default_mw), "nvmlDeviceSetPowerManagementLimit(device " +
                                                      std::to_string(device) + ", " + std::to_string(default_mw) + ")");
}

std::uint64_t NvmlBackend::total_energy_mj(int device) const {
  unsigned long long energy_mj = 0;
  check(library_->get_energy(as_device(handle(device)), &energy_mj),
        "nvmlDeviceGetTotalEnergyConsumption(device " + std::to_string(device) + ")");
  return energy_mj;
}

std::uint64_t NvmlBackend::power_mw(int device) const {
  unsigned int power = 0;
  check(library_->get_power(as_device(handle(device)), &power),
        "nvmlDeviceGetPowerUsage(device " + std::to_string(device) + ")");
  return power;
}

void NvmlBackend::reset_clocks_best_effort(int device) noexcept {
  if (device < 0 || static_cast<std::size_t>(device) >= handles_.size()) {
    return;
  }
  const nvml::Device h = as_device(handles_[static_cast<std::size_t>(device)]);
  library_->reset_graphics_lock(h);
  library_->reset_memory_lock(h);
}

}  // namespace perseus
