// The LP wrapper the cluster policies build on: optima of small LPs solved by hand, and every
// warm path (resolve, resolve_rows, columns added after a solve) against the same LP solved from
// scratch, on random LPs.
#include <random>

#include <gtest/gtest.h>

#include "perseus/cluster/linear_program.hpp"

namespace perseus::cluster {
namespace {

TEST(LinearProgram, SolvesASmallLpByHand) {
  // max 3x + 2y, x + y <= 4, x + 3y <= 6, x <= 3: the vertex (3, 1), objective 11.
  LinearProgram lp(LinearProgram::Sense::kMaximize);
  const int x = lp.add_variable(0.0, 3.0, 3.0);
  const int y = lp.add_variable(0.0, kInfinity, 2.0);
  lp.add_row({{x, 1.0}, {y, 1.0}}, -kInfinity, 4.0);
  lp.add_row({{x, 1.0}, {y, 3.0}}, -kInfinity, 6.0);
  const LinearProgram::Solution s = lp.solve();
  ASSERT_TRUE(s.optimal);
  EXPECT_NEAR(s.objective, 11.0, 1e-9);
  EXPECT_NEAR(s.values[static_cast<std::size_t>(x)], 3.0, 1e-9);
  EXPECT_NEAR(s.values[static_cast<std::size_t>(y)], 1.0, 1e-9);
}

TEST(LinearProgram, AColumnAddedAfterASolveTakesPartInTheNext) {
  // The LP above; then z (objective 5, 1 in the first row only): a unit of the first row's room
  // is worth 5 to z, more than to x or y, so z = 4 and x = y = 0: objective 20 (the first row's
  // dual 5 prices x and y out).
  LinearProgram lp(LinearProgram::Sense::kMaximize);
  const int x = lp.add_variable(0.0, 3.0, 3.0);
  const int y = lp.add_variable(0.0, kInfinity, 2.0);
  const int first = lp.add_row({{x, 1.0}, {y, 1.0}}, -kInfinity, 4.0);
  lp.add_row({{x, 1.0}, {y, 3.0}}, -kInfinity, 6.0);
  ASSERT_NEAR(lp.solve().objective, 11.0, 1e-9);
  const int z = lp.add_column(0.0, kInfinity, 5.0, {{first, 1.0}});
  const LinearProgram::Solution s = lp.resolve();
  ASSERT_TRUE(s.optimal);
  EXPECT_NEAR(s.objective, 20.0, 1e-9);
  EXPECT_NEAR(s.values[static_cast<std::size_t>(z)], 4.0, 1e-9);
  // Fixed at 0 it leaves the LP as it was.
  lp.set_bounds(z, 0.0, 0.0);
  EXPECT_NEAR(lp.resolve().objective, 11.0, 1e-9);
}

// A random LP: max c.x over 0 <= x <= 1 and packing rows A x <= b (A, b, c > 0): always feasible
// (x = 0) and bounded.
struct RandomLp {
  LinearProgram lp{LinearProgram::Sense::kMaximize};
  std::vector<int> rows;
};

RandomLp random_lp(std::mt19937_64& rng, int variables, int rows) {
  std::uniform_real_distribution<double> u(0.1, 1.0);
  RandomLp out;
  for (int v = 0; v < variables; ++v) out.lp.add_variable(0.0, 1.0, u(rng));
  for (int r = 0; r < rows; ++r) {
    std::vector<std::pair<int, double>> terms;
    for (int v = 0; v < variables; ++v)
      if (u(rng) < 0.6) terms.emplace_back(v, u(rng));
    out.rows.push_back(out.lp.add_row(terms, -kInfinity, u(rng) * variables / 4.0));
  }
  return out;
}

TEST(LinearProgram, WarmSolvesAgreeWithSolvesFromScratch) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0.1, 1.0);
  for (int trial = 0; trial < 20; ++trial) {
    // The same LP twice: one changed and resolved warm at each step, the other solved afresh.
    std::mt19937_64 twin = rng;
    RandomLp warm = random_lp(rng, 12, 8);
    RandomLp cold = random_lp(twin, 12, 8);
    ASSERT_TRUE(warm.lp.solve().optimal);
    for (int step = 0; step < 8; ++step) {
      const double bound = u(rng) * 3.0, coefficient = u(rng), cost = u(rng) * 2.0;
      const std::size_t row = static_cast<std::size_t>(step) % warm.rows.size();
      LinearProgram::Solution a, b;
      switch (step % 4) {
        case 0:  // a row's bound: the dual simplex from the last basis
          warm.lp.set_row_bounds(warm.rows[row], -kInfinity, bound);
          cold.lp.set_row_bounds(cold.rows[row], -kInfinity, bound);
          a = warm.lp.resolve_rows();
          break;
        case 1:  // a variable's objective and bounds: the primal simplex from the last basis
          warm.lp.set_objective(step, cost), warm.lp.set_bounds(step, 0.0, bound);
          cold.lp.set_objective(step, cost), cold.lp.set_bounds(step, 0.0, bound);
          a = warm.lp.resolve();
          break;
        case 2:  // a new column in two rows
          warm.lp.add_column(0.0, 1.0, cost, {{warm.rows[row], coefficient}, {warm.rows[0], coefficient}});
          cold.lp.add_column(0.0, 1.0, cost, {{cold.rows[row], coefficient}, {cold.rows[0], coefficient}});
          a = warm.lp.resolve();
          break;
        default:  // coefficients, one of them a new entry, and a row's bound: a new model from the last basis
          for (int v = 0; v < 3; ++v) {
            warm.lp.set_coefficient(warm.rows[row], step + v, coefficient * (v + 1));
            cold.lp.set_coefficient(cold.rows[row], step + v, coefficient * (v + 1));
          }
          warm.lp.set_row_bounds(warm.rows[0], -kInfinity, bound);
          cold.lp.set_row_bounds(cold.rows[0], -kInfinity, bound);
          a = warm.lp.resolve();
      }
      b = cold.lp.solve();
      ASSERT_TRUE(a.optimal && b.optimal) << "trial " << trial << " step " << step;
      EXPECT_NEAR(a.objective, b.objective, 1e-7 * std::max(1.0, b.objective)) << "trial " << trial << " step " << step;
    }
  }
}

TEST(LinearProgram, AChangedCoefficientTakesPartInTheNextResolve) {
  // The LP of SolvesASmallLpByHand, then y's coefficient in the second row 3 -> 1: x + y <= 4
  // binds with x <= 3 and the second row (x + y <= 6) is slack, so (3, 1) stays optimal at 11;
  // then x's in the first row 1 -> 2 (2x + y <= 4): x = 2, y = 0 gives 6, x = 0, y = 4 gives 8,
  // and the vertex x = 0, y = 4 is optimal: 8 (the LP from scratch agrees).
  LinearProgram lp(LinearProgram::Sense::kMaximize);
  const int x = lp.add_variable(0.0, 3.0, 3.0);
  const int y = lp.add_variable(0.0, kInfinity, 2.0);
  const int first = lp.add_row({{x, 1.0}, {y, 1.0}}, -kInfinity, 4.0);
  const int second = lp.add_row({{x, 1.0}, {y, 3.0}}, -kInfinity, 6.0);
  ASSERT_NEAR(lp.solve().objective, 11.0, 1e-9);
  lp.set_coefficient(second, y, 1.0);
  LinearProgram::Solution s = lp.resolve();
  ASSERT_TRUE(s.optimal);
  EXPECT_NEAR(s.objective, 11.0, 1e-9);
  lp.set_coefficient(first, x, 2.0);
  s = lp.resolve();
  ASSERT_TRUE(s.optimal);
  EXPECT_NEAR(s.objective, 8.0, 1e-9);
  EXPECT_NEAR(s.values[static_cast<std::size_t>(x)], 0.0, 1e-9);
  EXPECT_NEAR(s.values[static_cast<std::size_t>(y)], 4.0, 1e-9);
  EXPECT_NEAR(lp.solve().objective, 8.0, 1e-9);
}

TEST(LinearProgram, MixedIntegerMatchesBruteForce) {
  // 0/1 knapsacks: CBC against every subset.
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0.1, 1.0);
  for (int trial = 0; trial < 10; ++trial) {
    const int n = 10;
    std::vector<double> value(n), weight(n);
    for (int i = 0; i < n; ++i) value[static_cast<std::size_t>(i)] = u(rng), weight[static_cast<std::size_t>(i)] = u(rng);
    const double capacity = 2.0;
    LinearProgram lp(LinearProgram::Sense::kMaximize);
    std::vector<std::pair<int, double>> row;
    for (int i = 0; i < n; ++i) {
      const int v = lp.add_variable(0.0, 1.0, value[static_cast<std::size_t>(i)]);
      lp.set_integer(v);
      row.emplace_back(v, weight[static_cast<std::size_t>(i)]);
    }
    lp.add_row(row, -kInfinity, capacity);
    double best = 0.0;
    for (int subset = 0; subset < (1 << n); ++subset) {
      double w = 0.0, v = 0.0;
      for (int i = 0; i < n; ++i)
        if (subset & (1 << i)) w += weight[static_cast<std::size_t>(i)], v += value[static_cast<std::size_t>(i)];
      if (w <= capacity) best = std::max(best, v);
    }
    const LinearProgram::Solution s = lp.solve_mixed_integer(10.0);
    ASSERT_TRUE(s.optimal) << "trial " << trial;
    EXPECT_NEAR(s.objective, best, 1e-6) << "trial " << trial;
  }
}

}  // namespace
}  // namespace perseus::cluster
