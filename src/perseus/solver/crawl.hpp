// The Phillips–Dessouky crawl: from the minimum-energy schedule (every operation at its
// slowest duration, iteration time T*) down to T_min, one time unit per step, each step
// shortening the cheapest set of operations found by a lower-bounded minimum cut.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "perseus/solver/problem.hpp"

namespace perseus {

// One emitted point of the crawl, in the reference's (fitted, quantised) terms.
struct CrawlStep {
  std::int64_t time_q = 0;    // iteration time, units of unit_time
  double fitted_cost = 0.0;   // sum of fitted effective energy over all operations
  double cost_change = 0.0;   // fitted cost added by this step
};

struct DurationChange {
  Dag::NodeId node = 0;
  std::int64_t duration_q = 0;
};

// The crawl as a log: the initial durations plus the changes of each step, so that a
// long crawl costs memory proportional to what changed, not steps x nodes.
struct CrawlResult {
  std::vector<std::int64_t> initial_durations;  // all-slowest, per DAG node
  std::int64_t t_star_q = 0;                    // iteration time of the all-slowest schedule
  std::int64_t t_min_q = 0;                     // iteration time with every operation at min q
  double initial_fitted_cost = 0.0;
  std::vector<CrawlStep> steps;                 // emitted points, each one unit faster
  std::vector<std::size_t> change_begin;        // steps.size() + 1 offsets into `changes`
  std::vector<DurationChange> changes;
  std::string stop_reason;

  // Fitted energy of a step as the reference reports it: cost + S * time * p_blocking.
  double reference_energy(const CrawlStep& step, const EnergyProblem& problem) const;
};

// Walks the durations of successive steps without storing them all.
class CrawlCursor {
 public:
  explicit CrawlCursor(const CrawlResult& result) : result_(result), durations_(result.initial_durations) {}
  // Durations after step `step` (steps must be visited in increasing order).
  const std::vector<std::int64_t>& advance_to(std::size_t step);
  const std::vector<std::int64_t>& durations() const { return durations_; }

 private:
  const CrawlResult& result_;
  std::vector<std::int64_t> durations_;
  std::size_t applied_ = 0;  // steps applied so far
};

enum class MaxFlowAlgorithm {
  kDinic,         // default: augmenting paths (see max_flow.hpp for why)
  kLemonPreflow,  // LEMON's push-relabel, kept for comparison
};

// What the crawl's durations cost.
enum class CrawlCost {
  // The reference's: each operation's fitted exponential over its reference options, in
  // units of the problem's unit_time. The frontier's crawl.
  kFitted,
  // The LP relaxation's (relaxation.hpp): the lower convex hull of every option's measured
  // (time, effective energy), in units of CrawlOptions::hull_unit_s. Its minimum cuts' flows
  // are (near-)optimal duals of the relaxation, one supporting line per step (bound_crawl.hpp).
  kMeasuredHull,
};

// The flow of a step's minimum cut, in cost per time unit: on every DAG edge (in the order
// of each node's successors, node by node), from the iteration's start into every first
// operation and from every last operation to the end (0 for the others). Only the critical
// DAG carries any.
struct CrawlFlow {
  std::int64_t time_q = 0;  // the iteration time the cut shortens
  std::span<const double> dependencies, starts, ends;
  // Whether some arc carries a thousandth of the crawl's unbounded capacity or more: a cut
  // through unbounded arcs (the one that stops the crawl at T_min, mostly). As prices its
  // flows are ~1e12 per unit, and a Lagrangian line from them is floating-point noise (terms
  // of ~1e16 J cancelling to thousands), which once stood 2.5% above the LP optimum.
  bool through_unbounded_arcs() const;
};

struct CrawlOptions {
  MaxFlowAlgorithm max_flow = MaxFlowAlgorithm::kDinic;
  CrawlCost cost = CrawlCost::kFitted;
  double hull_unit_s = 0.0;  // kMeasuredHull's time unit (> 0)
  // Called after a step's maximum flow, before its changes apply (the last, the cut that
  // stops the crawl, too): at every flow_every-th step and at each of the last flow_every
  // before T_min.
  std::function<void(const CrawlFlow&)> on_flow;
  std::size_t flow_every = 1;
  // Called every `progress_every` steps with (steps so far, current time_q, t_min_q).
  std::function<void(std::size_t, std::int64_t, std::int64_t)> progress;
  std::size_t progress_every = 1000;
  std::size_t max_steps = 0;  // 0: until the crawl stops by itself
  // Called after every step with its index, the step and its duration changes (to build the
  // frontier while the crawl runs: FrontierBuilder).
  std::function<void(std::size_t, const CrawlStep&, std::span<const DurationChange>)> on_step;
};

CrawlResult crawl_frontier(const EnergyProblem& problem, const CrawlOptions& options = {});

// Option chosen for every node when each runs at the given planned durations.
OptionChoice choice_for_durations(const EnergyProblem& problem, const std::vector<std::int64_t>& durations);

}  // namespace perseus
