// What perseus needs from a GPU: its clocks, clock locking, the power limit and the energy
// counter. Two backends implement it: NVML loaded at run time (nvml_backend.hpp) and a GPU
// emulated from a measured profile (emulated_gpu.hpp).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace perseus {

// A GPU call failed. `what()` names the call, its arguments and the backend's reason
// (for NVML: nvmlErrorString of the returned code).
class GpuError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The device does not support the call at all (NVML_ERROR_NOT_SUPPORTED), as opposed to
// refusing it (no permission) or failing: e.g. locking the memory clock of an HBM GPU (A100,
// H100), whose memory runs at one clock. Callers may go on without what it would have done.
class GpuNotSupported : public GpuError {
 public:
  using GpuError::GpuError;
};

// Devices are numbered 0 .. device_count()-1; every method throws GpuError for an index out
// of range or a failed call. Implementations are safe to call from several threads at once
// (the frequency controller calls from its own thread while the training loop reads energy).
class GpuBackend {
 public:
  virtual ~GpuBackend() = default;

  virtual int device_count() const = 0;
  virtual std::string name(int device) const = 0;
  // Graphics clocks the device supports with its memory at max_memory_clock, in MHz,
  // descending and without repeats.
  virtual std::vector<int> supported_graphics_clocks(int device) const = 0;
  // The highest supported memory clock, in MHz.
  virtual int max_memory_clock(int device) const = 0;

  // Keeps the graphics clock within [min_mhz, max_mhz]; min == max pins it.
  virtual void set_locked_graphics_clocks(int device, int min_mhz, int max_mhz) = 0;
  virtual void reset_locked_graphics_clocks(int device) = 0;
  virtual void set_locked_memory_clocks(int device, int min_mhz, int max_mhz) = 0;
  virtual void reset_locked_memory_clocks(int device) = 0;
  // Sets the power limit back to the device's default.
  virtual void reset_power_limit(int device) = 0;

  // Energy consumed since the driver was loaded, in millijoules; never decreases.
  virtual std::uint64_t total_energy_mj(int device) const = 0;
  // Current power draw, in milliwatts.
  virtual std::uint64_t power_mw(int device) const = 0;

  // Resets locked graphics and memory clocks, ignoring every failure. Called from signal
  // handlers, so overrides should neither allocate nor take locks when they can avoid it;
  // the default calls the two reset methods and swallows their errors.
  virtual void reset_clocks_best_effort(int device) noexcept;
};

}  // namespace perseus
