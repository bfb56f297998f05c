#include "perseus/gpu/emulated_gpu.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "perseus/model/errors.hpp"

namespace perseus {

namespace {

std::string describe(const EmulatedOperationKey& key) {
  return "stage " + std::to_string(key.stage) + " " + std::string(to_string(key.kind)) + " at " +
         (key.frequency_mhz == 0 ? std::string("every clock") : std::to_string(key.frequency_mhz) + " MHz");
}

}  // namespace

EmulatedGpu::EmulatedGpu(EmulatedGpuSpec spec) : spec_(std::move(spec)) {
  if (!std::isfinite(spec_.p_blocking_w) || spec_.p_blocking_w < 0.0) {
    throw InputError("EmulatedGpu: p_blocking must be a finite non-negative power, got " +
                     std::to_string(spec_.p_blocking_w) + " W");
  }
  if (spec_.max_memory_clock_mhz <= 0) {
    throw InputError("EmulatedGpu: max memory clock must be positive, got " +
                     std::to_string(spec_.max_memory_clock_mhz) + " MHz");
  }
  std::set<int, std::greater<>> clocks;
  for (const auto& [key, cost] : spec_.costs) {
    if (key.frequency_mhz < 0) {
      throw InputError("EmulatedGpu: negative frequency for " + describe(key));
    }
    if (!std::isfinite(cost.time_s) || cost.time_s < 0.0 || !std::isfinite(cost.energy_j) || cost.energy_j < 0.0) {
      throw InputError("EmulatedGpu: time and energy must be finite and non-negative for " + describe(key) +
                       ", got " + std::to_string(cost.time_s) + " s, " + std::to_string(cost.energy_j) + " J");
    }
    if (key.frequency_mhz > 0) {
      clocks.insert(key.frequency_mhz);
    }
  }
  if (clocks.empty()) {
    throw InputError("EmulatedGpu: the spec has no clock-dependent measurements, so the GPU has no clocks");
  }
  clocks_.assign(clocks.begin(), clocks.end());
  current_mhz_ = clocks_.front();
  last_power_w_ = spec_.p_blocking_w;
}

void EmulatedGpu::check_device(int device, const char* call) const {
  if (device != 0) {
    throw GpuError(std::string("EmulatedGpu::") + call + ": device index " + std::to_string(device) +
                   " out of range: 1 device");
  }
}

void EmulatedGpu::record(EmulatedGpuEvent::Kind kind, int min_mhz, int max_mhz) {
  events_.push_back({kind, now_s_, min_mhz, max_mhz});
}

std::string EmulatedGpu::name(int device) const {
  check_device(device, "name");
  return spec_.name;
}

std::vector<int> EmulatedGpu::supported_graphics_clocks(int device) const {
  check_device(device, "supported_graphics_clocks");
  return clocks_;
}

int EmulatedGpu::max_memory_clock(int device) const {
  check_device(device, "max_memory_clock");
  return spec_.max_memory_clock_mhz;
}

void EmulatedGpu::set_locked_graphics_clocks(int device, int min_mhz, int max_mhz) {
  check_device(device, "set_locked_graphics_clocks");
  // The highest supported clock not above max_mhz; clocks_ is descending.
  const auto it = std::find_if(clocks_.begin(), clocks_.end(), [&](int clock) { return clock <= max_mhz; });
  if (min_mhz > max_mhz || it == clocks_.end() || *it < min_mhz) {
    throw GpuError("EmulatedGpu::set_locked_graphics_clocks(device 0, " + std::to_string(min_mhz) + ", " +
                   std::to_string(max_mhz) + "): Invalid Argument (no supported clock in range; supported " +
                   std::to_string(clocks_.back()) + ".." + std::to_string(clocks_.front()) + " MHz)");
  }
  const std::lock_guard lock(mutex_);
  current_mhz_ = *it;
  record(EmulatedGpuEvent::Kind::kLockGraphics, min_mhz, max_mhz);
}

void EmulatedGpu::reset_locked_graphics_clocks(int device) {
  check_device(device, "reset_locked_graphics_clocks");
  const std::lock_guard lock(mutex_);
  current_mhz_ = clocks_.front();
  record(EmulatedGpuEvent::Kind::kResetGraphics, 0, 0);
}

void EmulatedGpu::set_locked_memory_clocks(int device, int min_mhz, int max_mhz) {
  check_device(device, "set_locked_memory_clocks");
  if (min_mhz > max_mhz || min_mhz <= 0 || min_mhz > spec_.max_memory_clock_mhz) {
    throw GpuError("EmulatedGpu::set_locked_memory_clocks(device 0, " + std::to_string(min_mhz) + ", " +
                   std::to_string(max_mhz) + "): Invalid Argument (max memory clock " +
                   std::to_string(spec_.max_memory_clock_mhz) + " MHz)");
  }
  const std::lock_guard lock(mutex_);
  record(EmulatedGpuEvent::Kind::kLockMemory, min_mhz, max_mhz);
}

void EmulatedGpu::reset_locked_memory_clocks(int device) {
  check_device(device, "reset_locked_memory_clocks");
  const std::lock_guard lock(mutex_);
  record(EmulatedGpuEvent::Kind::kResetMemory, 0, 0);
}

void EmulatedGpu::reset_power_limit(int device) {
  check_device(device, "reset_power_limit");
  const std::lock_guard lock(mutex_);
  record(EmulatedGpuEvent::Kind::kResetPowerLimit, 0, 0);
}

std::uint64_t EmulatedGpu::total_energy_mj(int device) const {
  check_device(device, "total_energy_mj");
  const std::lock_guard lock(mutex_);
  return static_cast<std::uint64_t>(std::llround(energy_j_ * 1000.0));
}

std::uint64_t EmulatedGpu::power_mw(int device) const {
  check_device(device, "power_mw");
  const std::lock_guard lock(mutex_);
  return static_cast<std::uint64_t>(std::llround(last_power_w_ * 1000.0));
}

EmulatedCost EmulatedGpu::run(InstructionKind kind, int stage) {
  const std::lock_guard lock(mutex_);
  const EmulatedOperationKey key{stage, kind, current_mhz_};
  auto it = spec_.costs.find(key);
  if (it == spec_.costs.end()) {
    it = spec_.costs.find({stage, kind, 0});
  }
  if (it == spec_.costs.end()) {
    throw GpuError("EmulatedGpu::run: no measurement for " + describe(key));
  }
  const EmulatedCost cost{it->second.time_s * slowdown_, it->second.energy_j * slowdown_};
  now_s_ += cost.time_s;
  energy_j_ += cost.energy_j;
  // A zero-time instruction leaves the previous power reading standing.
  if (cost.time_s > 0.0) {
    last_power_w_ = cost.energy_j / cost.time_s;
  }
  return cost;
}

void EmulatedGpu::idle(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0.0) {
    throw InputError("EmulatedGpu::idle: the wait must be finite and non-negative, got " + std::to_string(seconds) +
                     " s");
  }
  const std::lock_guard lock(mutex_);
  now_s_ += seconds;
  energy_j_ += spec_.p_blocking_w * seconds;
  last_power_w_ = spec_.p_blocking_w;
}

void EmulatedGpu::set_slowdown(double factor) {
  if (!std::isfinite(factor) || factor <= 0.0) {
    throw InputError("EmulatedGpu::set_slowdown: the factor must be finite and positive, got " + std::to_string(factor));
  }
  const std::lock_guard lock(mutex_);
  slowdown_ = factor;
}

double EmulatedGpu::slowdown() const {
  const std::lock_guard lock(mutex_);
  return slowdown_;
}

double EmulatedGpu::now_s() const {
  const std::lock_guard lock(mutex_);
  return now_s_;
}

double EmulatedGpu::energy_j() const {
  const std::lock_guard lock(mutex_);
  return energy_j_;
}

int EmulatedGpu::graphics_clock_mhz() const {
  const std::lock_guard lock(mutex_);
  return current_mhz_;
}

std::vector<EmulatedGpuEvent> EmulatedGpu::events() const {
  const std::lock_guard lock(mutex_);
  return events_;
}

}  // namespace perseus
