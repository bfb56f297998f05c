#include "perseus/kareus/knob_space.hpp"

#include <fmt/format.h>

namespace perseus::kareus {

std::string describe(const Config& c, const Partition& p) {
  if (c.sequential()) return fmt::format("{} MHz, sequential", c.clock_mhz);
  const auto name = [&](int k) { return k >= 0 && k < static_cast<int>(p.compute.size()) ? p.compute[k].name : "?"; };
  return c.first == c.last ? fmt::format("{} MHz, {} SMs, beside {}", c.clock_mhz, c.comm_sms, name(c.first))
                           : fmt::format("{} MHz, {} SMs, beside {}..{}", c.clock_mhz, c.comm_sms, name(c.first), name(c.last));
}

KnobSpace::KnobSpace(std::vector<int> clocks_mhz, int max_sms, int kernels)
    : clocks_(std::move(clocks_mhz)), max_sms_(max_sms), kernels_(kernels) {
  if (clocks_.empty() || max_sms_ < 1 || kernels_ < 1) throw InputError("kareus: an empty knob space");
  for (int first = 0; first < kernels_; ++first) {
    for (int last = first; last < kernels_; ++last) window_.emplace_back(first, last);
  }
}

Config KnobSpace::at(std::size_t index) const {
  if (index >= size()) throw InputError(fmt::format("kareus: configuration {} beyond the space of {}", index, size()));
  const std::size_t clock = index / per_clock(), rest = index % per_clock();
  Config c;
  c.clock_mhz = clocks_[clock];
  if (rest == per_clock() - 1) {
    c.comm_sms = max_sms_;
    return c;
  }
  c.comm_sms = static_cast<int>(rest / windows()) + 1;
  std::tie(c.first, c.last) = window_[rest % windows()];
  return c;
}

std::size_t KnobSpace::index_of(const Config& c) const {
  std::size_t clock = clocks_.size();
  for (std::size_t i = 0; i < clocks_.size(); ++i) {
    if (clocks_[i] == c.clock_mhz) clock = i;
  }
  if (clock == clocks_.size()) throw InputError(fmt::format("kareus: {} MHz is not a clock of the space", c.clock_mhz));
  if (c.sequential()) return clock * per_clock() + per_clock() - 1;
  if (c.comm_sms < 1 || c.comm_sms > max_sms_) {
    throw InputError(fmt::format("kareus: {} SMs for the collective is outside 1..{}", c.comm_sms, max_sms_));
  }
  if (c.first < 0 || c.last < c.first || c.last >= kernels_) {
    throw InputError(fmt::format("kareus: window {}..{} is outside the partition's {} kernels", c.first, c.last, kernels_));
  }
  // Windows are numbered first-major: those starting before `first`, then the offset of `last`.
  const std::size_t before = static_cast<std::size_t>(c.first) * kernels_ - static_cast<std::size_t>(c.first) * (c.first - 1) / 2;
  return clock * per_clock() + static_cast<std::size_t>(c.comm_sms - 1) * windows() + before + (c.last - c.first);
}

KnobSpace knob_space(const planner::GpuSpec& gpu, const Partition& partition, int min_mhz, int max_sms) {
  if (min_mhz < gpu.min_mhz || min_mhz > gpu.max_mhz) {
    throw InputError(fmt::format("kareus: lowest clock {} MHz is outside {}'s {}..{} MHz", min_mhz, gpu.name,
                                 gpu.min_mhz, gpu.max_mhz));
  }
  if (max_sms < 1 || max_sms > gpu.sms) {
    throw InputError(fmt::format("kareus: the collective's SMs must be 1..{} on {}, not {}", gpu.sms, gpu.name, max_sms));
  }
  std::vector<int> clocks;
  // The GPU's clocks are max - k * step; keep those at or above the minimum.
  for (int f = gpu.max_mhz; f >= min_mhz; f -= gpu.step_mhz) clocks.insert(clocks.begin(), f);
  return KnobSpace(std::move(clocks), max_sms, static_cast<int>(partition.compute.size()));
}

}  // namespace perseus::kareus
