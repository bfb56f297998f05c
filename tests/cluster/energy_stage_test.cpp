// The energy stage (energy_stage.hpp): hand-solved small cases (to 1e-5: the stage asks for each
// floor less a millionth so that the policy's own X stays feasible), and on random clusters the
// properties it promises: every job keeps (1 - slack) of its throughput, the allocation stays
// valid, and the cluster's power never rises.
#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "matrices.hpp"

#include "perseus/cluster/energy_stage.hpp"
#include "perseus/cluster/policies.hpp"

namespace perseus::cluster {
namespace {

using testing::matrix_with_energy;

PolicySpec las(bool aware, std::optional<double> slack) { return {PolicyKind::kMaxMinFairness, aware, {}, slack}; }

TEST(EnergyStage, OneJobMixesItsOperatingPointsAsSolvedByHand) {
  // One GPU, one job: fast (2 steps/s at 1 J/step: 2 W) or slow (1 step/s at 0.5 J/step: 0.5 W).
  // Keeping 1.5 steps/s: 2a + b >= 1.5, a + b <= 1, minimise 2a + 0.5b: a = b = 1/2, 1.25 W.
  const ThroughputMatrix t = matrix_with_energy({"g"}, {{{{2.0, 1.0}, {1.0, 0.5}}}});
  const std::vector<Job> jobs{{0, 1.0, 0.0, 0.0}};
  const Allocation plain = allocate(jobs, t, {1}, las(true, std::nullopt));
  EXPECT_NEAR(plain.throughput[0], 2.0, 1e-5);
  EXPECT_NEAR(plain.power_w_total, 2.0, 1e-5);
  const Allocation saving = allocate(jobs, t, {1}, las(true, 0.25));
  EXPECT_NEAR(saving.share[0][0], 1.0, 1e-5);
  EXPECT_NEAR(saving.throughput[0], 1.5, 1e-5);
  EXPECT_NEAR(saving.speed[0][0], 1.5, 1e-5);
  EXPECT_NEAR(saving.power_w[0][0], 1.25, 1e-5);
  EXPECT_NEAR(saving.power_w_total, 1.25, 1e-5);
  EXPECT_EQ(saving.lp_solves, plain.lp_solves + 1);
  // No slack: nothing to give, the fastest point stays.
  EXPECT_NEAR(allocate(jobs, t, {1}, las(true, 0.0)).power_w_total, 2.0, 1e-5);
}

TEST(EnergyStage, AwareMovesToTheFrugalTypeAgnosticOnlyChangesClocks) {
  // Two types as fast (2 steps/s), b at half the energy per step; one GPU each, one job.
  const ThroughputMatrix t = matrix_with_energy({"a", "b"}, {{{{2.0, 1.0}}, {{2.0, 0.5}, {1.0, 0.25}}}});
  const std::vector<Job> jobs{{0, 1.0, 0.0, 0.0}};
  // Aware, no slack: all its time on b (1 W instead of 2).
  const Allocation aware = allocate(jobs, t, {1, 1}, las(true, 0.0));
  EXPECT_NEAR(aware.share[0][1], 1.0, 1e-5);
  EXPECT_NEAR(aware.throughput[0], 2.0, 1e-5);
  EXPECT_NEAR(aware.power_w_total, 1.0, 1e-5);
  // Agnostic: X* splits the job's time by GPU counts, half on each, and the stage never gives a
  // type more time than that: at no slack 0.5 * 2 W + 0.5 * 1 W. With 25% slack (1.5 steps/s):
  // b's half at speeds 2 y_fast + y_slow (y_fast + y_slow = 1/2) costs 0.125 + 0.75 y_fast W, a
  // makes up 1 - y_fast steps/s at 1 J/step: 1.125 - 0.25 y_fast, least at y_fast = 1/2 with a
  // at 1/4 of the time: 1 W.
  const Allocation agnostic = allocate(jobs, t, {1, 1}, las(false, 0.0));
  EXPECT_NEAR(agnostic.share[0][0], 0.5, 1e-5);
  EXPECT_NEAR(agnostic.power_w_total, 1.5, 1e-5);
  const Allocation slower = allocate(jobs, t, {1, 1}, las(false, 0.25));
  EXPECT_NEAR(slower.share[0][0], 0.25, 1e-5);
  EXPECT_NEAR(slower.share[0][1], 0.5, 1e-5);
  EXPECT_NEAR(slower.throughput[0], 1.5, 1e-5);
  EXPECT_NEAR(slower.power_w_total, 1.0, 1e-5);
}

TEST(EnergyStage, RefusesWhatItCannotDo) {
  const ThroughputMatrix energy = matrix_with_energy({"g"}, {{{{2.0, 1.0}}}});
  const ThroughputMatrix plain = testing::matrix_of({"g"}, {{2.0}});
  const std::vector<Job> jobs{{0, 1.0, 10.0, 0.0}};
  EXPECT_THROW(allocate(jobs, plain, {1}, las(true, 0.1)), InputError);  // no energy figures
  EXPECT_THROW(allocate(jobs, energy, {1}, las(true, 1.0)), InputError);
  EXPECT_THROW(allocate(jobs, energy, {1}, las(true, -0.1)), InputError);
  EXPECT_THROW(allocate(jobs, energy, {1}, {PolicyKind::kMinCost, true, {1.0}, 0.1}), InputError);
  // Without the stage a matrix with energy reports the fastest point's power.
  EXPECT_NEAR(allocate(jobs, energy, {1}, las(true, std::nullopt)).power_w_total, 2.0, 1e-12);
}

// A random cluster of 3 types and 6 job types (scale 1 or 2), each cell's frontier of 1-4 points
// slower and cheaper per step the further from the fastest.
ThroughputMatrix random_energy_matrix(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> speed(0.5, 10.0), joules(50.0, 500.0), drop(0.05, 0.3), saving(0.02, 0.25);
  std::vector<std::vector<std::vector<OperatingPoint>>> points(6, std::vector<std::vector<OperatingPoint>>(3));
  for (auto& row : points)
    for (std::size_t j = 0; j < row.size(); ++j) {
      if (j > 0 && rng() % 5 == 0) continue;  // cannot run there
      OperatingPoint p{speed(rng), joules(rng)};
      for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k) {
        row[j].push_back(p);
        p.steps_per_s *= 1.0 - drop(rng);
        p.joules_per_step *= 1.0 - saving(rng);
      }
    }
  return matrix_with_energy({"x", "y", "z"}, points, {1, 1, 1, 2, 2, 1});
}

TEST(EnergyStage, KeepsEveryThroughputWithinTheSlackAndNeverRaisesPower) {
  std::mt19937_64 rng(7);
  const PolicyKind kinds[] = {PolicyKind::kMaxMinFairness, PolicyKind::kFifo, PolicyKind::kShortestJobFirst,
                              PolicyKind::kMakespan, PolicyKind::kFinishTimeFairness, PolicyKind::kMaxThroughput};
  int lowered = 0, cases = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const ThroughputMatrix t = random_energy_matrix(rng);
    const std::vector<int> workers{static_cast<int>(2 + rng() % 5), static_cast<int>(2 + rng() % 5), static_cast<int>(2 + rng() % 5)};
    std::vector<Job> jobs;
    for (int m = 0, n = 3 + static_cast<int>(rng() % 20); m < n; ++m)
      jobs.push_back({static_cast<int>(rng() % 6), 1.0 + static_cast<double>(rng() % 3), 1000.0 + static_cast<double>(rng() % 9000),
                      static_cast<double>(rng() % 3600)});
    for (PolicyKind kind : kinds)
      for (bool aware : {true, false})
        for (double slack : {0.0, 0.1, 0.3}) {
          SCOPED_TRACE(::testing::Message() << "trial " << trial << " " << to_string(kind) << (aware ? " aware" : " agnostic")
                                            << " slack " << slack);
          const Allocation before = allocate(jobs, t, workers, {kind, aware, {}, std::nullopt});
          Allocation after;
          try {
            after = allocate(jobs, t, workers, {kind, aware, {}, slack});
          } catch (const SolveError& e) {
            ADD_FAILURE() << e.what();
            continue;
          }
          ++cases;
          std::vector<double> used(workers.size(), 0.0);
          for (std::size_t m = 0; m < jobs.size(); ++m) {
            EXPECT_GE(after.throughput[m], (1.0 - slack) * before.throughput[m] * (1.0 - 2e-6)) << "job " << m;
            double total = 0.0, tput = 0.0;
            for (std::size_t j = 0; j < workers.size(); ++j) {
              total += after.share[m][j];
              tput += after.share[m][j] * after.speed[m][j];
              used[j] += after.share[m][j] * t.job_types[static_cast<std::size_t>(jobs[m].type)].scale_factor;
              if (after.share[m][j] > 0.0) {
                // A mix of the cell's points: between its slowest and fastest speed.
                const auto& cell = t.operating_points[static_cast<std::size_t>(jobs[m].type)][j];
                EXPECT_LE(after.speed[m][j], cell.front().steps_per_s * (1.0 + 1e-9));
                EXPECT_GE(after.speed[m][j], cell.back().steps_per_s * (1.0 - 1e-9));
              }
              if (!aware) {
                EXPECT_LE(after.share[m][j], before.share[m][j] + 1e-9);
              }
            }
            EXPECT_LE(total, 1.0 + 1e-6);
            EXPECT_NEAR(tput, after.throughput[m], 1e-9 * std::max(1.0, tput));
          }
          for (std::size_t j = 0; j < workers.size(); ++j) EXPECT_LE(used[j], workers[j] + 1e-6);
          EXPECT_LE(after.power_w_total, before.power_w_total * (1.0 + 1e-7) + 1e-9);
          lowered += after.power_w_total < before.power_w_total * (1.0 - 0.01) ? 1 : 0;
        }
  }
  // The stage is not a no-op: most cases with slack find power to save.
  EXPECT_GT(lowered, cases / 2);
}

}  // namespace
}  // namespace perseus::cluster
