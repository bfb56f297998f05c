// The knobs of one partition (Kareus's execution schedule): the SM clock, the SMs given to the
// communication kernel, and its launch window, the contiguous run of compute kernels it overlaps.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "perseus/kareus/workload.hpp"
#include "perseus/model/errors.hpp"

namespace perseus::kareus {

struct Config {
  int clock_mhz = 0;
  int comm_sms = 0;
  // The compute kernels [first, last] the collective runs beside, launched with kernel `first`;
  // -1, -1: sequential (every compute kernel, then the collective alone).
  int first = -1, last = -1;
  bool sequential() const { return first < 0; }
  bool operator==(const Config&) const = default;
};
// "1410 MHz, 8 SMs, kernels 1-3" / "1410 MHz, sequential".
std::string describe(const Config& config, const Partition& partition);

// Every configuration of a partition: each clock x (each SM count x each window, plus the
// sequential execution, whose collective takes the most SMs, as NCCL would). Indexed densely,
// clock-major, the sequential one last within each clock.
class KnobSpace {
 public:
  KnobSpace(std::vector<int> clocks_mhz, int max_sms, int kernels);
  const std::vector<int>& clocks() const { return clocks_; }
  int max_sms() const { return max_sms_; }
  int kernels() const { return kernels_; }
  std::size_t windows() const { return static_cast<std::size_t>(kernels_) * (kernels_ + 1) / 2; }
  std::size_t per_clock() const { return static_cast<std::size_t>(max_sms_) * windows() + 1; }
  std::size_t size() const { return clocks_.size() * per_clock(); }
  // O(1) both ways. InputError for an index beyond size() or a configuration outside the space.
  Config at(std::size_t index) const;
  std::size_t index_of(const Config& config) const;

 private:
  std::vector<int> clocks_;
  int max_sms_;
  int kernels_;
  std::vector<std::pair<int, int>> window_;  // window number -> (first, last)
};

// Kareus's space on `gpu` for `partition` (the paper's, Appendix B): clocks from `min_mhz` to the
// top in the GPU's steps (900-1410 MHz: 35 on an A100), 1..`max_sms` SMs for the collective.
// InputError for a minimum outside the GPU's clocks or an SM count outside 1..its SMs.
KnobSpace knob_space(const planner::GpuSpec& gpu, const Partition& partition, int min_mhz = 900, int max_sms = 30);

}  // namespace perseus::kareus
