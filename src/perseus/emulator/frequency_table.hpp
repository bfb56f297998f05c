// What every operation of an EnergyProblem takes at each GPU clock: the measured figures,
// looked up by frequency. The emulator uses it to run plans written as frequencies and to
// cost the moments a GPU runs at a clock its plan did not choose (a switch still in flight).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "perseus/model/errors.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/solver/problem.hpp"

namespace perseus {

// Time and energy of one instruction at one clock.
struct ClockFigures {
  double time_s = 0.0;
  double energy_j = 0.0;
};

class FrequencyTable {
 public:
  struct Point {
    int frequency_mhz = 0;
    double time_s = 0.0;
    double energy_j = 0.0;
  };

  // The options the solver kept (Pareto-filtered) for each of problem.operations.
  static FrequencyTable from_problem(const EnergyProblem& problem);
  // Every measurement of `profile`, bound to problem.operations the way make_problem binds
  // them: a recompute without rows of its own uses the forward rows, and with v chunks on a
  // profile of S stages each chunk takes 1/v of its stage's time and energy. Throws
  // InputError when the profile lacks an operation of the problem.
  static FrequencyTable from_profile(const EnergyProblem& problem, const Profile& profile);

  std::size_t num_operations() const { return begin_.empty() ? 0 : begin_.size() - 1; }
  // Measured points of one operation, ascending in frequency. Several knobs with the same
  // clock (profiles with extra knob columns) keep the fastest.
  std::span<const Point> points(std::size_t operation) const {
    return {points_.data() + begin_[operation], points_.data() + begin_[operation + 1]};
  }
  // A single measured point: data loading, a slow link. Its figures hold at every clock.
  bool is_constant(std::size_t operation) const { return points(operation).size() == 1; }

  // Figures at `frequency_mhz`: the measurement at exactly that clock; with `interpolate`,
  // linear in frequency between the two measured neighbours. nullopt when the clock is not
  // measured (and, interpolating, when it lies outside the measured range).
  std::optional<ClockFigures> at(std::size_t operation, int frequency_mhz, bool interpolate) const;

  // Figures while the clock sits at `frequency_mhz`, interpolated and clamped to the
  // measured range. Only for transitions the plan did not choose (a switch in flight).
  ClockFigures while_clocked_at(std::size_t operation, int frequency_mhz) const;

 private:
  void add_operation(std::vector<Point> points);

  std::vector<Point> points_;
  std::vector<std::size_t> begin_;
};

}  // namespace perseus
