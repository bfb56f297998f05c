// The partitioners against exhaustive search on small inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "perseus/model/errors.hpp"
#include "perseus/planner/partition.hpp"

namespace perseus::planner {
namespace {

// Every split of n layers into S non-empty contiguous stages.
void for_each_split(int n, int stages, const std::function<void(const std::vector<int>&)>& visit) {
  std::vector<int> boundaries{0};
  std::function<void(int)> rec = [&](int from) {
    if (static_cast<int>(boundaries.size()) == stages) {
      boundaries.push_back(n);
      visit(boundaries);
      boundaries.pop_back();
      return;
    }
    const int remaining = stages - static_cast<int>(boundaries.size());
    for (int cut = from + 1; cut <= n - remaining; ++cut) {
      boundaries.push_back(cut);
      rec(cut);
      boundaries.pop_back();
    }
  };
  rec(0);
}

std::vector<double> random_weights(std::mt19937& rng, int n, bool integers) {
  std::uniform_real_distribution<double> real(0.2, 3.0);
  std::uniform_int_distribution<int> small(1, 6);  // many ties
  std::vector<double> w(n);
  for (double& x : w) x = integers ? small(rng) : real(rng);
  return w;
}

TEST(Partition, MinImbalanceIsExactAgainstExhaustiveSearch) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    const int n = 2 + trial % 11;
    const int stages = 1 + static_cast<int>(rng() % std::min(n, 6));
    std::vector<double> w = random_weights(rng, n, trial % 2 == 0);
    if (trial % 5 == 0) w[rng() % n] = 0.0;  // a free layer now and then
    double best_ratio = std::numeric_limits<double>::infinity();
    double best_max = std::numeric_limits<double>::infinity();
    for_each_split(n, stages, [&](const std::vector<int>& b) {
      const Partition p = evaluate_partition(w, b);
      if (p.imbalance_ratio < best_ratio || (p.imbalance_ratio == best_ratio && p.max_weight < best_max)) {
        best_ratio = p.imbalance_ratio;
        best_max = p.max_weight;
      }
    });
    const Partition got = min_imbalance_partition(w, stages);
    ASSERT_EQ(got.num_stages(), stages);
    if (std::isinf(best_ratio)) {
      EXPECT_TRUE(std::isinf(got.imbalance_ratio)) << "trial " << trial;
    } else {
      EXPECT_NEAR(got.imbalance_ratio, best_ratio, 1e-12 * best_ratio) << "trial " << trial;
    }
    // Ties in the ratio go to the smaller longest stage.
    EXPECT_NEAR(got.max_weight, best_max, 1e-12 * best_max) << "trial " << trial;
    // The reported figures are those of the returned boundaries.
    const Partition check = evaluate_partition(w, got.boundaries);
    EXPECT_DOUBLE_EQ(check.imbalance_ratio, got.imbalance_ratio);
  }
}

TEST(Partition, MinMaxIsExactAgainstExhaustiveSearch) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + trial % 12;
    const int stages = 1 + static_cast<int>(rng() % std::min(n, 5));
    const std::vector<double> w = random_weights(rng, n, trial % 3 == 0);
    double best = std::numeric_limits<double>::infinity();
    for_each_split(n, stages, [&](const std::vector<int>& b) { best = std::min(best, evaluate_partition(w, b).max_weight); });
    const Partition got = min_max_partition(w, stages);
    ASSERT_EQ(got.num_stages(), stages);
    EXPECT_DOUBLE_EQ(got.max_weight, best) << "trial " << trial;
  }
}

TEST(Partition, LargeModelsBeatTheSimplerSplits) {
  // A GPT-like model: a light embedding, 96 equal blocks, a heavy head; hundreds of layers too.
  std::vector<double> gpt(98, 1.0);
  gpt.front() = 0.05;
  gpt.back() = 2.6;
  for (int stages : {4, 8, 16}) {
    const Partition exact = min_imbalance_partition(gpt, stages);
    EXPECT_LE(exact.imbalance_ratio, min_max_partition(gpt, stages).imbalance_ratio);
    EXPECT_LE(exact.imbalance_ratio, uniform_partition(gpt, stages).imbalance_ratio);
  }
  std::mt19937 rng(3);
  const std::vector<double> w = random_weights(rng, 400, false);
  const Partition exact = min_imbalance_partition(w, 32);
  EXPECT_LE(exact.imbalance_ratio, min_max_partition(w, 32).imbalance_ratio);
  EXPECT_LT(exact.imbalance_ratio, 1.2);
  // Equal layers that divide evenly are perfectly balanced.
  EXPECT_DOUBLE_EQ(min_imbalance_partition(std::vector<double>(96, 1.0), 8).imbalance_ratio, 1.0);
}

TEST(Partition, EdgeCasesAndBadInput) {
  const std::vector<double> w{1.0, 2.0, 3.0};
  EXPECT_EQ(min_imbalance_partition(w, 1).boundaries, (std::vector<int>{0, 3}));
  EXPECT_EQ(min_imbalance_partition(w, 3).boundaries, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_DOUBLE_EQ(min_imbalance_partition(w, 3).imbalance_ratio, 3.0);
  EXPECT_EQ(uniform_partition(std::vector<double>(10, 1.0), 4).boundaries, (std::vector<int>{0, 3, 6, 8, 10}));
  EXPECT_THROW(min_imbalance_partition(w, 4), InputError);
  EXPECT_THROW(min_imbalance_partition(w, 0), InputError);
  // Zero-weight layers (a nearly free embedding) are allowed; a stage of only those is not chosen.
  const std::vector<double> zeros{0.0, 1.0, 1.0, 0.0, 1.0};
  const Partition z = min_imbalance_partition(zeros, 3);
  EXPECT_DOUBLE_EQ(z.imbalance_ratio, 1.0);
  EXPECT_TRUE(std::isinf(min_imbalance_partition(std::vector<double>{0.0, 1.0}, 2).imbalance_ratio));
  EXPECT_THROW(min_max_partition(std::vector<double>{0.0, 0.0}, 1), InputError);
  EXPECT_THROW(min_max_partition(std::vector<double>{1.0, -1.0}, 1), InputError);
  EXPECT_THROW(min_max_partition(std::vector<double>{1.0, std::nan("")}, 1), InputError);
  EXPECT_THROW(evaluate_partition(w, {0, 2, 2, 3}), InputError);
  EXPECT_THROW(evaluate_partition(w, {0, 2}), InputError);
}

// ---- PipeDream ----

std::vector<PipeDreamLayer> random_layers(std::mt19937& rng, int n) {
  std::uniform_real_distribution<double> compute(0.5, 4.0), bytes(0.1, 3.0), params(0.0, 4.0);
  std::vector<PipeDreamLayer> layers(n);
  for (auto& l : layers) l = {compute(rng), bytes(rng), params(rng)};
  return layers;
}

// Exhaustive search of one level: every split into stages and every way to give each stage
// at least one of exactly `workers` workers.
double brute_force_flat(const std::vector<PipeDreamLayer>& layers, int workers, double bandwidth) {
  const int n = static_cast<int>(layers.size());
  double best = std::numeric_limits<double>::infinity();
  for (int stages = 1; stages <= std::min(n, workers); ++stages) {
    for_each_split(n, stages, [&](const std::vector<int>& b) {
      std::vector<int> replicas(stages, 1);
      std::function<void(int, int)> assign = [&](int s, int left) {
        if (s == stages - 1) {
          replicas[s] = left;
          std::vector<PipeDreamStage> config;
          for (int k = 0; k < stages; ++k) config.push_back({b[k], b[k + 1], replicas[k], 0.0});
          best = std::min(best, pipedream_config_time(layers, config, bandwidth));
          return;
        }
        for (int r = 1; r <= left - (stages - 1 - s); ++r) {
          replicas[s] = r;
          assign(s + 1, left - r);
        }
      };
      assign(0, workers);
    });
  }
  return best;
}

TEST(PipeDream, OneLevelIsExactAgainstExhaustiveSearch) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 120; ++trial) {
    const int n = 1 + trial % 6;
    const int workers = 1 + static_cast<int>(rng() % 5);
    const double bandwidth = trial % 3 == 0 ? 0.5 : 4.0;
    const auto layers = random_layers(rng, n);
    const std::vector<TopologyLevel> topology{{workers, bandwidth, "node"}};
    const PipeDreamPlan plan = pipedream_partition(layers, topology);
    EXPECT_NEAR(plan.slowest_stage_s, brute_force_flat(layers, workers, bandwidth), 1e-12) << "trial " << trial;
    // The flattened configuration costs what the DP says and uses every worker once.
    EXPECT_NEAR(pipedream_config_time(layers, plan.stages, bandwidth), plan.slowest_stage_s, 1e-12);
    int used = 0;
    for (const PipeDreamStage& s : plan.stages) used += s.replicas;
    EXPECT_EQ(used, workers);
    EXPECT_EQ(plan.stages.front().first_layer, 0);
    EXPECT_EQ(plan.stages.back().end_layer, n);
    EXPECT_EQ(plan.in_flight, (workers + plan.stages.front().replicas - 1) / plan.stages.front().replicas);
  }
}

// Exhaustive search over hierarchical configurations of two levels: the top level splits the
// layers into stages over n2 components; each top stage replicated over r components runs,
// inside each, any one-level configuration of its layers on n1 workers (PipeDream's model).
double brute_force_two_levels(const std::vector<PipeDreamLayer>& layers, int n1, double b1, int n2, double b2) {
  const int n = static_cast<int>(layers.size());
  auto sub = [&](int i, int j) {  // best inner pipeline of layers [i, j) on one component
    std::vector<PipeDreamLayer> part(layers.begin() + i, layers.begin() + j);
    return brute_force_flat(part, n1, b1);
  };
  double best = std::numeric_limits<double>::infinity();
  for (int stages = 1; stages <= std::min(n, n2); ++stages) {
    for_each_split(n, stages, [&](const std::vector<int>& b) {
      std::vector<int> replicas(stages, 1);
      std::function<void(int, int)> assign = [&](int s, int left) {
        if (s == stages - 1) {
          replicas[s] = left;
          double worst = 0.0;
          for (int k = 0; k < stages; ++k) {
            double params = 0.0;
            for (int l = b[k]; l < b[k + 1]; ++l) params += layers[l].parameter_bytes;
            const int r = replicas[k];
            worst = std::max(worst, std::max(sub(b[k], b[k + 1]), 2.0 * (r - 1) * params / b2) / r);
            if (k + 1 < stages) worst = std::max(worst, 2.0 * layers[b[k + 1] - 1].activation_bytes / b2);
          }
          best = std::min(best, worst);
          return;
        }
        for (int r = 1; r <= left - (stages - 1 - s); ++r) {
          replicas[s] = r;
          assign(s + 1, left - r);
        }
      };
      assign(0, n2);
    });
  }
  return best;
}

TEST(PipeDream, TwoLevelsAreExactAgainstExhaustiveSearch) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 2 + trial % 4;
    const int n1 = 1 + trial % 3, n2 = 1 + (trial / 3) % 3;
    const double fast = 8.0, slow = trial % 2 ? 0.4 : 2.0;
    const auto layers = random_layers(rng, n);
    const std::vector<TopologyLevel> topology{{n1, fast, "node"}, {n2, slow, "cluster"}};
    const PipeDreamPlan plan = pipedream_partition(layers, topology);
    EXPECT_NEAR(plan.slowest_stage_s, brute_force_two_levels(layers, n1, fast, n2, slow), 1e-12) << "trial " << trial;
    EXPECT_EQ(plan.workers, n1 * n2);
    int used = 0;
    for (const PipeDreamStage& s : plan.stages) used += s.replicas;
    EXPECT_EQ(used, n1 * n2);
  }
}

TEST(PipeDream, FreeCommunicationMeansPureDataParallelism) {
  // With infinite bandwidth every split costs at least total/workers, which plain data
  // parallelism achieves.
  std::mt19937 rng(1);
  const auto layers = random_layers(rng, 8);
  double total = 0.0;
  for (const auto& l : layers) total += l.compute_s;
  const std::vector<TopologyLevel> topology{{4, 1e30, "node"}, {4, 1e30, "cluster"}};
  const PipeDreamPlan plan = pipedream_partition(layers, topology);
  EXPECT_NEAR(plan.slowest_stage_s, total / 16.0, 1e-12);
  EXPECT_THROW(pipedream_partition(layers, std::vector<TopologyLevel>{}), InputError);
  EXPECT_THROW(pipedream_partition(layers, std::vector<TopologyLevel>{{2, 0.0, "bad"}}), InputError);
}

}  // namespace
}  // namespace perseus::planner
