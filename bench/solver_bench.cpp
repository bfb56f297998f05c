// Google Benchmark: the whole solve (crawl + frontier on measured data) and the crawl alone
// for the two cases the issue names, the crawl on a 32-stage pipeline, the crawl also on LEMON's Preflow (the library
// max flow our warm-started Dinic replaces; see max_flow.hpp), and PlanRefiner::repair (the
// refinement's and certification's minimum-cut speed-ups) on 8 x 12 and 8 x 96. Single-threaded. Quote medians:
//   ./build/bench/solver_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include "perseus/solver/crawl.hpp"
#include "perseus/solver/frontier.hpp"
#include "perseus/solver/refine.hpp"
#include "workloads.hpp"

namespace perseus::bench {
namespace {

void run(benchmark::State& state, const Workload& w, bool with_frontier,
         MaxFlowAlgorithm max_flow = MaxFlowAlgorithm::kDinic, int repeat_stages = 1) {
  const Profile profile = repeated_stages(Profile::read_csv(profile_path(w)), repeat_stages);
  const EnergyProblem problem =
      make_workload_problem(w, profile, profile.num_stages(), static_cast<int>(state.range(0)));
  std::size_t steps = 0;
  for (auto _ : state) {
    CrawlOptions options;
    options.max_flow = max_flow;
    const CrawlResult crawl = crawl_frontier(problem, options);
    steps = crawl.steps.size();
    if (with_frontier) {
      const Frontier frontier = build_frontier(problem, crawl);
      benchmark::DoNotOptimize(frontier.points.size());
    }
  }
  state.counters["steps"] = static_cast<double>(steps);
  state.counters["nodes"] = static_cast<double>(problem.dag.num_nodes());
}

void BM_BloomA100_Solve(benchmark::State& s) { run(s, bundled_workloads()[0], true); }
void BM_BloomA100_Crawl(benchmark::State& s) { run(s, bundled_workloads()[0], false); }
void BM_Gpt3A40_Solve(benchmark::State& s) { run(s, bundled_workloads()[3], true); }
void BM_Gpt3A40_Crawl(benchmark::State& s) { run(s, bundled_workloads()[3], false); }
// 32 stages (gpt3-175b A100's 8 four times over): the shape `perseus plan` crawls on 175B-class
// models, where the max flows' searches meet thousands of nodes each.
void BM_Gpt3A100_CrawlLongPipeline(benchmark::State& s) {
  run(s, bundled_workloads()[1], false, MaxFlowAlgorithm::kDinic, 4);
}
void BM_BloomA100_CrawlLemon(benchmark::State& s) {
  run(s, bundled_workloads()[0], false, MaxFlowAlgorithm::kLemonPreflow);
}
void BM_Gpt3A40_CrawlLemon(benchmark::State& s) {
  run(s, bundled_workloads()[3], false, MaxFlowAlgorithm::kLemonPreflow);
}

// PlanRefiner::repair from the slowest plan, reclaimed, to deadlines `state.range(1)` per mille
// of the way from it towards T_min (30-180 minimum cuts): its work (PlanRefiner::work, 8 a
// cut), and the repaired plan's effective energy (the same from any faster implementation).
void repair(benchmark::State& state, const Workload& w) {
  const EnergyProblem problem = make_workload_problem(w, Profile::read_csv(profile_path(w)), 8, static_cast<int>(state.range(0)));
  const PlanRefiner refiner(problem);
  const OptionChoice slowest = refiner.reclaim_slack_at_own_time(slowest_choice(problem));
  const double t_slow = refiner.measured_time(slowest), t_fast = refiner.measured_time(fastest_choice(problem));
  const double deadline = t_slow - (t_slow - t_fast) * static_cast<double>(state.range(1)) / 1000.0;
  double energy = 0.0, work = 0.0;
  for (auto _ : state) {
    const double before = refiner.work();
    const std::optional<OptionChoice> repaired = refiner.repair(slowest, deadline);
    work = refiner.work() - before;
    energy = repaired ? refiner.effective_energy(*repaired) : -1.0;
    benchmark::DoNotOptimize(energy);
  }
  state.counters["nodes"] = static_cast<double>(problem.dag.num_nodes());
  state.counters["work"] = work;
  state.counters["effective_J"] = energy;
}
void BM_Gpt3A100_Repair(benchmark::State& s) { repair(s, bundled_workloads()[1]); }
void BM_Gpt3A40_Repair(benchmark::State& s) { repair(s, bundled_workloads()[3]); }

BENCHMARK(BM_BloomA100_Solve)->Arg(12)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BloomA100_Crawl)->Arg(12)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Gpt3A40_Solve)->Arg(12)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_Gpt3A40_Crawl)->Arg(12)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_Gpt3A100_CrawlLongPipeline)->Arg(48)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_BloomA100_CrawlLemon)->Arg(12)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Gpt3A40_CrawlLemon)->Arg(12)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_Gpt3A100_Repair)->Args({12, 50})->Args({96, 50})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Gpt3A40_Repair)->Args({96, 50})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace perseus::bench

BENCHMARK_MAIN();
