// An energy-scheduling problem: a pipeline's DAG with, for every node, the operation
// options it may run with. Plans are expressed as one option index per DAG node.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "perseus/cost/operation_options.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/schedule/dag.hpp"

namespace perseus {

// Option index per DAG node (into problem.options_of(node).options).
using OptionChoice = std::vector<std::int32_t>;

struct EnergyProblem {
  Dag dag;
  std::vector<OperationOptions> operations;  // one per (virtual stage, instruction kind)
  std::vector<std::int32_t> node_operation;  // DAG node -> index into `operations`
  double unit_time = 0.001;                  // tau, s
  double p_blocking = 0.0;                   // W

  const OperationOptions& options_of(Dag::NodeId n) const { return operations[node_operation[n]]; }
  const Option& chosen(Dag::NodeId n, const OptionChoice& choice) const {
    return options_of(n).options[choice[n]];
  }
  int num_gpus() const { return dag.num_stages(); }
};

// Binds a schedule's DAG to a profile's options. Throws InputError when the profile lacks
// an operation the schedule needs (naming stage and instruction) or has stages the schedule
// does not. Recompute instructions use the forward options when the profile has none;
// load instructions need `load` rows in the profile. With interleaving (v chunks) the profile
// may have S*v stages (one per virtual stage) or S (each chunk then takes 1/v of its stage's
// time and energy).
EnergyProblem make_problem(const Profile& profile, const ScheduleSpec& spec,
                           const OptionsConfig& config, std::vector<Warning>* warnings);

// What a plan costs on the measured data (no fitting, no quantisation).
struct MeasuredFigures {
  double time_s = 0.0;              // critical path over measured option times
  double energy_j = 0.0;            // computation + blocking: the iteration energy
  double computation_energy_j = 0.0;  // sum of measured option energies
  double blocking_energy_j = 0.0;     // p_blocking * (S * time - sum of option times)
};

MeasuredFigures evaluate_measured(const EnergyProblem& problem, const OptionChoice& choice);
// The same with the plan's critical path (its time_s) already known, as
// PlanRefiner::reclaim_slack_at_own_time gives it: one pass over the DAG fewer (NaN: not
// known, computed here).
MeasuredFigures evaluate_measured(const EnergyProblem& problem, const OptionChoice& choice, double critical_path_s);

// The same figures for "all-max": every instruction at its highest measured clock
// (OperationOptions::highest_clock), which the Pareto filter may have dropped.
MeasuredFigures evaluate_highest_clock(const EnergyProblem& problem);

// Every operation at its fastest option: the fastest plan, at T_min.
OptionChoice fastest_choice(const EnergyProblem& problem);
// All-slowest plan: every operation at its slowest option, the least effective energy. (The
// crawl starts from the reference's slowest options, choice_for_durations(initial_durations).)
OptionChoice slowest_choice(const EnergyProblem& problem);

// Relaxed (continuous) node durations rounded to each node's options: `down`, the slowest
// option no slower than the duration (the plan meets every deadline the durations meet);
// `up`, the fastest option no faster (cheaper, and usually too slow: a start for a repair).
// A duration within tolerance_s of an option counts as that option.
// Precondition: durations_s has one entry per DAG node. O(nodes * log options).
struct RoundedChoice {
  OptionChoice down;
  OptionChoice up;
};
RoundedChoice round_to_options(const EnergyProblem& problem, std::span<const double> durations_s,
                               double tolerance_s = 0.0);
// round_to_options(problem, durations_s, tolerance_s).down alone, in a third of the searches
// (OperationOptions::round_down). O(nodes * log options).
OptionChoice round_down_to_options(const EnergyProblem& problem, std::span<const double> durations_s,
                                   double tolerance_s = 0.0);

// Per operation, its options at the corners of its effective-energy hull, fastest first
// (hull_corner_options at the problem's p_blocking).
using HullCorners = std::vector<std::vector<std::int32_t>>;
HullCorners hull_corners(const EnergyProblem& problem);
// Relaxed durations rounded down to hull corners: per node, the slowest corner of its
// operation's hull no slower than the duration (within tolerance_s), the fastest corner when
// none is. Like RoundedChoice::down the plan meets every deadline the durations meet.
// Preconditions: durations_s has one entry per DAG node; `corners` is hull_corners(problem).
// O(nodes * corners).
OptionChoice round_down_to_corners(const EnergyProblem& problem, const HullCorners& corners,
                                   std::span<const double> durations_s, double tolerance_s = 0.0);

}  // namespace perseus
