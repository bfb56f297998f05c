#include "perseus/cluster/experiment.hpp"

#include <chrono>

#include <fmt/format.h>

namespace perseus::cluster {

std::string_view to_string(TraceKind kind) {
  switch (kind) {
    case TraceKind::kContinuousSingle: return "continuous-single";
    case TraceKind::kContinuousMultiple: return "continuous-multiple";
    case TraceKind::kStatic: return "static";
    case TraceKind::kCost: return "cost";
    case TraceKind::kFile: return "file";
  }
  return "?";
}

TraceKind parse_trace(std::string_view name) {
  if (name == "continuous-single") return TraceKind::kContinuousSingle;
  if (name == "continuous-multiple") return TraceKind::kContinuousMultiple;
  if (name == "static") return TraceKind::kStatic;
  if (name == "cost") return TraceKind::kCost;
  return TraceKind::kFile;
}

std::string variant_name(const PolicySpec& variant) {
  return fmt::format("{} ({}{}{})", to_string(variant.policy), variant.heterogeneity_aware ? "aware" : "agnostic",
                     variant.space_sharing ? ", space sharing" : "", variant.energy_slack ? fmt::format(", energy {:g}%", 100.0 * *variant.energy_slack) : std::string());
}

std::vector<ExperimentRun> run_experiment(const ExperimentSpec& spec, const ThroughputMatrix& matrix) {
  if (spec.variants.empty()) throw InputError("an experiment needs at least one policy");
  if (spec.seeds < 1) throw InputError(fmt::format("{} seeds: must be at least 1", spec.seeds));
  const bool continuous = spec.trace == TraceKind::kContinuousSingle || spec.trace == TraceKind::kContinuousMultiple;
  const bool multi = spec.trace == TraceKind::kContinuousMultiple;
  if (continuous && spec.jobs_per_hour.empty()) throw InputError("a continuous trace needs an arrival rate (jobs/hour)");
  if (spec.window_end >= 0 && spec.window_end <= spec.window_begin)
    throw InputError(fmt::format("measured jobs [{}, {}): must be a non-empty range", spec.window_begin, spec.window_end));
  const std::string reference = spec.reference_gpu.empty() ? default_reference_gpu(matrix) : spec.reference_gpu;
  std::vector<TraceJob> file_jobs;
  std::vector<Entity> entities = spec.entities;
  if (spec.trace == TraceKind::kFile) file_jobs = read_trace_csv(spec.trace_file, matrix, &entities);
  const std::vector<double> rates = continuous ? spec.jobs_per_hour : std::vector<double>{0.0};
  const int total = static_cast<int>(rates.size()) * spec.seeds * static_cast<int>(spec.variants.size());

  std::vector<ExperimentRun> runs;
  for (double rate : rates)
    for (int s = 0; s < spec.seeds; ++s)
      for (const PolicySpec& variant : spec.variants) {
        const std::uint64_t seed = spec.first_seed + static_cast<std::uint64_t>(s);
        SimulationSpec sim = spec.simulation;
        sim.policy = variant;
        if (variant.policy == PolicyKind::kHierarchical) sim.policy.entities = entities;
        JobSource source;
        switch (spec.trace) {
          case TraceKind::kContinuousSingle:
          case TraceKind::kContinuousMultiple:
            source = poisson_source(matrix, rate, seed, multi, reference);
            sim.window_begin = spec.window_begin, sim.window_end = spec.window_end;
            if (sim.window_end < 0) throw InputError("a continuous trace never ends: give the jobs to measure");
            break;
          case TraceKind::kStatic:
            source = list_source(static_trace(matrix, spec.window_end < 0 ? 100 : spec.window_end, seed, multi, reference));
            sim.window_begin = 0, sim.window_end = -1;
            break;
          case TraceKind::kCost:
            source = list_source(cost_trace(matrix, spec.window_end < 0 ? 500 : spec.window_end, seed, reference));
            sim.window_begin = 0, sim.window_end = -1;
            break;
          case TraceKind::kFile:
            source = list_source(file_jobs);
            sim.window_begin = spec.window_end >= 0 ? spec.window_begin : 0, sim.window_end = spec.window_end;
            break;
        }
        if (spec.progress)
          spec.progress(fmt::format("run {} of {}: {}{}, seed {}", runs.size() + 1, total, variant_name(variant),
                                    continuous ? fmt::format(", {:g} jobs/hour", rate) : "", seed));
        const auto start = std::chrono::steady_clock::now();
        ExperimentRun run{sim.policy, rate, seed, simulate(std::move(source), matrix, sim), 0.0};
        run.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        runs.push_back(std::move(run));
      }
  return runs;
}

}  // namespace perseus::cluster
