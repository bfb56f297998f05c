// The baselines Perseus is compared with, as plans for an EnergyProblem (option choices),
// to be emulated exactly like Perseus's own plans.
//
// "The same frequency" across operations: operations are measured at their own clocks and
// the Pareto filter may have dropped some, so an operation asked to run at f MHz runs its
// lowest kept clock at or above f -- never slower than asked (the filter drops an option
// only for one that is faster and cheaper, which in practice is a higher clock) -- or its
// highest clock when f is above all of them. Constant-time operations have one option.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "perseus/emulator/emulator.hpp"
#include "perseus/solver/problem.hpp"

namespace perseus {

struct BaselinePlan {
  std::string method;   // "AllMax", "ZeusGlobal", "ZeusPerStage", "EnvPipe"
  std::string setting;  // what this point of the method's scan is, e.g. "1260 MHz"
  OptionChoice choice;
  std::vector<int> stage_clock_mhz;  // the clock asked of each stage (ZeusGlobal, ZeusPerStage); else empty
};

// The option of `operation` for "frequency f" (the rule above).
std::int32_t option_at_frequency(const OperationOptions& operation, int frequency_mhz);

// Every instruction at its highest clock.
BaselinePlan all_max(const EnergyProblem& problem);

// One clock for every GPU, scanned over every clock any operation has; fastest first.
std::vector<BaselinePlan> zeus_global(const EnergyProblem& problem);

// One clock per stage (device), chosen so that stages' forward times balance: the
// bottleneck stage (longest forward at its highest clock) scans its clocks, and every other
// stage takes its lowest clock whose forward time is no longer than the bottleneck's. With
// interleaving a device's forward time is the sum over its chunks. Fastest first.
std::vector<BaselinePlan> zeus_per_stage(const EnergyProblem& problem);

// EnvPipe's heuristic: the last stage is taken as the bottleneck and stays at its highest
// clock; starting from all-max, every instruction of the other stages, from the stage next
// to the last towards the first and in execution order within a stage, is slowed to its
// lowest clock that fits in its slack, so the iteration stays as fast as all-max. A point.
BaselinePlan envpipe(const EnergyProblem& problem);

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
                                              const EmulationConfig& config = {});

}  // namespace perseus
