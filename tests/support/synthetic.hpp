// Synthetic but physically shaped profiles for solver tests: per (stage, instruction) a
// base time, a compute-bound share that scales with the clock, and power that grows
// superlinearly with it, so faster options cost more energy, as on real GPUs.
#pragma once

#include <cmath>
#include <random>

#include "perseus/profile/profile.hpp"
#include "perseus/solver/problem.hpp"

namespace perseus::testing {

inline Profile synthetic_profile(int stages, int frequencies, std::uint32_t seed, double base_time_s = 0.04) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<OperationProfile> operations;
  for (int s = 0; s < stages; ++s) {
    for (InstructionKind kind : {InstructionKind::kForward, InstructionKind::kBackward}) {
      OperationProfile op{s, kind, {}};
      const double base = base_time_s * (kind == InstructionKind::kBackward ? 2.0 : 1.0) * (0.7 + 0.6 * unit(rng));
      const double compute_share = 0.5 + 0.5 * unit(rng);
      const double static_w = 60.0 + 30.0 * unit(rng);
      const double dynamic_w = 200.0 + 150.0 * unit(rng);
      for (int k = 0; k < frequencies; ++k) {
        const int mhz = 1410 - 15 * 4 * k;
        const double ratio = 1410.0 / mhz;
        const double time = base * (compute_share * ratio + (1.0 - compute_share));
        const double power = static_w + dynamic_w * std::pow(mhz / 1410.0, 2.5);
        op.measurements.push_back({std::to_string(mhz), mhz, time, power * time, k + 2});
      }
      operations.push_back(std::move(op));
    }
  }
  return Profile::from_operations("synthetic-" + std::to_string(seed), std::move(operations));
}

inline EnergyProblem synthetic_problem(const ScheduleSpec& spec, int frequencies, std::uint32_t seed,
                                       double unit_time = 0.001, double p_blocking = 80.0) {
  std::vector<Warning> warnings;
  return make_problem(synthetic_profile(spec.stages,
                                        frequencies, seed),
                      spec, OptionsConfig{unit_time, p_blocking, {}}, &warnings);
}

}  // namespace perseus::testing
