// Exhaustive search over every plan of a tiny problem, for tests: the exact optimum at any
// deadline, to hold the solver's heuristics and bounds against.
#pragma once

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "perseus/solver/problem.hpp"

namespace perseus::testing {

// Every plan of a tiny problem: (measured time, effective energy), sorted by time, with a
// running minimum of effective energy, so the optimum for any deadline is one lookup.
class BruteForce {
 public:
  explicit BruteForce(const EnergyProblem& problem) : problem_(problem) {
    const std::size_t n = problem.dag.num_nodes();
    OptionChoice choice(n, 0);
    while (true) {
      const MeasuredFigures f = evaluate_measured(problem, choice);
      plans_.push_back({f.time_s, f.energy_j - problem.p_blocking * problem.num_gpus() * f.time_s});
      std::size_t i = 0;
      for (; i < n; ++i) {
        if (++choice[i] < static_cast<std::int32_t>(problem.options_of(static_cast<Dag::NodeId>(i)).options.size())) break;
        choice[i] = 0;
      }
      if (i == n) break;
    }
    std::sort(plans_.begin(), plans_.end());
    for (std::size_t i = 1; i < plans_.size(); ++i) plans_[i].second = std::min(plans_[i].second, plans_[i - 1].second);
  }

  // Least energy of any plan finishing within `deadline_s`, counted over `deadline_s`
  // (its GPUs block until then); infinity if none does.
  double optimum_energy_at(double deadline_s) const {
    auto it = std::upper_bound(plans_.begin(), plans_.end(), std::make_pair(deadline_s + 1e-12, std::numeric_limits<double>::infinity()));
    if (it == plans_.begin()) return std::numeric_limits<double>::infinity();
    return std::prev(it)->second + problem_.p_blocking * problem_.num_gpus() * deadline_s;
  }

  // Least effective energy plus `price_j_per_s` times the time, over every plan (the running
  // minimum at a plan's time is some plan's as fast, so scanning it finds the least).
  double least_priced(double price_j_per_s) const {
    double least = std::numeric_limits<double>::infinity();
    for (const auto& [time, effective] : plans_) least = std::min(least, effective + price_j_per_s * time);
    return least;
  }

  std::size_t size() const { return plans_.size(); }

 private:
  const EnergyProblem& problem_;
  std::vector<std::pair<double, double>> plans_;
};

}  // namespace perseus::testing
