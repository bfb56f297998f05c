// Several iterations of a data-parallel job whose straggler changes from one iteration to the
// next: which pipeline straggles (if any) and by how much is drawn per iteration, instructions
// vary with per-instruction noise, and Perseus answers every iteration's straggler as
// StragglerResponder does (the stragglers run the fastest plan, the others the plan for
// T_opt = min(T*, T')), against the same iterations run without Perseus (a baseline plan on
// every pipeline, typically AllMax) and with Perseus's fastest plan everywhere (its intrinsic
// savings only: no answer to stragglers).
//
// Every iteration of the three runs sees the same straggler and the same noise (the noise is a
// function of the run's seed, the iteration, the pipeline and the instruction). Perseus learns a
// straggler's slowdown (as a straggler notice tells the server), not the noise. Cost: per
// iteration three emulations of the cluster and one of a single pipeline, after emulating each
// candidate once alone.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "perseus/emulator/emulator.hpp"

namespace perseus {

enum class StragglerPlacement : std::uint8_t {
  kFixed,   // always StragglerModel::pipeline
  kRandom,  // uniformly among the pipelines, each iteration anew
  kMoving,  // StragglerModel::pipeline first, then the next pipeline every `move_every` iterations
};
// "fixed", "random", "moving".
std::string_view to_string(StragglerPlacement placement);

struct StragglerModel {
  double probability = 1.0;  // an iteration has a straggler with this probability
  double slowdown_min = 1.2, slowdown_max = 1.2;  // its slowdown, uniform in [min, max]
  StragglerPlacement placement = StragglerPlacement::kRandom;
  int pipeline = 0;
  int move_every = 1;
};

struct TrainingRunConfig {
  int iterations = 10;
  std::uint64_t seed = 1;
  StragglerModel stragglers;
  // EmulationConfig::instruction_noise and power_sample_s come from the cluster's config; the
  // noise seed is derived from `seed` and the iteration.
};

// Time and energy of one iteration, or of a whole run.
struct RunFigures {
  double time_s = 0.0;
  double energy_j = 0.0;
  RunFigures& operator+=(const RunFigures& other) {
    time_s += other.time_s;
    energy_j += other.energy_j;
    return *this;
  }
};

struct IterationOutcome {
  int iteration = 0;
  int straggler = -1;  // the straggling pipeline, -1 when none did
  double slowdown = 1.0;
  double straggler_time_s = 0.0;  // T' (the fastest plan's time without a straggler)
  std::size_t chosen_plan = 0;    // what Perseus's non-stragglers ran
  RunFigures perseus, fastest_everywhere, baseline;
};

// A sampled cluster power curve over consecutive iterations (all GPUs, blocking included).
struct PowerSample {
  int iteration = 0;
  double start_s = 0.0;  // from the run's start
  double duration_s = 0.0;
  double power_w = 0.0;
};

struct TrainingRunResult {
  std::vector<IterationOutcome> iterations;
  RunFigures perseus, fastest_everywhere, baseline;  // sums over the iterations
  double t_star_s = 0.0;
  std::size_t fastest_plan = 0;
  // With EmulationConfig::power_sample_s > 0: each run's curve, iterations one after the other.
  std::vector<PowerSample> perseus_power, baseline_power;
  // Energy Perseus saves against the baseline, and against its own fastest plan everywhere
  // (what answering stragglers adds), as fractions of the other's energy.
  double savings() const { return baseline.energy_j > 0.0 ? 1.0 - perseus.energy_j / baseline.energy_j : 0.0; }
  double straggler_savings() const {
    return fastest_everywhere.energy_j > 0.0 ? 1.0 - perseus.energy_j / fastest_everywhere.energy_j : 0.0;
  }
};

// Runs `run.iterations` iterations of `cluster` (its data parallelism, links, overheads, noise
// and power sampling; its own `stragglers` must be empty: they are drawn here). `candidates` are
// Perseus's plans (a frontier's), `baseline` the plan of the job without Perseus. `progress(done,
// total)` after each iteration. Throws InputError for no candidates, a straggler list in
// `cluster`, fewer than 1 iteration (or more than 100,000), a probability outside [0, 1], a
// slowdown range not within 1..1000 or reversed, a pipeline outside the cluster, a move period
// below 1, and emulate's errors.
TrainingRunResult emulate_training_run(const EnergyProblem& problem, std::span<const ExecutionPlan> candidates,
                                       const ExecutionPlan& baseline, const EmulationConfig& cluster,
                                       const TrainingRunConfig& run,
                                       const std::function<void(int, int)>& progress = {});

}  // namespace perseus
