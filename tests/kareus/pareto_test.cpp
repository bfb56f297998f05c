// Pareto fronts and 2-D hypervolume against brute force on random points.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "perseus/kareus/pareto.hpp"

namespace perseus::kareus {
namespace {

std::vector<TradeoffPoint> random_points(std::mt19937& rng, int n, bool grid) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int> cell(0, 9);
  std::vector<TradeoffPoint> points;
  for (int i = 0; i < n; ++i) {
    // On a grid, ties in time and in energy (and repeated points) are common.
    points.push_back(grid ? TradeoffPoint{double(cell(rng)), double(cell(rng)), std::size_t(i)}
                          : TradeoffPoint{unit(rng), unit(rng), std::size_t(i)});
  }
  return points;
}

TEST(Pareto, FrontIsExactlyTheUndominatedPoints) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const auto points = random_points(rng, 1 + trial % 40, trial % 2 == 0);
    const auto front = pareto_front(points);
    std::set<std::pair<double, double>> expected, got;
    for (const TradeoffPoint& p : points) {
      bool dominated = false;
      for (const TradeoffPoint& q : points) {
        dominated |= q.time_s <= p.time_s && q.energy_j <= p.energy_j && (q.time_s < p.time_s || q.energy_j < p.energy_j);
      }
      if (!dominated) expected.insert({p.time_s, p.energy_j});
    }
    for (const TradeoffPoint& p : front) got.insert({p.time_s, p.energy_j});
    EXPECT_EQ(got, expected);
    EXPECT_EQ(front.size(), expected.size());  // one of each equal pair
    for (std::size_t i = 1; i < front.size(); ++i) {
      EXPECT_LT(front[i - 1].time_s, front[i].time_s);
      EXPECT_GT(front[i - 1].energy_j, front[i].energy_j);
    }
  }
}

TEST(Pareto, HypervolumeIsTheDominatedAreaUnderTheReference) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const auto points = random_points(rng, 1 + trial % 30, trial % 2 == 0);
    const double rt = trial % 2 ? 1.1 : 9.5, re = trial % 2 ? 0.9 : 8.5;  // some points beyond it
    // Brute force over every point (not the front): between consecutive distinct times, the
    // dominated height is the reference minus the least energy of the points at or before.
    std::vector<double> xs{rt};
    for (const TradeoffPoint& p : points) {
      if (p.time_s < rt) xs.push_back(p.time_s);
    }
    std::sort(xs.begin(), xs.end());
    double expected = 0.0;
    for (std::size_t i = 0; i + 1 < xs.size(); ++i) {
      double least = re;
      for (const TradeoffPoint& p : points) {
        if (p.time_s <= xs[i]) least = std::min(least, p.energy_j);
      }
      expected += (xs[i + 1] - xs[i]) * (re - least);
    }
    EXPECT_NEAR(hypervolume(points, rt, re), expected, 1e-12) << trial;
  }
  // Closed form: one point at (1, 1) under (3, 4) dominates 2 x 3.
  const TradeoffPoint one{1.0, 1.0, 0};
  EXPECT_DOUBLE_EQ(hypervolume(std::span(&one, 1), 3.0, 4.0), 6.0);
  EXPECT_DOUBLE_EQ(hypervolume({}, 3.0, 4.0), 0.0);
}

}  // namespace
}  // namespace perseus::kareus
