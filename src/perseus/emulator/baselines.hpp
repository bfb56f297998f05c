// The baselines Perseus is compared with, as clock plans for an EnergyProblem, to be
// emulated exactly like Perseus's own plans.
//
// Baselines set clocks, not solver options: each runs at the clocks it asks for, with the
// figures measured there. Pass FrequencyTable::from_profile (every measured clock) to run
// them as they run on real GPUs; FrequencyTable::from_problem limits them to the clocks the
// solver's Pareto filter kept (no profile at hand).
//
// "The same frequency" across operations: an operation asked to run at f MHz runs f where
// it was measured there, otherwise its lowest measured clock above f -- never slower than
// asked -- or its highest clock when f is above all of them. Constant-time operations (one
// measurement) run at their only point.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "perseus/emulator/emulator.hpp"
#include "perseus/emulator/frequency_table.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/solver/problem.hpp"

namespace perseus {

struct BaselinePlan {
  std::string method;   // "AllMax", "ZeusGlobal", "ZeusPerStage", "EnvPipe"
  std::string setting;  // what this point of the method's scan is, e.g. "1260 MHz"
  std::vector<std::int32_t> clock_mhz;  // per DAG node
  std::vector<int> stage_clock_mhz;     // the clock asked of each stage (ZeusGlobal, ZeusPerStage); else empty
};

// The clock `operation` (an index of problem.operations and of `clocks`) runs when asked
// for `frequency_mhz` (the rule above).
int clock_for(const FrequencyTable& clocks, std::size_t operation, int frequency_mhz);

// Every instruction at its highest clock: how training runs by default.
BaselinePlan all_max(const EnergyProblem& problem, const FrequencyTable& clocks);

// One clock for every GPU, scanned over every clock any operation has; fastest first.
std::vector<BaselinePlan> zeus_global(const EnergyProblem& problem, const FrequencyTable& clocks);

// ZeusGlobal at one clock, as `perseus emulate --baseline zeus-global:MHZ` runs it. The clock
// must be one some operation was measured at (operations not measured there follow the rule
// above); with `interpolate`, any clock inside the measured range, each operation linear
// between its two measured neighbours where it has them. Throws InputError naming the clock
// and the measured range otherwise: running 3000 MHz as the top clock would report figures
// no GPU can deliver.
ExecutionPlan zeus_global_plan(const EnergyProblem& problem, std::shared_ptr<const FrequencyTable> clocks,
                               int frequency_mhz, bool interpolate = false);

// One clock per stage (device), chosen so that stages' forward times balance: the
// bottleneck stage (longest forward at its highest clock) scans its clocks, and every other
// stage takes its lowest clock whose forward time is no longer than the bottleneck's. With
// interleaving a device's forward time is the sum over its chunks. Fastest first.
std::vector<BaselinePlan> zeus_per_stage(const EnergyProblem& problem, const FrequencyTable& clocks);

// EnvPipe's heuristic: the last stage is taken as the bottleneck and stays at its highest
// clock; starting from all-max, every instruction of the other stages, from the stage next
// to the last towards the first and in execution order within a stage, is slowed to its
// lowest clock that fits in its slack, so the iteration stays as fast as all-max. A point.
BaselinePlan envpipe(const EnergyProblem& problem, const FrequencyTable& clocks);

// A baseline plan emulated.
struct BaselinePoint {
  BaselinePlan plan;
  double time_s = 0.0;    // emulated iteration time
  double energy_j = 0.0;  // emulated energy of all GPUs
  bool pareto = false;    // no other point of the list is at least as fast and as cheap, one strictly
};

// Emulates every plan under `config` (the same way as Perseus's plans) and marks the
// Pareto-optimal ones: a method's frontier is its Pareto-optimal points.
std::vector<BaselinePoint> evaluate_baselines(const EnergyProblem& problem, std::vector<BaselinePlan> plans,
                                              std::shared_ptr<const FrequencyTable> clocks,
                                              const EmulationConfig& config = {});

}  // namespace perseus
