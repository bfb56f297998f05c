// The plan store at the scale: writing and reading 100,000 plans of 8 stages x 96
// microbatches (1,536 clocks each, 154 MB). Target: each under 1 s.
//   ./build/src/perseus/plan_store_benchmark --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true   (one command line)
// (quote the median). The file lives in $TMPDIR (the page cache, as right after optimize).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <random>
#include <vector>

#include "perseus/plan/plan_store.hpp"

namespace perseus {
namespace {

namespace fs = std::filesystem;

constexpr int kStages = 8;
constexpr int kMicrobatches = 96;
constexpr std::size_t kPlans = 100'000;

PlanStoreLayout layout() {
  PlanStoreLayout layout;
  for (int s = 0; s < kStages; ++s) {
    auto& list = layout.stages.emplace_back();
    for (int m = 0; m < kMicrobatches; ++m) {
      list.push_back({InstructionKind::kForward, s, m, 0});
      list.push_back({InstructionKind::kBackward, s, m, 0});
    }
  }
  for (int mhz = 210; mhz <= 1410; mhz += 15) layout.clocks_mhz.push_back(mhz);  // A100's 81 clocks
  layout.problem_digest = "bench";
  return layout;
}

// Neighbouring frontier plans differ in a few clocks: one plan, perturbed as it is written.
const fs::path& store_path() {
  static const fs::path path = fs::temp_directory_path() / "perseus-plan-store-bench.bin";
  return path;
}

void write_store(const PlanStoreLayout& l) {
  std::mt19937 rng(7);
  std::vector<int> plan(l.instructions(), l.clocks_mhz.back());
  std::uniform_int_distribution<std::size_t> where(0, plan.size() - 1), clock(0, l.clocks_mhz.size() - 1);
  PlanStoreWriter writer(store_path(), l, kPlans);
  for (std::size_t i = 0; i < kPlans; ++i) {
    for (int k = 0; k < 4; ++k) plan[where(rng)] = l.clocks_mhz[clock(rng)];
    writer.add(plan);
  }
  writer.finish();
}

void BM_WriteStore(benchmark::State& state) {
  const PlanStoreLayout l = layout();
  for (auto _ : state) write_store(l);
  state.counters["MB"] = static_cast<double>(fs::file_size(store_path())) / 1e6;
}
BENCHMARK(BM_WriteStore)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ReadEveryPlan(benchmark::State& state) {
  write_store(layout());
  for (auto _ : state) {
    const PlanStore store(store_path());
    std::int64_t sum = 0;
    for (std::size_t i = 0; i < store.size(); ++i) sum += store.clocks(i)[i % 1536];
    benchmark::DoNotOptimize(sum);
  }
}
BENCHMARK(BM_ReadEveryPlan)->Unit(benchmark::kMillisecond)->UseRealTime();

// What `select` or the server does: open, read one plan.
void BM_OpenAndReadOnePlan(benchmark::State& state) {
  write_store(layout());
  std::size_t i = 0;
  for (auto _ : state) {
    const PlanStore store(store_path());
    benchmark::DoNotOptimize(store.frequencies((i += 7919) % kPlans));
  }
}
BENCHMARK(BM_OpenAndReadOnePlan)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace perseus

BENCHMARK_MAIN();
