// Supporting lines of the LP relaxation (relaxation.hpp) at every deadline from one crawl:
// the crawl's minimum cuts on the measured hull's costs (CrawlCost::kMeasuredHull) price the
// relaxation's time, step by step, near its optimal duals, and each step's Lagrangian bound
// (LagrangianBound) is a line valid at every deadline, whatever the crawl's rounding. N
// steps cost about what N steps of the frontier's crawl cost, against one network-simplex
// solve per line: on bloom 8 x 12, 2,000 lines in 0.05 s lie a median 0.02% below the LP
// optimum (docs/solver.md, "Certified frontier").
#pragma once

#include <cstddef>
#include <vector>

#include "perseus/solver/problem.hpp"
#include "perseus/solver/relaxation.hpp"

namespace perseus {

// The crawl's durations at one of its states, rounded to options: each node's slowest option
// no slower (the fastest when none is), and its fastest no faster (the slowest when none is).
// Rounded down the plan meets the state's time; rounded up it is cheaper and usually late.
struct RoundedState {
  double time_s = 0.0;  // the state's iteration time
  OptionChoice down, up;
};

struct RelaxationCrawl {
  std::vector<SupportingLine> lines;  // one per minimum cut, slowest first
  double unit_s = 0.0;                // the crawl's time unit
  std::size_t steps = 0;
  std::vector<RoundedState> rounded;  // slowest first
};

// The crawl from the all-slowest plan's time (every option counted, not the reference's
// alone) towards T_min in about `steps` steps: its unit is that span over `steps`, at least
// 1 ns; its durations rounded at up to `rounded_states` states (none: 0): state j of n at
// step 1 - (1 - j / (n + 1))^fast_end_power of the way, evenly spread at 1, crowded towards
// T_min above it (where the frontier is steepest); states falling on one step are taken once.
// Preconditions: steps >= 1, fast_end_power >= 1.
// O(steps x a crawl step's cost + rounded_states x nodes x options).
RelaxationCrawl crawl_relaxation(const EnergyProblem& problem, std::size_t steps, std::size_t rounded_states = 0,
                                 double fast_end_power = 1.0);

}  // namespace perseus
