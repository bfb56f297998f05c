// GpuBackend over NVML, loaded at run time with dlopen so that perseus builds and runs its
// tests on machines without a GPU driver.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "perseus/gpu/gpu_backend.hpp"

namespace perseus {

class NvmlBackend final : public GpuBackend {
 public:
  // $PERSEUS_NVML_LIBRARY when set and not empty, otherwise "libnvidia-ml.so.1" (found by
  // the dynamic loader's search path).
  static std::string default_library_path();

  // Loads the library, resolves every symbol, calls nvmlInit_v2 and takes a handle for every
  // device. GpuError naming the library when it cannot be loaded or lacks a symbol, and
  // naming the call when NVML fails.
  explicit NvmlBackend(const std::string& library_path = default_library_path());
  // nvmlShutdown, then unloads the library.
  ~NvmlBackend() override;
  NvmlBackend(const NvmlBackend&) = delete;
  NvmlBackend& operator=(const NvmlBackend&) = delete;

  const std::string& library_path() const { return library_path_; }

  int device_count() const override;
  std::string name(int device) const override;
  std::vector<int> supported_graphics_clocks(int device) const override;
  int max_memory_clock(int device) const override;
  void set_locked_graphics_clocks(int device, int min_mhz, int max_mhz) override;
  void reset_locked_graphics_clocks(int device) override;
  void set_locked_memory_clocks(int device, int min_mhz, int max_mhz) override;
  void reset_locked_memory_clocks(int device) override;
  void reset_power_limit(int device) override;
  std::uint64_t total_energy_mj(int device) const override;
  std::uint64_t power_mw(int device) const override;
  // Two plain NVML calls on cached handles: no allocation, no lock, no exception.
  void reset_clocks_best_effort(int device) noexcept override;

 private:
  struct Library;  // the dlopen handle and the resolved symbols

  // The cached handle of `device`, as the opaque pointer NVML hands out.
  void* handle(int device) const;
  // Throws GpuError "<call>: <nvmlErrorString> (NVML error <code>)" unless `code` is success.
  void check(int code, const std::string& call) const;

  std::string library_path_;
  std::unique_ptr<Library> library_;
  std::vector<void*> handles_;
};

}  // namespace perseus
