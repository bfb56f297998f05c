// The paper's strong-scaling configurations, emulated explicitly (every pipeline):
// 1,024 / 2,048 / 4,096 / 8,192 GPUs = 16 / 32 / 64 / 128 pipelines of 8 stages x tensor
// parallel 8 with 96 / 48 / 24 / 12 microbatches, GPT-3 175B on A100-SXM, one straggler
// pipeline 1.2x slower running all-max while the others run Perseus's plan for
// T_opt = min(T*, T'), with 10 ms clock switches and links between stages.
// Target: the 8,192-GPU iteration in under 1 s and 2 GB.
//   ./build/src/perseus/emulator/emulator_bench --benchmark_repetitions=10 \
//       --benchmark_report_aggregates_only=true
// (the median is the figure to quote; peak_rss_mb is the whole process's peak).
#include <sys/resource.h>

#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <sstream>
#include <vector>

#include "perseus/emulator/baselines.hpp"
#include "perseus/emulator/emulation_output.hpp"
#include "perseus/emulator/emulator.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/solver/crawl.hpp"
#include "perseus/solver/frontier.hpp"

namespace perseus {
namespace {

struct Workload {
  EnergyProblem problem;
  ExecutionPlan plan;            // what the non-straggler pipelines run: Perseus's plan for T_opt
  ExecutionPlan straggler_plan;  // all-max at the profile's top clock
  EmulationConfig config;
};

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

Workload make_workload(int pipelines, int microbatches) {
  const Profile profile = Profile::read_csv(PERSEUS_SOURCE_DIR "/data/profiles/gpt3-175b+a100-sxm.csv");
  std::vector<Warning> warnings;
  EnergyProblem problem = make_problem(profile, {ScheduleKind::k1F1B, 8, microbatches, 1, false},
                                       OptionsConfig{0.001, 83.64, {}}, &warnings);
  const auto clocks = std::make_shared<const FrequencyTable>(FrequencyTable::from_profile(problem, profile));
  ExecutionPlan straggler_plan = plan_from_clocks(problem, all_max(problem, *clocks).clock_mhz, clocks);
  const double slowdown = 1.2;
  const double t_prime = slowdown * critical_path_length<double>(problem.dag, straggler_plan.time_s);
  const Frontier frontier = build_frontier(problem, crawl_frontier(problem));
  const FrontierPoint* chosen = select_for_deadline(frontier, t_prime);
  ExecutionPlan plan = plan_from_choice(problem, (chosen ? *chosen : frontier.t_min_point()).option_choice(), clocks);
  EmulationConfig config;
  config.data_parallel = pipelines;
  config.tensor_parallel = 8;
  config.switch_latency_s = 0.01;
  config.p2p = {5e-6, 25e9};  // NVLink-class hop between stages
  config.activation_bytes = 2.0 * 2048 * 12288 * 1;  // bf16 activations of one microbatch
  config.gradient_bytes = config.activation_bytes;
  config.allreduce = {10e-6, 25e9};
  config.allreduce_bytes = 2.0 * 175e9 / 8;  // one stage's bf16 gradients
  config.stragglers = {{pipelines / 2, slowdown, 0.0}};
  return {std::move(problem), std::move(plan), std::move(straggler_plan), std::move(config)};
}

// Built once per shape: Google Benchmark calls a benchmark once per repetition.
const Workload& workload(int pipelines, int microbatches) {
  static std::map<std::pair<int, int>, std::unique_ptr<Workload>> cache;
  auto& slot = cache[{pipelines, microbatches}];
  if (!slot) slot = std::make_unique<Workload>(make_workload(pipelines, microbatches));
  return *slot;
}

void BM_StrongScaling(benchmark::State& state) {
  const Workload& w = workload(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  std::size_t instructions = 0;
  double iteration = 0.0;
  for (auto _ : state) {
    const EmulationResult result = emulate(w.problem, w.plan, w.config, &w.straggler_plan);
    instructions = result.timeline.size();
    iteration = result.iteration_time_s;
    benchmark::DoNotOptimize(result.energy.total_j());
  }
  state.counters["gpus"] = static_cast<double>(w.config.data_parallel * 8 * w.config.tensor_parallel);
  state.counters["instructions"] = static_cast<double>(instructions);
  state.counters["iteration_s"] = iteration;
  state.counters["peak_rss_mb"] = peak_rss_mb();
}
BENCHMARK(BM_StrongScaling)
    ->ArgNames({"pipelines", "microbatches"})
    ->Args({16, 96})
    ->Args({32, 48})
    ->Args({64, 24})
    ->Args({128, 12})
    ->Unit(benchmark::kMillisecond);

// The 8,192-GPU iteration plus its JSON and per-GPU CSV timeline (what `perseus emulate
// --out --per-gpu` writes, trace aside).
void BM_StrongScalingWithOutput(benchmark::State& state) {
  const Workload& w = workload(128, 12);
  std::size_t bytes = 0;
  for (auto _ : state) {
    const EmulationResult result = emulate(w.problem, w.plan, w.config, &w.straggler_plan);
    std::ostringstream json, csv;
    write_emulation_json(json, result);
    write_timeline_csv(csv, result, true);
    bytes = static_cast<std::size_t>(json.tellp() + csv.tellp());
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["output_mb"] = static_cast<double>(bytes) / (1 << 20);
  state.counters["peak_rss_mb"] = peak_rss_mb();
}
BENCHMARK(BM_StrongScalingWithOutput)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace perseus

BENCHMARK_MAIN();
