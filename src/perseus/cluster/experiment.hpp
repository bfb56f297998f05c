// Simulated experiments as the dissertation runs them (docs/cluster.md): policies (each aware or
// agnostic) x arrival rates x seeds on one trace kind, each a simulate() run; what
// `perseus cluster simulate` and its report show.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "perseus/cluster/simulator.hpp"

namespace perseus::cluster {

enum class TraceKind : std::uint8_t { kContinuousSingle, kContinuousMultiple, kStatic, kCost, kFile };
std::string_view to_string(TraceKind kind);
// "continuous-single", "continuous-multiple", "static", "cost" (cost_trace); anything else is a
// trace CSV's path.
TraceKind parse_trace(std::string_view name);

struct ExperimentSpec {
  std::vector<PolicySpec> variants;   // at least one
  // The hierarchical variants' entities (a trace file's `entity` column names them; empty: its
  // names, each of weight 1 with fairness, or one entity when it has none).
  std::vector<Entity> entities;
  TraceKind trace = TraceKind::kContinuousSingle;
  std::string trace_file;             // kFile
  std::vector<double> jobs_per_hour;  // continuous traces: one run per rate
  std::string reference_gpu;          // drawn jobs' durations are on this type; empty: default_reference_gpu
  int seeds = 1;
  std::uint64_t first_seed = 1;
  // Continuous: the jobs measured are [window_begin, window_end) of the arrivals (Gavel: 4000 to
  // 5000), arrivals going on until they finish. Static and cost: `window_end` jobs at time 0.
  // File: every job, or the window when window_end >= 0.
  int window_begin = 4000, window_end = 5000;
  SimulationSpec simulation;          // workers, rounds, overhead, time limit (its policy is set per run)
  std::function<void(const std::string& what)> progress;
};

struct ExperimentRun {
  PolicySpec variant;
  double jobs_per_hour = 0.0;         // 0: static or file trace
  std::uint64_t seed = 0;
  SimulationResult result;
  double wall_s = 0.0;
};

// Runs every variant x rate x seed (the same trace for every variant at one rate and seed).
// InputError for no variants, no rate for a continuous trace, or seeds < 1; what simulate throws.
std::vector<ExperimentRun> run_experiment(const ExperimentSpec& spec, const ThroughputMatrix& matrix);

// "max-min-fairness (aware)", "max-min-fairness (aware, energy 5%)".
std::string variant_name(const PolicySpec& variant);

}  // namespace perseus::cluster
