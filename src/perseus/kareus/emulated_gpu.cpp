#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "perseus/kareus/evaluator.hpp"
#include "perseus/planner/energy_model.hpp"

namespace perseus::kareus {
namespace {

// What runs at one moment: the compute kernel (if any), on how many SMs, and the collective.
struct Phase {
  const Kernel* kernel = nullptr;
  int compute_sms = 0;
  bool comm = false;
};

}  // namespace

EmulatedGpu::EmulatedGpu(planner::GpuSpec gpu, GpuModelParams params) : gpu_(std::move(gpu)), params_(params) {
  if (params_.gemm_efficiency <= 0.0) params_.gemm_efficiency = gpu_.energy.gemm_efficiency_forward;
  if (params_.attention_efficiency <= 0.0) params_.attention_efficiency = params_.gemm_efficiency;
  if (params_.link_bandwidth <= 0.0) params_.link_bandwidth = gpu_.intra_node_busbw;
  if (gpu_.sms < 1 || gpu_.peak_flops <= 0.0 || gpu_.memory_bandwidth <= 0.0 || params_.link_bandwidth <= 0.0) {
    throw InputError(fmt::format("kareus: {} lacks SMs, peak FLOP/s, bandwidth or a link bandwidth", gpu_.name));
  }
}

Measurement EmulatedGpu::evaluate(const Partition& partition, const Config& config) {
  const int n = static_cast<int>(partition.compute.size());
  if (config.clock_mhz < gpu_.min_mhz || config.clock_mhz > gpu_.max_mhz) {
    throw InputError(fmt::format("kareus: {} MHz is outside {}'s {}..{} MHz", config.clock_mhz, gpu_.name, gpu_.min_mhz,
                                 gpu_.max_mhz));
  }
  if (config.comm_sms < 1 || config.comm_sms >= gpu_.sms) {
    throw InputError(fmt::format("kareus: {} SMs for the collective on a GPU of {}", config.comm_sms, gpu_.sms));
  }
  if (!config.sequential() && (config.first < 0 || config.last < config.first || config.last >= n)) {
    throw InputError(fmt::format("kareus: window {}..{} is outside partition {}'s {} kernels", config.first,
                                 config.last, partition.name, n));
  }
  const planner::EnergyModelParams& power = gpu_.energy;
  const double f_max = gpu_.max_mhz, bandwidth = params_.memory_efficiency * gpu_.memory_bandwidth;
  const double link = std::min(1.0, config.comm_sms / params_.sms_to_saturate_link) * params_.link_bandwidth;
  const auto g = [&](double f) { return planner::dynamic_power_factor(f, f_max, power.voltage_floor); };

  std::vector<double> remaining(static_cast<std::size_t>(n), 1.0);  // fraction of each kernel left
  double comm_left = partition.comm.bus_bytes;
  const int first = config.sequential() ? n : config.first, last = config.sequential() ? n - 1 : config.last;
  Measurement m;
  double clock_time = 0.0, run_time = 0.0;
  int k = 0;
  bool comm_started = false;
  // Events: a kernel ends or the collective ends. Between them the rates are constant.
  while (k < n || comm_left > 0.0) {
    if (k == first) comm_started = true;
    const bool comm = comm_left > 0.0 && (comm_started || k >= n);
    // Past the window the next kernel waits for the collective (its output is not needed,
    // but the schedule launches it after the collective's end event).
    const bool waits = comm && k > last;
    Phase phase{k < n && !waits ? &partition.compute[static_cast<std::size_t>(k)] : nullptr,
                gpu_.sms - (comm ? config.comm_sms : 0), comm};
    // Demands at the requested clock, then the clock the power limit allows, then the rates.
    const double efficiency =
        phase.kernel && phase.kernel->attention ? params_.attention_efficiency : params_.gemm_efficiency;
    const auto rates = [&](double f, double& kernel_rate, double& comm_rate, double& u_compute, double& u_memory) {
      const double ceiling = efficiency * gpu_.peak_flops * f / f_max;
      double kernel_time = 0.0, kernel_demand = 0.0, comm_demand = 0.0;
      if (phase.kernel) {
        const double compute_time = phase.kernel->flops / (ceiling * phase.compute_sms / gpu_.sms);
        kernel_time = std::max(compute_time, phase.kernel->bytes / bandwidth);
        kernel_demand = kernel_time > 0.0 ? phase.kernel->bytes / kernel_time : 0.0;
      }
      if (phase.comm) comm_demand = params_.comm_memory_factor * link;
      double kernel_share = kernel_demand, comm_share = comm_demand;
      if (kernel_demand + comm_demand > bandwidth) {  // contention: shares in proportion to demand
        kernel_share = bandwidth * kernel_demand / (kernel_demand + comm_demand);
        comm_share = bandwidth - kernel_share;
      }
      kernel_rate = 0.0;
      u_compute = 0.0;
      if (phase.kernel) {
        const double compute_time = phase.kernel->flops / (ceiling * phase.compute_sms / gpu_.sms);
        const double time = std::max({compute_time, kernel_share > 0.0 ? phase.kernel->bytes / kernel_share : 0.0, 1e-12});
        kernel_rate = 1.0 / time;
        u_compute = phase.kernel->flops / time / ceiling;
      }
      comm_rate = phase.comm ? std::min(link, comm_share / params_.comm_memory_factor) : 0.0;
      if (phase.comm) u_compute += params_.comm_sm_activity * config.comm_sms / gpu_.sms;
      u_memory = std::min(1.0, ((phase.kernel ? phase.kernel->bytes * kernel_rate : 0.0) +
                                params_.comm_memory_factor * comm_rate) / bandwidth);
    };
    double kernel_rate, comm_rate, u_compute, u_memory;
    // Dynamic power running steadily at `clock` (the utilisations are those at that clock).
    const auto dynamic_at = [&](double clock) {
      rates(clock, kernel_rate, comm_rate, u_compute, u_memory);
      return g(clock) * (power.compute_power_w * u_compute + power.memory_power_w * u_memory);
    };
    const double requested = config.clock_mhz;
    const double high = dynamic_at(requested);
    double f = requested, dynamic_w = high;
    if (power.static_power_w + high > power.power_limit_w) {
      // Above the limit the power controller dithers: it alternates between the requested clock
      // and one below the steady limit clock f_e (as far below it as the request is above),
      // in the proportion that puts the average power at the limit. The work runs at the
      // average clock; the power is the limit's. A steady clock at that average would be as
      // fast and draw less (the dynamic power is convex in the clock: Kareus's Theorem 1).
      const double steady = planner::highest_clock_within(gpu_.min_mhz, requested, power.power_limit_w,
                                                         [&](double f) { return power.static_power_w + dynamic_at(f); });
      const double floor = std::max<double>(gpu_.min_mhz, steady - (requested - steady));
      const double low = dynamic_at(floor);
      const double budget = power.power_limit_w - power.static_power_w;
      const double share = high > low ? std::clamp((budget - low) / (high - low), 0.0, 1.0) : 0.0;
      f = share * requested + (1.0 - share) * floor;
      dynamic_at(f);  // the rates at the average clock
      dynamic_w = budget;
    }
    double dt = std::numeric_limits<double>::infinity();
    if (phase.kernel) dt = std::min(dt, remaining[static_cast<std::size_t>(k)] / kernel_rate);
    if (phase.comm) dt = std::min(dt, comm_left / comm_rate);
    if (!std::isfinite(dt)) break;  // nothing can run (cannot happen with positive rates)
    m.time_s += dt;
    m.dynamic_j += dynamic_w * dt;
    clock_time += f * dt;
    run_time += dt;
    if (phase.kernel) {
      remaining[static_cast<std::size_t>(k)] -= kernel_rate * dt;
      if (remaining[static_cast<std::size_t>(k)] <= 1e-12) {
        ++k;
        m.time_s += params_.launch_s;
      }
    }
    if (phase.comm) {
      comm_left -= comm_rate * dt;
      if (comm_left <= 1e-9 * std::max(1.0, partition.comm.bus_bytes)) comm_left = 0.0;
    }
  }
  if (partition.comm.bus_bytes > 0.0) m.time_s += params_.launch_s;  // the collective's launch
  m.static_j = power.static_power_w * m.time_s;
  m.effective_mhz = run_time > 0.0 ? clock_time / run_time : config.clock_mhz;
  return m;
}

}  // namespace perseus::kareus
