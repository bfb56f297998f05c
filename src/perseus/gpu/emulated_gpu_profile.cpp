// Building an EmulatedGpuSpec from a measured profile; kept apart from emulated_gpu.cpp so
// that the emulated GPU itself depends only on plain values.
#include <cmath>

#include "perseus/gpu/emulated_gpu.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/profile/profile.hpp"

namespace perseus {

EmulatedGpuSpec emulated_gpu_spec_from_profile(const Profile& profile, double p_blocking_w) {
  if (!std::isfinite(p_blocking_w) || p_blocking_w < 0.0) {
    throw InputError(profile.source() + ": p_blocking must be a finite non-negative power, got " +
                     std::to_string(p_blocking_w) + " W");
  }
  EmulatedGpuSpec spec;
  spec.name = "Emulated GPU (" + profile.source() + ")";
  spec.p_blocking_w = p_blocking_w;

  auto add_operation = [&](int stage, InstructionKind kind, const std::vector<Measurement>& measurements) {
    const bool constant = measurements.size() == 1;
    for (const Measurement& m : measurements) {
      const EmulatedOperationKey key{stage, kind, constant ? 0 : m.frequency_mhz};
      const EmulatedCost cost{m.time_s, m.energy_j};
      auto [it, inserted] = spec.costs.emplace(key, cost);
      if (!inserted && cost.time_s < it->second.time_s) {
        it->second = cost;  // several knobs at one clock: the client can only pick by clock
      }
    }
  };
  for (const OperationProfile& op : profile.operations()) {
    add_operation(op.stage, op.kind, op.measurements);
  }
  for (int stage = 0; stage < profile.num_stages(); ++stage) {
    const OperationProfile* forward = profile.find(stage, InstructionKind::kForward);
    if (forward != nullptr && profile.find(stage, InstructionKind::kRecompute) == nullptr) {
      add_operation(stage, InstructionKind::kRecompute, forward->measurements);
    }
  }
  return spec;
}

}  // namespace perseus
