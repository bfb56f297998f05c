// The user-facing frontier: crawl points turned into plans on the measured options,
// improved where the crawl's quantised, fitted view left energy on the table, and kept
// only where Pareto-optimal in measured time and energy.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "perseus/solver/crawl.hpp"
#include "perseus/solver/problem.hpp"

namespace perseus {

struct FrontierPoint {
  std::vector<std::uint16_t> choice;  // option index per DAG node (compact OptionChoice)
  MeasuredFigures measured;           // what the plan really takes on the measured data
  double effective_energy_j = 0.0;    // energy - p_blocking * S * time: the part above idling
  std::int64_t crawl_step = -1;       // crawl step it came from; -1 for an end point
  std::int64_t planned_time_q = -1;   // the crawl's planned (quantised) time, -1 if none
  double fitted_energy_j = 0.0;       // the reference's figure for that crawl step (0 if none)

  OptionChoice option_choice() const { return {choice.begin(), choice.end()}; }
};

struct Frontier {
  // Pareto-optimal in (measured time, effective energy), fastest (T_min) first.
  std::vector<FrontierPoint> points;
  MeasuredFigures all_max;            // every instruction at its fastest option
  std::size_t candidates = 0;         // plans considered before the Pareto filter

  const FrontierPoint& t_min_point() const { return points.front(); }
  // The slowest point: the least effective energy, the minimum-energy schedule of T*.
  const FrontierPoint& t_star_point() const { return points.back(); }
};

// Improves plans on the measured options with the iteration time held at a deadline.
class PlanRefiner {
 public:
  explicit PlanRefiner(const EnergyProblem& problem);

  // Moves every operation to its cheapest option (least energy - p_blocking * time) that
  // still fits between its predecessors' finish and its successors' start. Alternates
  // backward and forward sweeps until nothing improves.
  OptionChoice reclaim_slack(OptionChoice choice, double deadline_s) const;

  // Local search on top of reclaim_slack: tries running each critical operation one or
  // two options faster, which frees time for others, and keeps the move if the plan's
  // energy drops. Costs about (critical operations) x reclaim_slack per round.
  OptionChoice local_search(OptionChoice choice, double deadline_s, int max_rounds = 8) const;

  // Sum over nodes of energy - p_blocking * time: the energy at a fixed deadline, up to
  // a constant.
  double effective_energy(const OptionChoice& choice) const;

 private:
  struct OperationIndex {
    std::vector<double> times;          // option times, ascending
    std::vector<std::int32_t> by_time;  // option index of each entry of `times`
    std::vector<std::int32_t> best;     // best[j]: least effective energy among by_time[0..j]
  };
  std::int32_t cheapest_within(Dag::NodeId n, std::int32_t current, double window) const;
  double time_of(Dag::NodeId n, std::int32_t option) const;
  double effective_of(Dag::NodeId n, std::int32_t option) const;

  const EnergyProblem& problem_;
  std::vector<OperationIndex> index_;  // per problem operation
};

// Convenience: PlanRefiner(problem).reclaim_slack(choice, deadline_s).
OptionChoice reclaim_slack(const EnergyProblem& problem, OptionChoice choice, double deadline_s);

struct FrontierOptions {
  bool refine = true;  // reclaim slack on every candidate (off: the crawl's plans as they are)
  // Local search on every candidate (and on each candidate's faster neighbour at its time)
  // when the DAG has at most this many nodes; 0 turns it off. Its cost grows with
  // nodes^2 x candidates, so large pipelines only reclaim slack.
  std::size_t local_search_max_nodes = 160;
  std::function<void(std::size_t done, std::size_t total)> progress;
};

// Candidates: the all-slowest plan, every crawl step's plan and the all-fastest plan.
Frontier build_frontier(const EnergyProblem& problem, const CrawlResult& crawl,
                        const FrontierOptions& options = {});

// The plan to run when the iteration may take up to `deadline_s` (a straggler's time T'):
// the slowest frontier point no slower than T_opt = min(T*, deadline), found by binary
// search in `times_fastest_first` (a frontier's times, ascending; the last is T*).
// nullopt if even T_min is slower than the deadline.
std::optional<std::size_t> select_for_deadline(const std::vector<double>& times_fastest_first,
                                               double deadline_s);
const FrontierPoint* select_for_deadline(const Frontier& frontier, double deadline_s);

// Energy of running `point` in an iteration stretched to `iteration_s` >= its time: the
// wait is spent blocking (formats.md, 'Iteration energy').
double energy_at(const EnergyProblem& problem, const FrontierPoint& point, double iteration_s);

}  // namespace perseus
