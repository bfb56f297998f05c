// The least-energy plan at one deadline, exactly: a mixed-integer program over every measured
// option of every operation, solved by COIN-OR CBC within a time limit (docs/solver.md, "The
// exact MILP at a chosen deadline").
//
// The frontier's plans are within a proven gap of the best possible (its LP bounds); this is
// for the one deadline a user runs at, where spending seconds more is worth it: started from a
// given plan, CBC returns a plan no dearer than it, and its branch-and-cut bound, which its
// cuts raise above the LP relaxation's.
//
// Model: a binary x[n][k] per DAG node n and option k (exactly one per node) and a start time
// s[n] per node; s[w] >= s[n] + sum_k t[n][k] x[n][k] for every edge n -> w, and every last
// operation ends by the deadline. The objective, sum (e - p_blocking * t) x, is the iteration
// energy at the deadline less the constant p_blocking * S * deadline (the GPUs block until
// then). Its LP relaxation is the relaxation of relaxation.hpp (each node's options' convex
// hull), so CBC's bound is never below that LP's optimum once its root is solved.
//
// Preconditions: every node has at least one option. Complexity: NP-hard in general
// (branch and bound, exponential in the worst case); the time limit bounds it. CBC (the
// Debian package coinor-libcbc3) is loaded when first used; InputError when it cannot be,
// or when the model would have more than ExactOptions::max_binaries binaries.
#pragma once

#include <cstddef>
#include <optional>

#include "perseus/solver/problem.hpp"

namespace perseus {

struct ExactOptions {
  double time_limit_s = 10.0;
  // A plan to start from (CBC's first incumbent); one that misses the deadline is not used.
  // Without one, CBC's own heuristics must find a first plan.
  std::optional<OptionChoice> start;
  // Larger models are refused (InputError) rather than built: CBC's memory grows with the
  // binaries, 349 MB for gpt3-175b A40 8 x 96's 1,536 operations (up to 92,160 binaries).
  std::size_t max_binaries = 250'000;
};

struct ExactSolution {
  OptionChoice choice;              // the best plan CBC found, or the start where none was cheaper
  MeasuredFigures measured;         // of `choice`, evaluated on the DAG
  double energy_at_deadline_j = 0;  // measured energy with the GPUs blocking until the deadline
  // A proven lower bound on the energy at the deadline of any plan (CBC's best bound, within
  // its tolerances); equal to energy_at_deadline_j when proven_optimal. NaN when CBC stopped
  // before it had one (the time ran out inside its root LP).
  double lower_bound_j = 0;
  bool proven_optimal = false;
  bool improved = false;            // CBC found a plan cheaper than the start
  double seconds = 0;               // CBC's wall time
};

// nullopt when no plan meets the deadline, or none was given and CBC found none in time.
std::optional<ExactSolution> solve_exact(const EnergyProblem& problem, double deadline_s,
                                         const ExactOptions& options = {});

// The same MILP with the deadline priced instead of fixed: the least effective energy plus
// `price` (J/s) times the iteration time, over plans of any time (the deadline a column of
// that cost). A bound B on it holds for every plan P: effective(P) >= B - price * time(P), so
// for every deadline D, effective(P) >= B - price * D of any plan meeting D. That is a
// supporting line valid at every deadline, as an LP solve's is (docs/solver.md, "Certified
// frontier"), but raised by CBC's root cuts above the LP's line of that slope; the fixed
// deadline's bound holds only at that deadline and faster.
struct PricedExactSolution {
  OptionChoice choice;       // the plan of least effective energy + price * time found (or the start)
  MeasuredFigures measured;  // of `choice`, evaluated on the DAG
  double objective_j = 0;    // effective energy + price * time of `choice`
  // Effective energy (energy less p_blocking * S * t) of any plan meeting a deadline t is at
  // least line_j - price * t; line_j is CBC's bound, never above objective_j. NaN when CBC
  // stopped before it had one.
  double line_j = 0;
  bool proven_optimal = false;
  bool improved = false;     // CBC found a plan of less objective than the start's
  double seconds = 0;        // CBC's wall time
};

// Preconditions: price finite and >= 0 (else InputError). `options.start`, where given, is
// CBC's first incumbent (at its own time). nullopt when none was given and CBC found no plan
// in time. Complexity and limits as solve_exact's.
std::optional<PricedExactSolution> solve_exact_priced(const EnergyProblem& problem, double price_j_per_s,
                                                      const ExactOptions& options = {});

}  // namespace perseus
