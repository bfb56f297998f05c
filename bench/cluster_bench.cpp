// The cluster scheduler's speed targets (issue 15, docs/cluster.md):
//   BM_Policy: one allocation for 2,048 jobs drawn as Gavel's simulator draws them, on 36 K80 +
//     36 P100 + 36 V100, per policy, aware and agnostic. Target: under 2 s.
//   BM_Trace: a 5,000-job continuous-single trace (jobs 4,000 to 5,000 measured, arrivals going
//     on until they finish) at 4 and 6 jobs/hour under LAS, aware and agnostic. Target: under 60 s.
//   BM_EnergyStage: the same 2,048 jobs on the planned matrix (data/cluster, 36 A40 + 36 A100 + 36
//     H100), each throughput policy aware, then its energy stage at 10% slack: the whole allocate()
//     with the stage, against the same target.
//   BM_EnergyTrace: a 5,000-job trace at 6 jobs/hour on the planned matrix, LAS aware, energy
//     stage off and at 10%.
//   BM_SpaceSharing: one allocation with space sharing (pairs of jobs on one GPU), per policy, for
//     128 to 2,048 jobs on Gavel's cluster: the dissertation's Fig. 5.14 scaling (LAS with space
//     sharing, 512 jobs in under 10 minutes there).
//   BM_SpaceSharingTrace: the 5,000-job trace at 6 jobs/hour, LAS aware with space sharing.
//   BM_Hierarchical: the hierarchical policy (water filling) for 128 to 2,048 jobs dealt to three
//     entities (weights 1, 2, 3; the second FIFO, the others fairness), aware, on 36 of each type
//     and on a cluster grown with the jobs (jobs / 4 of each type, as Fig. 5.14 grows it), without
//     and with space sharing: the dissertation's Fig. 5.14 (2,048 jobs in under 10 minutes there).
//   BM_HierarchicalTrace: the 5,000-job trace at 4 jobs/hour under the hierarchical policy.
//   ./build/bench/cluster_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
// (quote the median.)
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "perseus/cluster/jobs.hpp"
#include "perseus/cluster/policies.hpp"
#include "perseus/cluster/simulator.hpp"

namespace {

using namespace perseus::cluster;

const ThroughputMatrix& gavel() {
  static const ThroughputMatrix matrix = read_gavel_throughputs(bundled_gavel_throughputs());
  return matrix;
}

void BM_Policy(benchmark::State& state) {
  const auto policy = static_cast<PolicyKind>(state.range(0));
  const bool aware = state.range(1) != 0;
  const std::vector<Job> jobs = random_jobs(gavel(), 2048, 1);
  PolicySpec spec{policy, aware, default_prices(gavel()), {}};
  int solves = 0;
  for (auto _ : state) {
    const Allocation a = allocate(jobs, gavel(), {36, 36, 36}, spec);
    solves = a.lp_solves;
    benchmark::DoNotOptimize(a.objective);
  }
  state.counters["lp_solves"] = solves;
  state.SetLabel(std::string(to_string(policy)) + (aware ? " aware" : " agnostic"));
}
BENCHMARK(BM_Policy)
    ->ArgsProduct({{static_cast<int>(PolicyKind::kMaxMinFairness), static_cast<int>(PolicyKind::kFifo),
                    static_cast<int>(PolicyKind::kMakespan), static_cast<int>(PolicyKind::kFinishTimeFairness),
                    static_cast<int>(PolicyKind::kShortestJobFirst), static_cast<int>(PolicyKind::kMaxThroughput),
                    static_cast<int>(PolicyKind::kMinCost)},
                   {1, 0}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// The 5,000-job continuous-single trace (jobs 4,000 to 5,000 measured) on 36 GPUs of each type
// under `policy`; its average JCT, allocations and policy time as counters.
SimulationResult run_trace(benchmark::State& state, const ThroughputMatrix& matrix, const PolicySpec& policy, double jobs_per_hour) {
  SimulationSpec spec;
  spec.policy = policy;
  spec.workers = {36, 36, 36};
  spec.window_begin = 4000, spec.window_end = 5000;
  SimulationResult r;
  for (auto _ : state) r = simulate(poisson_source(matrix, jobs_per_hour, 1), matrix, spec);
  state.counters["avg_jct_h"] = r.average_jct_s / 3600.0;
  state.counters["allocations"] = r.allocations;
  state.counters["policy_s"] = r.policy_s;
  return r;
}

void BM_Trace(benchmark::State& state) {
  const double rate = static_cast<double>(state.range(0));
  const bool aware = state.range(1) != 0;
  const SimulationResult r = run_trace(state, gavel(), {PolicyKind::kMaxMinFairness, aware}, rate);
  state.counters["jobs"] = static_cast<double>(r.jobs.size());
  state.counters["rounds"] = static_cast<double>(r.rounds.size());
  state.SetLabel(aware ? "LAS aware" : "LAS agnostic");
}
BENCHMARK(BM_Trace)->ArgsProduct({{4, 6}, {1, 0}})->Unit(benchmark::kSecond)->Iterations(1);

const ThroughputMatrix& planned() {
  static const ThroughputMatrix matrix = read_throughput_csv(bundled_planned_throughputs());
  return matrix;
}

void BM_EnergyStage(benchmark::State& state) {
  const auto policy = static_cast<PolicyKind>(state.range(0));
  const bool energy = state.range(1) != 0;
  const std::vector<Job> jobs = random_jobs(planned(), 2048, 1);
  PolicySpec spec{policy, true, {}, {}};
  if (energy) spec.energy_slack = 0.1;
  double power = 0.0;
  for (auto _ : state) power = allocate(jobs, planned(), {36, 36, 36}, spec).power_w_total;
  state.counters["power_kw"] = power / 1000.0;
  state.SetLabel(std::string(to_string(policy)) + (energy ? " + energy stage" : ""));
}
BENCHMARK(BM_EnergyStage)
    ->ArgsProduct({{static_cast<int>(PolicyKind::kMaxMinFairness), static_cast<int>(PolicyKind::kFifo),
                    static_cast<int>(PolicyKind::kMakespan), static_cast<int>(PolicyKind::kFinishTimeFairness),
                    static_cast<int>(PolicyKind::kShortestJobFirst), static_cast<int>(PolicyKind::kMaxThroughput)},
                   {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

void BM_EnergyTrace(benchmark::State& state) {
  PolicySpec policy{PolicyKind::kMaxMinFairness};
  if (state.range(0) != 0) policy.energy_slack = 0.1;
  const SimulationResult r = run_trace(state, planned(), policy, 6.0);
  state.counters["energy_mwh"] = r.energy_j / 3.6e9;
  state.SetLabel(state.range(0) != 0 ? "LAS + energy stage 10%" : "LAS");
}
BENCHMARK(BM_EnergyTrace)->Arg(0)->Arg(1)->Unit(benchmark::kSecond)->Iterations(1);

void BM_SpaceSharing(benchmark::State& state) {
  const auto policy = static_cast<PolicyKind>(state.range(0));
  const std::vector<Job> jobs = random_jobs(gavel(), static_cast<int>(state.range(1)), 1);
  PolicySpec spec{policy, true, {}, {}, true};
  Allocation a;
  for (auto _ : state) a = allocate(jobs, gavel(), {36, 36, 36}, spec);
  state.counters["pairs"] = static_cast<double>(a.pairs.size());
  state.counters["lp_solves"] = a.lp_solves;
  state.SetLabel(std::string(to_string(policy)) + " + space sharing");
}
BENCHMARK(BM_SpaceSharing)
    ->ArgsProduct({{static_cast<int>(PolicyKind::kMaxMinFairness), static_cast<int>(PolicyKind::kFifo),
                    static_cast<int>(PolicyKind::kMakespan), static_cast<int>(PolicyKind::kFinishTimeFairness)},
                   {128, 512, 2048}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

void BM_SpaceSharingTrace(benchmark::State& state) {
  run_trace(state, gavel(), {PolicyKind::kMaxMinFairness, true, {}, {}, true}, 6.0);
  state.SetLabel("LAS aware + space sharing");
}
BENCHMARK(BM_SpaceSharingTrace)->Unit(benchmark::kSecond)->Iterations(1);

const std::vector<Entity>& three_entities() {
  static const std::vector<Entity> entities{
      {"e0", 1.0, EntityPolicy::kFairness}, {"e1", 2.0, EntityPolicy::kFifo}, {"e2", 3.0, EntityPolicy::kFairness}};
  return entities;
}

void BM_Hierarchical(benchmark::State& state) {
  const int count = static_cast<int>(state.range(0));
  PolicySpec spec{PolicyKind::kHierarchical, true, {}, {}, state.range(2) != 0};
  spec.entities = three_entities();
  std::vector<Job> jobs = random_jobs(gavel(), count, 1);
  for (std::size_t m = 0; m < jobs.size(); ++m) jobs[m].entity = dealt_entity(m, spec);
  const int per_type = state.range(1) != 0 ? count / 4 : 36;
  Allocation a;
  for (auto _ : state) a = allocate(jobs, gavel(), {per_type, per_type, per_type}, spec);
  state.counters["solves"] = a.lp_solves;
  state.SetLabel(fmt::format("{} of each type{}", per_type, spec.space_sharing ? ", space sharing" : ""));
}
BENCHMARK(BM_Hierarchical)
    ->ArgsProduct({{128, 512, 2048}, {0, 1}, {0}})
    ->Args({128, 0, 1})
    ->Args({512, 0, 1})
    ->Args({2048, 0, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

void BM_HierarchicalTrace(benchmark::State& state) {
  PolicySpec policy{PolicyKind::kHierarchical};
  policy.entities = three_entities();
  run_trace(state, gavel(), policy, 4.0);
}
BENCHMARK(BM_HierarchicalTrace)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
