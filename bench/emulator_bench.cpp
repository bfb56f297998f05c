// The paper's strong-scaling configurations, emulated explicitly (every pipeline):
// 1,024 / 2,048 / 4,096 / 8,192 GPUs = 16 / 32 / 64 / 128 pipelines of 8 stages x tensor
// parallel 8 with 96 / 48 / 24 / 12 microbatches, GPT-3 175B on A100-SXM, one straggler
// pipeline 1.2x slower running all-max while the others run Perseus's plan for
// T_opt = min(T*, T'), with 10 ms clock switches and links between stages.
// Target: the 8,192-GPU iteration in under 1 s and 2 GB.
// BM_ClusterScale: 8,192 and 131,072 GPUs (128 and 2,048 pipelines of 12 microbatches),
// the emulation plus every file `perseus emulate --out` writes (into a stream that only
// counts bytes), with the default detail (the notable pipelines' timelines) and with
// `--trace all`. Target: 131,072 GPUs in under 2 s and 500 MB.
//   ./build/bench/emulator_bench --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
// (the median is the figure to quote; peak_rss_mb is the whole process's peak so far: the
// benchmarks run in the order registered, the ones that keep every timeline last).
#include <sys/resource.h>

#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <ostream>
#include <sstream>
#include <streambuf>
#include <vector>

#include "perseus/emulator/baselines.hpp"
#include "perseus/emulator/emulation_output.hpp"
#include "perseus/emulator/emulator.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/report/plots.hpp"
#include "perseus/report/trace.hpp"
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

// A stream that keeps nothing and counts what it is given: writing the output costs the
// formatting, not the disk.
class CountingBuffer : public std::streambuf {
 public:
  std::size_t bytes = 0;

 protected:
  std::streamsize xsputn(const char*, std::streamsize n) override {
    bytes += static_cast<std::size_t>(n);
    return n;
  }
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof())) ++bytes;
    return traits_type::not_eof(c);
  }
};

// Every file `perseus emulate --out` writes, in bytes: emulation.json, devices.csv,
// timeline.csv (per GPU when `per_gpu`), trace.json, timeline.svg and the pipeline files.
std::size_t write_outputs(const EmulationResult& result, bool per_gpu = false) {
  CountingBuffer counter;
  std::ostream out(&counter);
  write_emulation_json(out, result);
  write_devices_csv(out, result);
  write_timeline_csv(out, result, per_gpu);
  report::write_chrome_trace(out, result);
  out << report::timeline_svg(result, {});
  for (const int p : result.detailed_pipelines) write_pipeline_json(out, result, p);
  return counter.bytes;
}

// 8,192 and 131,072 GPUs, emulated and written as `perseus emulate --out` does: the notable
// pipelines' timelines (detail 1) or every one (detail 0, `--trace all`).
void BM_ClusterScale(benchmark::State& state) {
  const Workload& w = workload(static_cast<int>(state.range(0)), 12);
  EmulationConfig config = w.config;
  config.detail = state.range(1) ? TimelineDetail::kNotable : TimelineDetail::kAll;
  config.detail_pipelines = {0};  // what timeline.svg draws
  std::size_t bytes = 0, instructions = 0;
  for (auto _ : state) {
    const EmulationResult result = emulate(w.problem, w.plan, config, &w.straggler_plan);
    bytes = write_outputs(result);
    instructions = result.timeline.size();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["gpus"] = static_cast<double>(config.data_parallel * 8 * config.tensor_parallel);
  state.counters["instructions_kept"] = static_cast<double>(instructions);
  state.counters["output_mb"] = static_cast<double>(bytes) / (1 << 20);
  state.counters["peak_rss_mb"] = peak_rss_mb();
}
BENCHMARK(BM_ClusterScale)
    ->ArgNames({"pipelines", "notable"})
    ->Args({128, 1})
    ->Args({2048, 1})
    ->Unit(benchmark::kMillisecond);

// The 8,192-GPU iteration plus every pipeline's JSON and the per-GPU CSV timeline (what
// `perseus emulate --out --trace all --per-gpu` writes, trace and pictures aside).
void BM_StrongScalingWithOutput(benchmark::State& state) {
  const Workload& w = workload(128, 12);
  std::size_t bytes = 0;
  for (auto _ : state) {
    const EmulationResult result = emulate(w.problem, w.plan, w.config, &w.straggler_plan);
    CountingBuffer counter;
    std::ostream out(&counter);
    write_emulation_json(out, result);
    for (const int p : result.detailed_pipelines) write_pipeline_json(out, result, p);
    write_timeline_csv(out, result, true);
    bytes = counter.bytes;
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["output_mb"] = static_cast<double>(bytes) / (1 << 20);
  state.counters["peak_rss_mb"] = peak_rss_mb();
}
BENCHMARK(BM_StrongScalingWithOutput)->Unit(benchmark::kMillisecond);

// Every timeline kept and written, last: its peak RSS would otherwise hide the others'.
BENCHMARK(BM_ClusterScale)
    ->Name("BM_ClusterScaleTraceAll")
    ->ArgNames({"pipelines", "notable"})
    ->Args({128, 0})
    ->Args({2048, 0})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace perseus

BENCHMARK_MAIN();
