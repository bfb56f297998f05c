// An exact reference for the energy-scheduling problem, for tests and benchmarks only:
// the least-energy plan whose measured iteration time is at most a deadline, as a MILP
// solved by COIN-OR CBC. Exponential in the worst case; use on small pipelines.
#pragma once

#include <optional>

#include "perseus/solver/problem.hpp"

namespace perseus::testing {

struct ExactResult {
  OptionChoice choice;
  MeasuredFigures measured;  // of `choice`, re-evaluated on the DAG
  bool proven_optimal = false;
  double energy_at_deadline_j = 0.0;  // of `choice`, its GPUs blocking until the deadline
  // A proven lower bound on the least energy at the deadline (CBC's best bound); equal to
  // energy_at_deadline_j up to the solver's tolerance when proven_optimal.
  double lower_bound_j = 0.0;
};

// nullopt when no plan meets the deadline (or CBC found none within the time limit).
std::optional<ExactResult> solve_exact(const EnergyProblem& problem, double deadline_s,
                                       double time_limit_s = 60.0);

}  // namespace perseus::testing
