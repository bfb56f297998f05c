// A GPU that exists only as measurements: its clocks are the measured frequencies, and
// running an instruction advances a virtual clock by the time measured at the current
// graphics clock and adds the measured energy to its energy counter. Lets the controller,
// the client and the server be tested end to end without hardware.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "perseus/gpu/gpu_backend.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/model/instruction.hpp"

namespace perseus {

class Profile;

struct EmulatedOperationKey {
  int stage = 0;
  InstructionKind kind = InstructionKind::kForward;
  int frequency_mhz = 0;  // 0: the figures hold at every clock (data loading, a link)

  friend auto operator<=>(const EmulatedOperationKey&, const EmulatedOperationKey&) = default;
};

struct EmulatedCost {
  double time_s = 0.0;
  double energy_j = 0.0;
};

// Everything an EmulatedGpu needs, as plain values.
struct EmulatedGpuSpec {
  std::string name = "Emulated GPU";
  std::map<EmulatedOperationKey, EmulatedCost> costs;
  double p_blocking_w = 0.0;                    // power while idle (blocked on communication)
  int max_memory_clock_mhz = 1593;              // only reported and locked, never changes costs
  std::uint64_t default_power_limit_mw = 400'000;
};

// The spec of a GPU running `profile`: one cost per measured (stage, instruction, frequency);
// several knobs at one clock keep the fastest; an operation measured at a single point is
// constant across clocks; a stage without recompute rows recomputes at its forward costs
// (as the solver binds them). InputError when p_blocking_w is negative or not finite.
EmulatedGpuSpec emulated_gpu_spec_from_profile(const Profile& profile, double p_blocking_w);

// One state change of an EmulatedGpu, stamped with its virtual time.
struct EmulatedGpuEvent {
  enum class Kind { kLockGraphics, kResetGraphics, kLockMemory, kResetMemory, kResetPowerLimit };
  Kind kind = Kind::kLockGraphics;
  double at_s = 0.0;
  int min_mhz = 0;  // locks only
  int max_mhz = 0;

  friend bool operator==(const EmulatedGpuEvent&, const EmulatedGpuEvent&) = default;
};

// A single device (index 0). Unlocked, it runs at its highest clock, as a GPU boosts when
// nothing holds it down; locked to [min, max] it runs at the highest supported clock <= max.
class EmulatedGpu final : public GpuBackend {
 public:
  // InputError when the spec has no clock-dependent costs, a negative or non-finite figure,
  // a negative frequency, or a negative p_blocking_w.
  explicit EmulatedGpu(EmulatedGpuSpec spec);

  int device_count() const override { return 1; }
  std::string name(int device) const override;
  std::vector<int> supported_graphics_clocks(int device) const override;
  int max_memory_clock(int device) const override;
  // GpuError when min > max or no supported clock lies in [min, max] (NVML's
  // "Invalid Argument").
  void set_locked_graphics_clocks(int device, int min_mhz, int max_mhz) override;
  void reset_locked_graphics_clocks(int device) override;
  void set_locked_memory_clocks(int device, int min_mhz, int max_mhz) override;
  void reset_locked_memory_clocks(int device) override;
  void reset_power_limit(int device) override;
  std::uint64_t total_energy_mj(int device) const override;
  // The power of the latest interval: a run's energy over its time, or p_blocking when idle.
  std::uint64_t power_mw(int device) const override;

  // Runs one instruction of `stage` at the current clock. GpuError naming stage, instruction
  // and clock when the spec has no figures for it.
  EmulatedCost run(InstructionKind kind, int stage);
  // Waits `seconds` blocked, drawing p_blocking. InputError for a negative or non-finite wait.
  void idle(double seconds);
  // From now on every run takes `factor` times its measured time at the same power (so
  // `factor` times its energy): a straggler. 1 is normal. InputError unless finite and > 0.
  void set_slowdown(double factor);
  double slowdown() const;

  double now_s() const;
  double energy_j() const;
  int graphics_clock_mhz() const;      // the clock instructions run at now
  std::vector<EmulatedGpuEvent> events() const;  // every lock, reset and power-limit reset

 private:
  void check_device(int device, const char* call) const;
  void record(EmulatedGpuEvent::Kind kind, int min_mhz, int max_mhz);  // caller holds mutex_

  EmulatedGpuSpec spec_;
  std::vector<int> clocks_;  // descending

  mutable std::mutex mutex_;
  int current_mhz_ = 0;
  double now_s_ = 0.0;
  double energy_j_ = 0.0;
  double last_power_w_ = 0.0;
  double slowdown_ = 1.0;
  std::vector<EmulatedGpuEvent> events_;
};

}  // namespace perseus
