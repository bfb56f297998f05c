// What a partition's configuration takes: the interface every evaluator (the emulated GPU, an
// external profiler) implements, and the emulated kernel-level GPU model.
#pragma once

#include <string>

#include "perseus/kareus/knob_space.hpp"
#include "perseus/kareus/workload.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/planner/catalogue.hpp"

namespace perseus::kareus {

// One GPU's time and energy for one partition (one nanobatch's compute beside the other's
// collective). Static energy is the static power over the time; dynamic the rest.
struct Measurement {
  double time_s = 0.0;
  double dynamic_j = 0.0;
  double static_j = 0.0;
  double effective_mhz = 0.0;  // the time-averaged clock the GPU ran at (lower when it throttled)
  double total_j() const { return dynamic_j + static_j; }
};

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual Measurement evaluate(const Partition& partition, const Config& config) = 0;
  virtual std::string name() const = 0;
};

// The emulated GPU's constants beyond the catalogue's (docs/kareus.md, "The emulated GPU").
struct GpuModelParams {
  double gemm_efficiency = 0.0;      // share of peak FLOP/s a GEMM reaches (0: the catalogue's calibrated forward efficiency)
  double attention_efficiency = 0.0; // an attention kernel's (0: the GEMM's)
  double memory_efficiency = 0.85;   // share of the datasheet HBM bandwidth kernels reach
  double link_bandwidth = 0.0;       // collective bus bandwidth, B/s (0: the catalogue's intra-node bus bandwidth)
  double sms_to_saturate_link = 12;  // SMs a collective needs to reach the link's bandwidth
  double comm_memory_factor = 2.0;   // HBM bytes a collective moves per byte on the link (read and write)
  double comm_sm_activity = 0.3;     // a collective's SM draws this share of a computing SM's dynamic power
  double launch_s = 4e-6;            // per kernel launched
};

// A kernel-level model of one GPU running a partition (docs/kareus.md has the equations):
// - each compute kernel is a roofline at the clock: FLOPs / (eta * peak * f/f_max * SMs/N), or
//   bytes / bandwidth when that is longer; the compute ceiling scales with the clock and with the
//   SMs it gets, memory bandwidth does not;
// - the collective runs on its own SMs (taken from the compute kernels while it runs) at
//   min(link, SMs/SMs_to_saturate * link), and moves comm_memory_factor HBM bytes per byte sent;
// - when the two want more HBM bandwidth together than there is, each gets its demand's share;
// - dynamic power g(f) * (P_compute * u_compute + P_memory * u_memory), g(f) = f/f_max *
//   max(v_floor, f/f_max)^2 (the planner's energy model), u the utilisations; static power
//   constant; above the power limit the clock throttles until the power fits.
// Deterministic; thread-compatible.
class EmulatedGpu : public Evaluator {
 public:
  explicit EmulatedGpu(planner::GpuSpec gpu, GpuModelParams params = {});
  // InputError for a configuration outside the GPU (clock, SMs) or the partition (window).
  Measurement evaluate(const Partition& partition, const Config& config) override;
  std::string name() const override { return "emulated " + gpu_.name; }
  const planner::GpuSpec& gpu() const { return gpu_; }
  const GpuModelParams& params() const { return params_; }

 private:
  planner::GpuSpec gpu_;
  GpuModelParams params_;
};

}  // namespace perseus::kareus
