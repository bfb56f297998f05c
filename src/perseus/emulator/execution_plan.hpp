// A plan resolved for execution: for every DAG node of a problem, the clock it runs at and
// the measured time and energy it takes there. Built from an option choice (the solver's
// and the baselines' output) or from per-stage frequency lists (a freqs_pipeline file).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "perseus/emulator/frequency_table.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/model/frequencies.hpp"
#include "perseus/solver/problem.hpp"

namespace perseus {

struct ExecutionPlan {
  std::vector<std::int32_t> frequency_mhz;  // per DAG node: the planned clock
  std::vector<double> time_s;               // per DAG node: measured time at that clock
  std::vector<double> energy_j;             // per DAG node: measured energy at that clock
  // Figures at clocks the plan did not choose, for instructions that start before their
  // frequency switch has taken effect. Never null in a plan made by the functions below.
  std::shared_ptr<const FrequencyTable> clocks;

  std::size_t size() const { return time_s.size(); }
};

// Every node runs its chosen option's measurement. `clocks` defaults to the problem's own
// options. Throws InputError when the choice does not have one valid option index per node.
ExecutionPlan plan_from_choice(const EnergyProblem& problem, const OptionChoice& choice,
                               std::shared_ptr<const FrequencyTable> clocks = nullptr);

// Every node runs at its clock in `clock_mhz` (one per DAG node, in node order), with the
// figures `clocks` measured there; constant-time operations take their one measurement
// whatever the clock. Throws InputError for a wrong size or a clock `clocks` lacks.
ExecutionPlan plan_from_clocks(const EnergyProblem& problem, const std::vector<std::int32_t>& clock_mhz,
                               std::shared_ptr<const FrequencyTable> clocks);

// Every node runs at the frequency its stage's list gives it, taking the figures `clocks`
// (typically FrequencyTable::from_profile) has measured there. The lists must follow the
// schedule: one per stage, one entry per instruction, the same instruction names in the same
// order. Constant-time operations ignore their frequency. A frequency the table has not
// measured is an InputError unless `interpolate`, which allows clocks between two measured
// ones (never outside the measured range).
ExecutionPlan plan_from_frequencies(const EnergyProblem& problem, const PipelineFrequencies& frequencies,
                                    std::shared_ptr<const FrequencyTable> clocks, bool interpolate = false);

}  // namespace perseus
