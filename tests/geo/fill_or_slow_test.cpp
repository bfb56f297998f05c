#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "perseus/geo/fill_or_slow.hpp"
#include "perseus/geo/reproduce.hpp"

namespace perseus::geo {
namespace {

const PolicyOutcome& outcome(const FillOrSlowResult& r, const std::string& policy) {
  for (const PolicyOutcome& o : r.outcomes)
    if (o.policy == policy) return o;
  throw std::runtime_error("no policy " + policy);
}

TEST(FillOrSlow, NoPolicyChangesTraining) {
  const TestbedTraining t = testbed_training();
  for (double rate : {5.0, 40.0}) {
    FillOrSlowSpec spec;
    spec.prefills.arrival_rate = rate;
    const FillOrSlowResult r = fill_or_slow(t.workload, t.network, t.training, spec);
    ASSERT_EQ(r.outcomes.size(), 4u);
    for (const PolicyOutcome& o : r.outcomes) {
      EXPECT_TRUE(o.training_unchanged) << o.policy << " at " << rate;
      EXPECT_NEAR(o.iteration_time_s, t.training.iteration_time_s, 1e-9) << o.policy;
      EXPECT_DOUBLE_EQ(o.training_flops, r.outcomes[0].training_flops);
    }
    const PolicyOutcome &none = outcome(r, "none"), &fill = outcome(r, "fill"), &slow = outcome(r, "slow");
    // Filling keeps the clocks; slowing serves nothing and saves energy.
    EXPECT_DOUBLE_EQ(fill.computation_j, none.computation_j);
    EXPECT_GT(fill.prefill_tokens_per_s, 0.0);
    EXPECT_EQ(slow.served, 0);
    EXPECT_LT(slow.total_j(), none.total_j());
    EXPECT_GT(slow.bubbles_slowed, 0);
    // The same GPU time is accounted for in each: idle energy falls as work fills it.
    EXPECT_LT(fill.idle_j, none.idle_j);
  }
}

TEST(FillOrSlow, MixedBeatsBothPurePoliciesOnItsObjective) {
  const TestbedTraining t = testbed_training();
  for (double rate : {5.0, 20.0, 80.0}) {
    FillOrSlowSpec spec;
    spec.prefills.arrival_rate = rate;
    const FillOrSlowResult r = fill_or_slow(t.workload, t.network, t.training, spec);
    const double mixed = outcome(r, "mixed").joules_per_tflop();
    // Within 0.5%: the choice is made on the pure runs' estimates, the mixed run is emulated.
    EXPECT_LE(mixed, outcome(r, "fill").joules_per_tflop() * 1.005) << rate;
    EXPECT_LE(mixed, outcome(r, "slow").joules_per_tflop() * 1.005) << rate;
    spec.objective = BubbleObjective::kPrice;
    const FillOrSlowResult priced = fill_or_slow(t.workload, t.network, t.training, spec);
    const double value = outcome(priced, "mixed").net_value_per_hour(spec);
    EXPECT_GE(value, outcome(priced, "fill").net_value_per_hour(spec) - 0.01 * std::abs(value)) << rate;
    EXPECT_GE(value, outcome(priced, "slow").net_value_per_hour(spec)) << rate;
  }
}

TEST(FillOrSlow, DinkelbachFindsTheBestChoiceOfTheEstimates) {
  // Brute force over every subset of the slowable bubbles (few at M = 2) of the estimated
  // ratio: energy of `slow` plus, for each filled bubble, its prefills' energy and the saving
  // forgone, over training's FLOPs plus the filled bubbles' prefill FLOPs.
  const TestbedTraining t = testbed_training(2);
  FillOrSlowSpec spec;
  spec.prefills.arrival_rate = 20.0;
  const FillOrSlowResult r = fill_or_slow(t.workload, t.network, t.training, spec);
  const PolicyOutcome& slow = outcome(r, "slow");
  std::vector<const BubbleChoice*> open;
  double base_j = slow.total_j(), base_flops = slow.training_flops;
  for (const BubbleChoice& b : r.bubbles) {
    if (b.slow_saving_j > 0.0) {
      open.push_back(&b);
    } else {
      EXPECT_TRUE(b.fill);  // nothing to save: left to the prefills
      base_j += b.fill_extra_j, base_flops += b.fill_flops;
    }
  }
  ASSERT_GT(open.size(), 1u);
  ASSERT_LE(open.size(), 22u);  // 2^22 subsets at most
  auto ratio = [&](auto filled) {
    double j = base_j, flops = base_flops;
    for (std::size_t i = 0; i < open.size(); ++i)
      if (filled(i)) j += open[i]->fill_extra_j + open[i]->slow_saving_j, flops += open[i]->fill_flops;
    return j / flops;
  };
  double best = std::numeric_limits<double>::infinity();
  for (std::uint32_t mask = 0; mask < (1u << open.size()); ++mask)
    best = std::min(best, ratio([&](std::size_t i) { return (mask >> i) & 1u; }));
  EXPECT_NEAR(ratio([&](std::size_t i) { return open[i]->fill; }), best, 1e-12 * best);
}

TEST(FillOrSlow, PricesDecide) {
  const TestbedTraining t = testbed_training();
  FillOrSlowSpec spec;
  spec.objective = BubbleObjective::kPrice;
  spec.prefills.arrival_rate = 20.0;
  // Tokens worth nothing: slow wherever it saves.
  spec.value_per_mtokens = 0.0;
  const FillOrSlowResult free_tokens = fill_or_slow(t.workload, t.network, t.training, spec);
  EXPECT_EQ(outcome(free_tokens, "mixed").bubbles_slowed, outcome(free_tokens, "slow").bubbles_slowed);
  // Energy free: fill every bubble that took a prefill, slow only the rest.
  spec.value_per_mtokens = 0.05, spec.price_per_kwh = 0.0;
  const FillOrSlowResult free_energy = fill_or_slow(t.workload, t.network, t.training, spec);
  for (const BubbleChoice& b : free_energy.bubbles) EXPECT_EQ(b.fill, b.fill_tokens > 0.0 || b.slow_saving_j <= 0.0);
  EXPECT_NEAR(outcome(free_energy, "mixed").prefill_tokens_per_s, outcome(free_energy, "fill").prefill_tokens_per_s,
              0.02 * outcome(free_energy, "fill").prefill_tokens_per_s);
}

TEST(FillOrSlow, BadSpecsAreRefused) {
  const TestbedTraining t = testbed_training();
  FillOrSlowSpec spec;
  spec.price_per_kwh = -1.0;
  EXPECT_THROW(fill_or_slow(t.workload, t.network, t.training, spec), InputError);
  EXPECT_THROW(parse_bubble_objective("throughput"), InputError);
  EXPECT_EQ(parse_bubble_objective("price"), BubbleObjective::kPrice);
}

}  // namespace
}  // namespace perseus::geo
