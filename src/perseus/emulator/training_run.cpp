#include "perseus/emulator/training_run.hpp"

#include <cmath>
#include <random>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"

namespace perseus {

std::string_view to_string(StragglerPlacement placement) {
  switch (placement) {
    case StragglerPlacement::kFixed: return "fixed";
    case StragglerPlacement::kMoving: return "moving";
    case StragglerPlacement::kRandom: break;
  }
  return "random";
}

namespace {

void check(const EmulationConfig& cluster, const TrainingRunConfig& run, std::size_t candidates) {
  if (candidates == 0) throw InputError("training run: no candidate plans");
  if (!cluster.stragglers.empty()) {
    throw InputError("training run: the stragglers are drawn per iteration (TrainingRunConfig::stragglers), "
                     "not listed in the cluster's configuration");
  }
  if (run.iterations < 1 || run.iterations > 100'000) {
    throw InputError(fmt::format("training run: the number of iterations must be 1..100000, not {}", run.iterations));
  }
  const StragglerModel& m = run.stragglers;
  if (!(m.probability >= 0.0 && m.probability <= 1.0)) {
    throw InputError(fmt::format("training run: the straggler probability must be in [0, 1], not {:g}", m.probability));
  }
  if (!(m.slowdown_min >= 1.0 && m.slowdown_max <= 1000.0 && m.slowdown_min <= m.slowdown_max)) {
    throw InputError(fmt::format("training run: the straggler's slowdown range must lie in 1..1000, min <= max; "
                                 "got {:g}..{:g}", m.slowdown_min, m.slowdown_max));
  }
  if (m.placement != StragglerPlacement::kRandom && (m.pipeline < 0 || m.pipeline >= cluster.data_parallel)) {
    throw InputError(fmt::format("training run: straggler pipeline {} does not exist (there are {} pipelines)",
                                 m.pipeline, cluster.data_parallel));
  }
  if (m.move_every < 1) {
    throw InputError(fmt::format("training run: a moving straggler moves every >= 1 iterations, not {}", m.move_every));
  }
}

// Appends an iteration's samples to a run's curve.
void append_power(std::vector<PowerSample>& curve, const EmulationResult& r, int iteration, double start_s) {
  for (std::size_t i = 0; i < r.power_w.size(); ++i) {
    curve.push_back({iteration, start_s + static_cast<double>(i) * r.power_sample_s, r.power_sample_duration_s(i),
                     r.power_w[i]});
  }
}

}  // namespace

TrainingRunResult emulate_training_run(const EnergyProblem& problem, std::span<const ExecutionPlan> candidates,
                                       const ExecutionPlan& baseline, const EmulationConfig& cluster,
                                       const TrainingRunConfig& run, const std::function<void(int, int)>& progress) {
  check(cluster, run, candidates.size());
  const StragglerResponder responder(problem, candidates, cluster);
  const std::size_t fastest = responder.fastest();
  TrainingRunResult result;
  result.t_star_s = responder.t_star_s();
  result.fastest_plan = fastest;

  // The draws of the straggler come from one generator in a fixed order, so a seed gives the
  // same run whatever else changes.
  std::mt19937_64 rng(run.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const StragglerModel& model = run.stragglers;
  double perseus_clock = 0.0, baseline_clock = 0.0;
  for (int k = 0; k < run.iterations; ++k) {
    IterationOutcome outcome;
    outcome.iteration = k;
    const bool straggles = unit(rng) < model.probability;
    const double slowdown = model.slowdown_min + (model.slowdown_max - model.slowdown_min) * unit(rng);
    const int drawn = static_cast<int>(unit(rng) * cluster.data_parallel);
    EmulationConfig config = cluster;
    config.noise_seed = cluster.noise_seed ^ (run.seed * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(k));
    if (straggles) {
      switch (model.placement) {
        case StragglerPlacement::kFixed: outcome.straggler = model.pipeline; break;
        case StragglerPlacement::kRandom: outcome.straggler = std::min(drawn, cluster.data_parallel - 1); break;
        case StragglerPlacement::kMoving:
          outcome.straggler = (model.pipeline + k / model.move_every) % cluster.data_parallel;
          break;
      }
      outcome.slowdown = slowdown;
      config.stragglers = {Straggler{outcome.straggler, slowdown, 0.0}};
    }
    outcome.straggler_time_s = responder.straggler_time_s(config.stragglers);
    outcome.chosen_plan = responder.choose(outcome.straggler_time_s);

    const EmulationResult perseus = emulate(problem, candidates[outcome.chosen_plan], config, &candidates[fastest]);
    EmulationConfig plain = config;
    plain.power_sample_s = 0.0;
    const EmulationResult everywhere = emulate(problem, candidates[fastest], plain);
    const EmulationResult without = emulate(problem, baseline, config);
    outcome.perseus = {perseus.iteration_time_s, perseus.energy.total_j()};
    outcome.fastest_everywhere = {everywhere.iteration_time_s, everywhere.energy.total_j()};
    outcome.baseline = {without.iteration_time_s, without.energy.total_j()};
    append_power(result.perseus_power, perseus, k, perseus_clock);
    append_power(result.baseline_power, without, k, baseline_clock);
    perseus_clock += perseus.iteration_time_s;
    baseline_clock += without.iteration_time_s;
    result.perseus += outcome.perseus;
    result.fastest_everywhere += outcome.fastest_everywhere;
    result.baseline += outcome.baseline;
    result.iterations.push_back(outcome);
    if (progress) progress(k + 1, run.iterations);
  }
  return result;
}

}  // namespace perseus
