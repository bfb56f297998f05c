// The paper's strong-scaling configurations, emulated explicitly (every pipeline):
// 1,024 / 2,048 / 4,096 / 8,192 GPUs = 16 / 32 / 64 / 128 pipelines of 8 stages x tensor
// parallel 8 with 96 / 48 / 24 / 12 microbatches, GPT-3 175B on A100-SXM, one straggler.
// Target: the 8,192-GPU iteration in under 1 s.
#include <benchmark/benchmark.h>

#include <memory>
#include <sstream>
#include <vector>

#include "perseus/emulator/baselines.hpp"
#include "perseus/emulator/emulation_output.hpp"
#include "perseus/emulator/emulator.hpp"
#include "perseus/profile/profile.hpp"

namespace perseus {
namespace {

struct Workload {
  EnergyProblem problem;
  ExecutionPlan plan;            // what the non-straggler pipelines run: EnvPipe's plan
  ExecutionPlan straggler_plan;  // all-max
  EmulationConfig config;
};

Workload make_workload(int pipelines, int microbatches) {
  const Profile profile = Profile::read_csv(PERSEUS_SOURCE_DIR "/data/profiles/gpt3-175b+a100-sxm.csv");
  std::vector<Warning> warnings;
  EnergyProblem problem = make_problem(profile, {ScheduleKind::k1F1B, 8, microbatches, 1, false},
                                       OptionsConfig{0.001, 83.64, {}}, &warnings);
  const auto clocks = std::make_shared<const FrequencyTable>(FrequencyTable::from_profile(problem, profile));
  ExecutionPlan plan = plan_from_choice(problem, envpipe(problem).choice, clocks);
  ExecutionPlan straggler_plan = plan_from_choice(problem, all_max(problem).choice, clocks);
  EmulationConfig config;
  config.data_parallel = pipelines;
  config.tensor_parallel = 8;
  config.switch_latency_s = 0.01;
  config.p2p = {5e-6, 25e9};  // NVLink-class hop between stages
  config.activation_bytes = 2.0 * 2048 * 12288 * 1;  // bf16 activations of one microbatch
  config.gradient_bytes = config.activation_bytes;
  config.allreduce = {10e-6, 25e9};
  config.allreduce_bytes = 2.0 * 175e9 / 8;  // one stage's bf16 gradients
  config.stragglers = {{pipelines / 2, 1.2, 0.0}};
  return {std::move(problem), std::move(plan), std::move(straggler_plan), std::move(config)};
}

void BM_StrongScaling(benchmark::State& state) {
  const Workload w = make_workload(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  std::size_t instructions = 0;
  for (auto _ : state) {
    const EmulationResult result = emulate(w.problem, w.plan, w.config, &w.straggler_plan);
    instructions = result.timeline.size();
    benchmark::DoNotOptimize(result.energy.total_j());
  }
  state.counters["gpus"] = static_cast<double>(w.config.data_parallel * 8 * w.config.tensor_parallel);
  state.counters["instructions"] = static_cast<double>(instructions);
}
BENCHMARK(BM_StrongScaling)
    ->ArgNames({"pipelines", "microbatches"})
    ->Args({16, 96})
    ->Args({32, 48})
    ->Args({64, 24})
    ->Args({128, 12})
    ->Unit(benchmark::kMillisecond);

// The 8,192-GPU iteration plus its JSON and per-GPU CSV timeline (what the CLI would write).
void BM_StrongScalingWithOutput(benchmark::State& state) {
  const Workload w = make_workload(128, 12);
  for (auto _ : state) {
    const EmulationResult result = emulate(w.problem, w.plan, w.config, &w.straggler_plan);
    std::ostringstream json, csv;
    write_emulation_json(json, result);
    write_timeline_csv(csv, result, true);
    benchmark::DoNotOptimize(json.tellp() + csv.tellp());
  }
}
BENCHMARK(BM_StrongScalingWithOutput)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace perseus

BENCHMARK_MAIN();
