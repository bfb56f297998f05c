// Speed of the planner's algorithms: prints the figures docs/planner.md quotes.
//   planner_bench [--repeat N]
// Each figure is the median wall time of N runs (default 5) on this machine.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "perseus/planner/energy_model.hpp"
#include "perseus/planner/parallel_config.hpp"
#include "perseus/planner/partition.hpp"

using namespace perseus::planner;

namespace {

double median_seconds(int repeat, const std::function<void()>& run) {
  std::vector<double> times;
  for (int i = 0; i < repeat; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::vector<double> random_weights(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> unit(0.5, 1.5);
  std::vector<double> w(n);
  for (double& x : w) x = unit(rng);
  return w;
}

// A Transformer: a light embedding, equal blocks, a heavier head.
std::vector<double> transformer_weights(int n) {
  std::vector<double> w(n, 1.0);
  w.front() = 0.03;
  w.back() = 2.7;
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 5;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--repeat") == 0) repeat = std::max(1, std::atoi(argv[i + 1]));
  }
  std::printf("min-imbalance partitioning (exact), median of %d runs\n", repeat);
  std::printf("%8s %7s %-12s %12s %10s %12s\n", "layers", "stages", "weights", "time ms", "checks", "ratio");
  for (int n : {100, 300, 1000}) {
    for (int stages : {8, 32, 64}) {
      for (const char* kind : {"random", "transformer"}) {
        const std::vector<double> w = std::strcmp(kind, "random") == 0 ? random_weights(n, 42) : transformer_weights(n);
        Partition p;
        const double t = median_seconds(repeat, [&] { p = min_imbalance_partition(w, stages); });
        std::printf("%8d %7d %-12s %12.3f %10zu %12.6f\n", n, stages, kind, 1e3 * t, p.feasibility_checks,
                    p.imbalance_ratio);
      }
    }
  }
  std::printf("\nmin-max partitioning (exact), random weights\n");
  for (int n : {100, 1000}) {
    const std::vector<double> w = random_weights(n, 7);
    const double t = median_seconds(repeat, [&] { (void)min_max_partition(w, 32); });
    std::printf("%8d layers, 32 stages: %.3f ms\n", n, 1e3 * t);
  }

  std::printf("\nPipeDream dynamic program, 8 GPUs per node\n");
  for (int n : {25, 50, 100}) {
    for (int nodes : {2, 8}) {
      std::vector<PipeDreamLayer> layers;
      for (double w : random_weights(n, 3)) layers.push_back({w * 0.01, 5e7, 2e8 * w});
      const std::vector<TopologyLevel> topology{{8, 250e9, "node"}, {nodes, 25e9, "cluster"}};
      PipeDreamPlan plan;
      const double t = median_seconds(repeat, [&] { plan = pipedream_partition(layers, topology); });
      std::printf("%8d layers, %2d nodes: %9.3f ms (%zu stages)\n", n, nodes, 1e3 * t, plan.stages.size());
    }
  }

  std::printf("\nPTD-P configuration sweep, A100-SXM\n");
  for (auto [model, gpus] : {std::pair{"gpt3-13b", 64}, std::pair{"gpt3-175b", 1024}, std::pair{"llama3-70b", 4096}}) {
    SweepOptions options;
    std::size_t count = 0;
    const ClusterSpec cluster{&find_gpu("a100-sxm"), gpus};
    const double t = median_seconds(repeat, [&] { count = sweep_configurations(find_model(model), cluster, options).size(); });
    std::printf("%12s on %5d GPUs: %8.1f ms for %zu configurations\n", model, gpus, 1e3 * t, count);
  }
  return 0;
}
