#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "matrices.hpp"

#include "perseus/cluster/allocation_lp.hpp"
#include "perseus/cluster/jobs.hpp"
#include "perseus/cluster/policies.hpp"
#include "perseus/cluster/pooled_requirements.hpp"

namespace perseus::cluster {
namespace {

using testing::matrix_of;

std::vector<Job> one_job_per_type(const ThroughputMatrix& t, double steps = 0.0) {
  std::vector<Job> jobs;
  for (int m = 0; m < t.num_job_types(); ++m) jobs.push_back({m, 1.0, steps, 0.0});
  return jobs;
}

// Every row and column constraint of a valid allocation, its pairs of jobs sharing GPUs included
// (their time counts for both jobs, their GPUs once).
void expect_valid(const Allocation& a, const std::vector<Job>& jobs, const ThroughputMatrix& t, const std::vector<int>& workers) {
  ASSERT_EQ(a.share.size(), jobs.size());
  std::vector<double> used(workers.size(), 0.0), time(jobs.size(), 0.0), tput(jobs.size(), 0.0);
  for (std::size_t m = 0; m < jobs.size(); ++m) {
    for (std::size_t j = 0; j < workers.size(); ++j) {
      const double x = a.share[m][j];
      EXPECT_GE(x, -1e-9);
      if (t.at(jobs[m].type, static_cast<int>(j)) == 0.0) {
        EXPECT_EQ(x, 0.0);
      }
      time[m] += x;
      used[j] += x * t.job_types[jobs[m].type].scale_factor;
    }
    tput[m] = effective_throughput(t, jobs[m].type, a.share[m]);
  }
  for (const SharedShare& p : a.pairs) {
    ASSERT_LT(p.first, p.second);
    const auto first = static_cast<std::size_t>(p.first), second = static_cast<std::size_t>(p.second);
    EXPECT_EQ(t.job_types[jobs[first].type].scale_factor, t.job_types[jobs[second].type].scale_factor);
    for (std::size_t j = 0; j < workers.size(); ++j) {
      EXPECT_GE(p.share[j], 0.0);
      if (p.share[j] == 0.0) continue;
      const auto speeds = t.shared_speeds(jobs[first].type, jobs[second].type, static_cast<int>(j));
      ASSERT_TRUE(speeds) << "pair " << p.first << "," << p.second << " on " << t.gpu_types[j] << " was never measured";
      time[first] += p.share[j], time[second] += p.share[j];
      tput[first] += p.share[j] * speeds->first, tput[second] += p.share[j] * speeds->second;
      used[j] += p.share[j] * t.job_types[jobs[first].type].scale_factor;
    }
  }
  for (std::size_t m = 0; m < jobs.size(); ++m) {
    EXPECT_LE(time[m], 1.0 + 1e-6) << "job " << m;
    EXPECT_NEAR(a.throughput[m], tput[m], 1e-9 * std::max(1.0, tput[m])) << "job " << m;
  }
  for (std::size_t j = 0; j < workers.size(); ++j) EXPECT_LE(used[j], workers[j] + 1e-6) << t.gpu_types[j];
}

// min_m scale_m / w_m * tput(m, X) / tput(m, X_equal): the max-min fairness objective of any X.
double fairness_of(const std::vector<std::vector<double>>& share, const std::vector<Job>& jobs, const ThroughputMatrix& t,
                   const std::vector<int>& workers) {
  const auto equal = equal_share(jobs, t, workers);
  double level = std::numeric_limits<double>::infinity();
  for (std::size_t m = 0; m < jobs.size(); ++m)
    level = std::min(level, t.job_types[jobs[m].type].scale_factor / jobs[m].weight *
                                effective_throughput(t, jobs[m].type, share[m]) /
                                effective_throughput(t, jobs[m].type, equal[m]));
  return level;
}

TEST(MaxMinFairness, TheDissertationsExampleSolvedByHand) {
  // §5.4.1: T = (40, 10; 12, 4; 100, 50) on 1 V100 and 1 K80, normalised by an equal share of
  // each (25, 8 and 75 steps/s). By hand: job 0 only on the V100 (a), job 2 on the K80 (e) and the
  // V100 (d) with d + e = 1, job 1 on the V100 (b) and the K80 left (c = 1 - e = d); at the level
  // t: 40a = 25t, 50 + 50d = 75t, 12b + 4d = 8t, and a + b + d = 1, so t = 8/11, a = b = 5/11,
  // c = d = 1/11, e = 10/11: the allocation the dissertation prints, rounded (0.45, 0.09, 0.91).
  const ThroughputMatrix t = matrix_of({"v100", "k80"}, {{40, 10}, {12, 4}, {100, 50}});
  const std::vector<int> workers{1, 1};
  const auto jobs = one_job_per_type(t);
  const Allocation a = allocate(jobs, t, workers, {PolicyKind::kMaxMinFairness, true, {}, {}});
  expect_valid(a, jobs, t, workers);
  EXPECT_NEAR(a.objective, 8.0 / 11.0, 1e-9);
  EXPECT_NEAR(fairness_of(a.share, jobs, t, workers), 8.0 / 11.0, 1e-7);
  const std::vector<std::vector<double>> printed = {{0.45, 0.0}, {0.45, 0.09}, {0.09, 0.91}};
  for (std::size_t m = 0; m < 3; ++m)
    for (std::size_t j = 0; j < 2; ++j) EXPECT_NEAR(a.share[m][j], printed[m][j], 0.006) << m << "," << j;
  // About 10% over 1/n of each GPU (the isolated allocation), as the text says.
  EXPECT_NEAR(fairness_of(a.share, jobs, t, workers) / fairness_of(isolated_share(jobs, t, workers), jobs, t, workers), 1.09, 0.01);
}

TEST(MaxMinFairness, AgnosticSharesTimeAndAwareDoesBetterOnTheRealMatrix) {
  const ThroughputMatrix t = matrix_of({"v100", "k80"}, {{40, 10}, {12, 4}, {100, 50}});
  const std::vector<int> workers{1, 1};
  const auto jobs = one_job_per_type(t);
  const Allocation agnostic = allocate(jobs, t, workers, {PolicyKind::kMaxMinFairness, false, {}, {}});
  expect_valid(agnostic, jobs, t, workers);
  EXPECT_NEAR(agnostic.objective, 2.0 / 3.0, 1e-9);  // two GPUs' time over three jobs
  for (const auto& row : agnostic.share) EXPECT_NEAR(row[0] + row[1], 2.0 / 3.0, 1e-7);
  const Allocation aware = allocate(jobs, t, workers, {PolicyKind::kMaxMinFairness, true, {}, {}});
  EXPECT_GT(fairness_of(aware.share, jobs, t, workers), fairness_of(agnostic.share, jobs, t, workers) + 0.01);
}

TEST(MaxMinFairness, WeightsAndScaleFactors) {
  // Two GPUs of one type: weight 3 asks for three times job 1's share, a 2-GPU job counts its
  // share twice. At the level t: x0 = 3t, x1 = t, x2 = t/2, but x0 <= 1, so t = 1/3. (The third
  // of a GPU left over is water filling's to hand out, not a single max-min LP's.)
  const ThroughputMatrix t = matrix_of({"a100"}, {{1.0}, {1.0}, {1.0}}, {1, 1, 2});
  std::vector<Job> jobs = one_job_per_type(t);
  jobs[0].weight = 3.0;
  const std::vector<int> workers{2};
  const Allocation a = allocate(jobs, t, workers, {PolicyKind::kMaxMinFairness, true, {}, {}});
  expect_valid(a, jobs, t, workers);
  EXPECT_NEAR(a.objective, 1.0 / 3.0, 1e-9);
  EXPECT_NEAR(a.share[0][0], 1.0, 1e-7);
  EXPECT_GE(a.share[1][0], 1.0 / 3.0 - 1e-7);
  EXPECT_GE(a.share[2][0], 1.0 / 6.0 - 1e-7);
}

TEST(Policies, SharingIncentiveOnRandomClusters) {
  // Giving each job 1/n of every GPU type is feasible, so no policy may do worse than it by its
  // own objective (§5.4.4): max-min fairness at least its level, finish-time fairness rho <= 1.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> speed(0.5, 20.0);
  for (int trial = 0; trial < 40; ++trial) {
    const int types = 1 + trial % 3, job_types = 2 + trial % 6;
    std::vector<std::string> gpus;
    std::vector<int> workers;
    for (int j = 0; j < types; ++j) gpus.push_back("g" + std::to_string(j)), workers.push_back(2 + static_cast<int>(rng() % 6));
    std::vector<std::vector<double>> rows(job_types, std::vector<double>(types));
    std::vector<int> scales;
    for (auto& row : rows) {
      for (double& v : row) v = rng() % 5 == 0 ? 0.0 : speed(rng);
      if (*std::max_element(row.begin(), row.end()) == 0.0) row[0] = 1.0;
      scales.push_back(rng() % 4 == 0 ? 2 : 1);
    }
    const ThroughputMatrix t = matrix_of(gpus, rows, scales);
    std::vector<Job> jobs;
    for (int m = 0; m < job_types + trial % 5; ++m)
      jobs.push_back({m % job_types, 0.5 + (rng() % 4), 1000.0 * (1 + rng() % 50), static_cast<double>(rng() % 100)});
    const Allocation las = allocate(jobs, t, workers, {PolicyKind::kMaxMinFairness, true, {}, {}});
    expect_valid(las, jobs, t, workers);
    EXPECT_GE(las.objective, fairness_of(isolated_share(jobs, t, workers), jobs, t, workers) - 1e-7) << trial;
    EXPECT_NEAR(las.objective, fairness_of(las.share, jobs, t, workers), 1e-6 * las.objective) << trial;
    const Allocation ftf = allocate(jobs, t, workers, {PolicyKind::kFinishTimeFairness, true, {}, {}});
    expect_valid(ftf, jobs, t, workers);
    EXPECT_LE(ftf.objective, 1.0 + 1e-9) << trial;
    // The allocation returned meets the rho it reports.
    const auto isolated = isolated_share(jobs, t, workers);
    for (std::size_t m = 0; m < jobs.size(); ++m) {
      const double mine = jobs[m].elapsed_s + jobs[m].steps / ftf.throughput[m];
      const double alone = jobs[m].elapsed_s + jobs[m].steps / effective_throughput(t, jobs[m].type, isolated[m]);
      EXPECT_LE(mine / alone, ftf.objective * (1 + 1e-6)) << trial << " job " << m;
    }
  }
}

TEST(FinishTimeFairness, HandSolvedWhereOneJobsBestSpeedBinds) {
  // Two GPU types of one GPU each; job A runs at 2 on the first and 1 on the second, B the other
  // way round, 3 steps each, A 2 s in already. Alone on half of each type both run at 1.5:
  // D_A = 2 + 3 / 1.5 = 4, D_B = 2. A can run at most at 2 (all of the first type), so
  // rho_A >= (2 + 3 / 2) / 4 = 0.875 whatever X is, and the first type all A's with B on the
  // second (rho_B = 0.75) reaches it: R = 0.875, and the rest (the second type) goes to B.
  const ThroughputMatrix t = matrix_of({"g0", "g1"}, {{2.0, 1.0}, {1.0, 2.0}});
  const std::vector<Job> jobs{{0, 1.0, 3.0, 2.0}, {1, 1.0, 3.0, 0.0}};
  const Allocation a = allocate(jobs, t, {1, 1}, {PolicyKind::kFinishTimeFairness, true, {}, {}});
  expect_valid(a, jobs, t, {1, 1});
  EXPECT_NEAR(a.objective, 0.875, 1e-9);
  EXPECT_NEAR(a.throughput[0], 2.0, 1e-9);
  EXPECT_NEAR(a.throughput[1], 2.0, 1e-9);
}

// Whether some valid X reaches rho_m <= R for every job: tput_m(X) >= s_m / (R D_m - t_m), one
// feasibility LP (the policy's own iterations do not enter it).
bool some_allocation_reaches(double R, const std::vector<Job>& jobs, const ThroughputMatrix& t, const std::vector<int>& workers,
                             bool aware, bool space_sharing) {
  const auto isolated = isolated_share(jobs, t, workers);
  AllocationLp a(jobs, t, workers, LinearProgram::Sense::kMaximize, aware, space_sharing);
  for (std::size_t m = 0; m < jobs.size(); ++m) {
    double alone = 0.0;
    for (int j = 0; j < t.num_gpu_types(); ++j) alone += seen(t, jobs[m], j, aware) * isolated[m][static_cast<std::size_t>(j)];
    const double slack = R * (jobs[m].elapsed_s + jobs[m].steps / alone) - jobs[m].elapsed_s;
    if (slack <= 0.0) return false;
    a.lp.add_row(a.terms(m, [](const Term& term) { return term.seen; }), jobs[m].steps / slack, kInfinity);
  }
  return a.lp.solve().optimal;
}

TEST(FinishTimeFairness, NoAllocationReachesALowerRho) {
  // The R the policy reports is the optimum: reached by its X (each job's rho within it) and by
  // no X at R (1 - 1e-5), on Gavel's matrix with jobs that have run for different times, aware,
  // agnostic and with space sharing, in a few LPs each (bisection on R took ~32).
  const ThroughputMatrix t = read_gavel_throughputs(bundled_gavel_throughputs());
  const std::vector<int> workers{4, 4, 4};
  for (const int count : {6, 20, 60}) {
    for (const double hours : {0.0, 1.0, 20.0}) {
      std::vector<Job> jobs = random_jobs(t, count, 11 + static_cast<std::uint64_t>(count));
      for (std::size_t m = 0; m < jobs.size(); ++m) jobs[m].elapsed_s = 3600.0 * hours * static_cast<double>(m % 7) / 6.0;
      for (const auto& [aware, space_sharing] : {std::pair{true, false}, std::pair{false, false}, std::pair{true, true}}) {
        const Allocation a = allocate(jobs, t, workers, PolicySpec(PolicyKind::kFinishTimeFairness, aware, {}, std::nullopt, space_sharing));
        const std::string name = fmt::format("{} jobs, {} h, aware {}, space sharing {}", count, hours, aware, space_sharing);
        expect_valid(a, jobs, t, workers);
        const auto isolated = isolated_share(jobs, t, workers);
        for (std::size_t m = 0; m < jobs.size(); ++m) {
          const double mine = jobs[m].elapsed_s + jobs[m].steps / a.throughput[m];
          const double alone = jobs[m].elapsed_s + jobs[m].steps / effective_throughput(t, jobs[m].type, isolated[m]);
          if (aware) {
            EXPECT_LE(mine / alone, a.objective * (1 + 1e-6)) << name << " job " << m;
          }
        }
        EXPECT_TRUE(some_allocation_reaches(a.objective * (1 + 1e-5), jobs, t, workers, aware, space_sharing)) << name;
        EXPECT_FALSE(some_allocation_reaches(a.objective * (1 - 1e-5), jobs, t, workers, aware, space_sharing)) << name;
        // Dinkelbach's few steps; with space sharing each step's pooled LP counts its rounds of
        // cuts and its split per job type as solves, a few dozen small LPs a step.
        EXPECT_LE(a.lp_solves, space_sharing ? 40 * 4 : 10) << name;
      }
    }
  }
}

TEST(Makespan, OneGpuTypeIsTheClosedForm) {
  // W identical GPUs: the makespan is the larger of the longest job alone and the total work over W.
  const ThroughputMatrix t = matrix_of({"v100"}, {{10.0}, {5.0}, {2.0}});
  auto jobs = one_job_per_type(t, 0.0);
  jobs[0].steps = 1000, jobs[1].steps = 100, jobs[2].steps = 100;  // 100 s, 20 s, 50 s alone
  const Allocation two = allocate(jobs, t, {2}, {PolicyKind::kMakespan, true, {}, {}});
  expect_valid(two, jobs, t, {2});
  EXPECT_NEAR(two.objective, 100.0, 1e-6);  // total 170 s over 2 GPUs = 85 s < 100 s
  const Allocation one = allocate(jobs, t, {1}, {PolicyKind::kMakespan, true, {}, {}});
  EXPECT_NEAR(one.objective, 170.0, 1e-6);
}

TEST(Makespan, AwarePutsEachJobWhereItGainsMost) {
  // Job 0 is 10x faster on the V100, job 1 only 1.25x. By hand: job 1 takes c of the V100 and
  // 1 - c of the K80, job 0 the rest of both: 10 (1 - c) + c = 5c + 4 (1 - c), so c = 0.6 and
  // both run at 4.6 steps/s: 1000 steps in 217.4 s.
  const ThroughputMatrix t = matrix_of({"v100", "k80"}, {{10.0, 1.0}, {5.0, 4.0}});
  auto jobs = one_job_per_type(t, 1000.0);
  const Allocation aware = allocate(jobs, t, {1, 1}, {PolicyKind::kMakespan, true, {}, {}});
  const Allocation agnostic = allocate(jobs, t, {1, 1}, {PolicyKind::kMakespan, false, {}, {}});
  EXPECT_NEAR(aware.objective, 1000.0 / 4.6, 1e-6);
  EXPECT_NEAR(aware.share[1][0], 0.6, 1e-7);
  const auto makespan = [&](const Allocation& a) {
    return std::max(jobs[0].steps / a.throughput[0], jobs[1].steps / a.throughput[1]);
  };
  EXPECT_NEAR(makespan(aware), aware.objective, 1e-6);
  EXPECT_LT(makespan(aware), makespan(agnostic));
}

TEST(Fifo, TheFirstJobGetsTheFastestGpu) {
  const ThroughputMatrix t = matrix_of({"v100", "k80"}, {{10.0, 2.0}, {10.0, 2.0}, {10.0, 2.0}});
  const auto jobs = one_job_per_type(t);
  const Allocation a = allocate(jobs, t, {1, 1}, {PolicyKind::kFifo, true, {}, {}});
  expect_valid(a, jobs, t, {1, 1});
  EXPECT_NEAR(a.share[0][0], 1.0, 1e-7);
  EXPECT_NEAR(a.share[1][1], 1.0, 1e-7);
  EXPECT_NEAR(a.share[2][0] + a.share[2][1], 0.0, 1e-7);
}

TEST(Policies, BadInputIsNamed) {
  const ThroughputMatrix t = matrix_of({"v100"}, {{1.0}});
  auto jobs = one_job_per_type(t);
  EXPECT_THROW(allocate(jobs, t, {1, 2}, {}), InputError);  // GPU counts vs types
  jobs[0].weight = -1.0;
  try {
    allocate(jobs, t, {1}, {});
    ADD_FAILURE() << "a negative weight was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("weight -1"), std::string::npos) << e.what();
  }
  jobs[0].weight = 1.0;
  EXPECT_THROW(allocate(jobs, t, {1}, {PolicyKind::kMakespan, true, {}, {}}), InputError);  // no steps
  EXPECT_THROW(parse_policy("round-robin"), InputError);
  EXPECT_EQ(parse_policy("LAS"), PolicyKind::kMaxMinFairness);
}

TEST(ShortestJobFirst, TheShortestJobGetsTheGpu) {
  // One GPU, three jobs of one type: the job with the fewest steps left runs, whatever its place.
  const ThroughputMatrix t = matrix_of({"v100"}, {{2.0}});
  const std::vector<Job> jobs = {{0, 1.0, 900.0, 0.0}, {0, 1.0, 100.0, 0.0}, {0, 1.0, 500.0, 0.0}};
  const Allocation a = allocate(jobs, t, {1}, {PolicyKind::kShortestJobFirst, true, {}, {}});
  EXPECT_NEAR(a.share[1][0], 1.0, 1e-9);
  EXPECT_NEAR(a.share[0][0] + a.share[2][0], 0.0, 1e-9);
  const Allocation fifo = allocate(jobs, t, {1}, {PolicyKind::kFifo, true, {}, {}});
  EXPECT_NEAR(fifo.share[0][0], 1.0, 1e-9);
}

// Job 0 is 10x faster on the V100, job 1 only 1.25x; one GPU of each.
const ThroughputMatrix kTwoJobs = matrix_of({"v100", "k80"}, {{10.0, 1.0}, {5.0, 4.0}});

TEST(MaxThroughput, HandSolved) {
  // Work counts each job's best speed as 1: job 0 on the V100 and job 1 on the K80 give
  // 1 + 4/5 = 1.8; swapped, 0.1 + 1 = 1.1.
  const Allocation a = allocate(one_job_per_type(kTwoJobs), kTwoJobs, {1, 1}, {PolicyKind::kMaxThroughput, true, {}, {}});
  EXPECT_NEAR(a.objective, 1.8, 1e-9);
  EXPECT_NEAR(a.share[0][0], 1.0, 1e-9);
  EXPECT_NEAR(a.share[1][1], 1.0, 1e-9);
}

TEST(MinCost, HandSolvedWithAndWithoutAnSlo) {
  const PolicySpec cost{PolicyKind::kMinCost, true, {3.0, 1.0}, {}};
  // Work per dollar: job 0 1/3 on the V100, 0.1 on the K80; job 1 1/3 and 0.8.
  const Allocation a = allocate(one_job_per_type(kTwoJobs), kTwoJobs, {1, 1}, cost);
  EXPECT_NEAR(a.objective, 1.0 / 3.0 + 0.8, 1e-9);
  EXPECT_NEAR(a.share[1][1], 1.0, 1e-9);
  // Job 1 must finish 1000 steps in 200 s: 5 steps/s, the V100's whole time. Job 0 takes the K80.
  std::vector<Job> jobs = one_job_per_type(kTwoJobs, 1000.0);
  jobs[1].slo_s = 200.0;
  const Allocation slo = allocate(jobs, kTwoJobs, {1, 1}, {PolicyKind::kMinCostSlo, true, {3.0, 1.0}, {}});
  EXPECT_NEAR(slo.share[1][0], 1.0, 1e-7);
  EXPECT_NEAR(slo.share[0][1], 1.0, 1e-7);
  EXPECT_NEAR(slo.objective, 1.0 / 3.0 + 0.1, 1e-7);
  EXPECT_GE(slo.throughput[1], 5.0 - 1e-6);
}

TEST(MinCost, SlosThatCannotBeMetAreNamed) {
  std::vector<Job> jobs = one_job_per_type(kTwoJobs, 1000.0);
  jobs[1].slo_s = 150.0;  // 6.7 steps/s: more than its best GPU's 5
  try {
    allocate(jobs, kTwoJobs, {1, 1}, {PolicyKind::kMinCostSlo, true, {3.0, 1.0}, {}});
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("job 1 (job1 x1): its SLO needs"), std::string::npos) << e.what();
  }
  // Two such jobs, one V100: each alone can, together they cannot.
  std::vector<Job> two = {{1, 1.0, 1000.0, 0.0, 200.0}, {1, 1.0, 1000.0, 0.0, 200.0}};
  EXPECT_THROW(allocate(two, kTwoJobs, {1, 1}, {PolicyKind::kMinCostSlo, true, {3.0, 1.0}, {}}), InputError);
  // Prices are needed, one per type, > 0.
  EXPECT_THROW(allocate(jobs, kTwoJobs, {1, 1}, {PolicyKind::kMinCost, true, {}, {}}), InputError);
  EXPECT_THROW(allocate(jobs, kTwoJobs, {1, 1}, {PolicyKind::kMinCost, true, {3.0, 0.0}, {}}), InputError);
}

// One V100; job types 0 and 1 run at 1 step/s alone and at `a` and `b` together.
ThroughputMatrix pair_matrix(double a, double b) {
  ThroughputMatrix t = matrix_of({"v100"}, {{1.0}, {1.0}});
  t.shared[{0, 1, 0}] = {a, b};
  return t;
}

PolicySpec sharing(PolicyKind policy) { return {policy, true, {}, {}, true}; }

TEST(SpaceSharing, MaxMinFairnessSolvedByHand) {
  // Together z of the time, alone x0 and x1: maximise t with x0 + 0.8 z >= t, x1 + 0.6 z >= t,
  // x0 + x1 + z <= 1. Adding the first two: t <= (1 + 0.4 z) / 2, growing with z until x0 = 0.5 -
  // 0.6 z reaches 0: z = 5/6, x1 = 1/6, t = 2/3 (taking turns: 1/2).
  const ThroughputMatrix t = pair_matrix(0.8, 0.6);
  const auto jobs = one_job_per_type(t);
  const Allocation a = allocate(jobs, t, {1}, sharing(PolicyKind::kMaxMinFairness));
  expect_valid(a, jobs, t, {1});
  EXPECT_NEAR(a.objective, 2.0 / 3.0, 1e-9);
  ASSERT_EQ(a.pairs.size(), 1u);
  EXPECT_EQ(a.pairs[0].first, 0);
  EXPECT_EQ(a.pairs[0].second, 1);
  EXPECT_NEAR(a.pairs[0].share[0], 5.0 / 6.0, 1e-7);
  EXPECT_NEAR(a.share[0][0], 0.0, 1e-7);
  EXPECT_NEAR(a.share[1][0], 1.0 / 6.0, 1e-7);
  EXPECT_NEAR(a.throughput[0], 2.0 / 3.0, 1e-7);
  EXPECT_NEAR(a.throughput[1], 2.0 / 3.0, 1e-7);
  EXPECT_NEAR(allocate(jobs, t, {1}, {PolicyKind::kMaxMinFairness, true, {}, {}}).objective, 0.5, 1e-9);
}

TEST(SpaceSharing, APairThatLosesToTakingTurnsIsNotOffered) {
  // 0.5 + 0.4 < 1: sharing gives less than alternating.
  const ThroughputMatrix t = pair_matrix(0.5, 0.4);
  const auto jobs = one_job_per_type(t);
  for (const PolicyKind p : {PolicyKind::kMaxMinFairness, PolicyKind::kMaxThroughput}) {
    const Allocation a = allocate(jobs, t, {1}, sharing(p));
    EXPECT_TRUE(a.pairs.empty()) << to_string(p);
    EXPECT_NEAR(a.objective, allocate(jobs, t, {1}, {p, true, {}, {}}).objective, 1e-9) << to_string(p);
  }
}

TEST(SpaceSharing, JobsOfOneTypeShareInARing) {
  // Three jobs of one type, 0.7 each when two share: all the GPU's time in pairs gives each job
  // 2/3 of its time at 0.7, 1.4/3 steps/s (taking turns: 1/3). Max-min fairness solves one class
  // of three copies; the spread pairs the three in a ring, each pair a third of the time.
  ThroughputMatrix t = matrix_of({"v100"}, {{1.0}});
  t.shared[{0, 0, 0}] = {0.7, 0.7};
  const std::vector<Job> jobs(3, Job{0, 1.0, 100.0, 0.0});
  const Allocation a = allocate(jobs, t, {1}, sharing(PolicyKind::kMaxMinFairness));
  expect_valid(a, jobs, t, {1});
  EXPECT_NEAR(a.objective, 1.4 / 3.0, 1e-9);
  ASSERT_EQ(a.pairs.size(), 3u);
  for (const SharedShare& p : a.pairs) EXPECT_NEAR(p.share[0], 1.0 / 3.0, 1e-7);
  for (double tput : a.throughput) EXPECT_NEAR(tput, 1.4 / 3.0, 1e-7);
  // Per job (FIFO's LP has a row per job), the same pairing is found without classes.
  const Allocation fifo = allocate(jobs, t, {1}, sharing(PolicyKind::kMaxThroughput));
  expect_valid(fifo, jobs, t, {1});
  EXPECT_NEAR(fifo.objective, 1.4, 1e-9);
  // Makespan pools the type's jobs (pooled_requirements.hpp): the same ring, every job two thirds
  // of its time in pairs (none more than half the pairs' time), makespan 100 / (1.4 / 3).
  const Allocation makespan = allocate(jobs, t, {1}, sharing(PolicyKind::kMakespan));
  expect_valid(makespan, jobs, t, {1});
  EXPECT_NEAR(makespan.objective, 300.0 / 1.4, 1e-6);
  ASSERT_EQ(makespan.pairs.size(), 3u);
  for (double tput : makespan.throughput) EXPECT_NEAR(tput, 1.4 / 3.0, 1e-6);
  // One job alone cannot pair with itself.
  const Allocation one = allocate({jobs[0]}, t, {1}, sharing(PolicyKind::kMaxMinFairness));
  EXPECT_TRUE(one.pairs.empty());
  EXPECT_NEAR(one.throughput[0], 1.0, 1e-9);
}

TEST(SpaceSharing, NeverWorseOnGavelsMatrixAndEveryJobOfAClassAlike) {
  // The dissertation's §5.4.4: solutions with space sharing are at least as good as without, by
  // each policy's own objective (taking turns stays feasible). A small cluster, so that GPUs are
  // scarce and pairs pay.
  const ThroughputMatrix t = read_gavel_throughputs(bundled_gavel_throughputs());
  const std::vector<int> workers{4, 4, 4};
  struct Case {
    PolicyKind policy;
    bool lower_is_better;
  };
  for (const Case c : {Case{PolicyKind::kMaxMinFairness, false}, Case{PolicyKind::kFifo, false}, Case{PolicyKind::kShortestJobFirst, false},
                       Case{PolicyKind::kMaxThroughput, false}, Case{PolicyKind::kMakespan, true},
                       Case{PolicyKind::kFinishTimeFairness, true}}) {
    for (const int count : {12, 40}) {
      std::vector<Job> jobs = random_jobs(t, count, 3 + static_cast<std::uint64_t>(count));
      // Two weights: max-min fairness then has two rows (classes) of most types, each side of a
      // pair of types spread over jobs of unequal time.
      for (std::size_t m = 0; m < jobs.size(); ++m) jobs[m].elapsed_s = 600.0 * static_cast<double>(m % 4), jobs[m].weight = 1.0 + m % 2;
      const Allocation alone = allocate(jobs, t, workers, {c.policy, true, {}, {}});
      const Allocation shared = allocate(jobs, t, workers, sharing(c.policy));
      expect_valid(shared, jobs, t, workers);
      const double tolerance = 1e-6 * std::abs(alone.objective);
      if (c.lower_is_better) {
        EXPECT_LE(shared.objective, alone.objective + tolerance) << to_string(c.policy) << " " << count;
      } else {
        EXPECT_GE(shared.objective, alone.objective - tolerance) << to_string(c.policy) << " " << count;
      }
      if (c.policy != PolicyKind::kMaxMinFairness) continue;
      if (count == 40) {
        EXPECT_GT(shared.objective, alone.objective * 1.05);  // 40 jobs on 12 GPUs: pairs pay
      }
      for (std::size_t m = 0; m < jobs.size(); ++m)
        for (std::size_t n = m + 1; n < jobs.size(); ++n)
          if (jobs[m].type == jobs[n].type && jobs[m].weight == jobs[n].weight) {
            EXPECT_NEAR(shared.throughput[m], shared.throughput[n], 1e-7 * shared.throughput[m]) << m << " " << n;
          }
    }
  }
}

// The job-by-job makespan LP with space sharing (a w per job, partner type and GPU type), which
// the pooled LP replaces: its optimum, 1 / makespan. Steps are counted in units of the largest
// job's, so that the rows' coefficients are near 1 (with steps of 10^6 and rates of 10^-6 CLP's
// tolerances leave the optimum some 0.3% short at 150 jobs).
double job_by_job_makespan_rate(const std::vector<Job>& jobs, const ThroughputMatrix& t, const std::vector<int>& workers) {
  AllocationLp a(jobs, t, workers, LinearProgram::Sense::kMaximize, true, true);
  double unit = 0.0;
  for (const Job& job : jobs) unit = std::max(unit, job.steps);
  const int rate = a.lp.add_variable(0.0, kInfinity, 1.0);
  for (std::size_t m = 0; m < jobs.size(); ++m) {
    auto row = a.terms(m, [](const Term& term) { return term.seen; });
    row.emplace_back(rate, -jobs[m].steps / unit);
    a.lp.add_row(row, 0.0, kInfinity);
  }
  const auto s = a.lp.solve();
  EXPECT_TRUE(s.optimal);
  return s.objective / unit;
}

TEST(SpaceSharing, PooledMakespanHandSolvedWhereOneJobNeedsMoreThanItsOwnTime) {
  // One type, a fast GPU (2 steps/s) and a slow one (1), jobs of 3 and 1 steps. Pooled by work
  // alone, 3 r + r <= 2 + 1 gives r = 3/4; but the long job has one unit of time, at most 2
  // steps/s: r = 2/3, makespan 1.5 (the cut at lambda = 1: (3r - 1) <= A_fast (2 - 1)). Sharing
  // a GPU loses to taking turns here (0.5 + 0.5 of the speeds' halves), so no pair is offered.
  ThroughputMatrix t = matrix_of({"fast", "slow"}, {{2.0, 1.0}});
  t.shared[{0, 0, 0}] = {0.5, 0.5};
  const std::vector<Job> jobs{{0, 1.0, 3.0, 0.0}, {0, 1.0, 1.0, 0.0}};
  const auto pooled = maximize_pooled_requirements(jobs, t, {1, 1}, {0.0, 0.0}, {3.0, 1.0}, true);
  ASSERT_TRUE(pooled);
  EXPECT_NEAR(pooled->y, 2.0 / 3.0, 1e-9);
  const Allocation a = allocate(jobs, t, {1, 1}, sharing(PolicyKind::kMakespan));
  expect_valid(a, jobs, t, {1, 1});
  EXPECT_NEAR(a.objective, 1.5, 1e-9);
  EXPECT_NEAR(a.share[0][0], 1.0, 1e-5);  // the long job has the fast GPU to itself
  EXPECT_GE(a.throughput[0], 2.0 * (1 - 1e-5));
  EXPECT_GE(a.throughput[1], 2.0 / 3.0 * (1 - 1e-5));
}

TEST(SpaceSharing, PooledMakespanMatchesTheJobByJobLpOnGavelsMatrix) {
  // The makespan policy pools each type's jobs (pooled_requirements.hpp): its optimum is the
  // job-by-job LP's, its allocation valid, every job done by the makespan, on Gavel's matrix with
  // GPUs scarce (pairs pay) and plentiful, in a few dozen small LPs instead of two large ones.
  const ThroughputMatrix t = read_gavel_throughputs(bundled_gavel_throughputs());
  for (const std::vector<int>& workers : {std::vector<int>{4, 4, 4}, std::vector<int>{36, 36, 36}}) {
    for (const int count : {12, 40, 150}) {
      const std::vector<Job> jobs = random_jobs(t, count, 5 + static_cast<std::uint64_t>(count));
      const std::string name = fmt::format("{} jobs on {} GPUs a type", count, workers[0]);
      const Allocation a = allocate(jobs, t, workers, sharing(PolicyKind::kMakespan));
      expect_valid(a, jobs, t, workers);
      const double expected = 1.0 / job_by_job_makespan_rate(jobs, t, workers);
      EXPECT_NEAR(a.objective, expected, 1e-5 * expected) << name;
      for (std::size_t m = 0; m < jobs.size(); ++m)
        EXPECT_LE(jobs[m].steps / a.throughput[m], a.objective * (1 + 1e-5)) << name << " job " << m;
      EXPECT_GT(a.lp_solves, 2) << name;  // the pooled LP's, not the job-by-job pair's
    }
  }
}

TEST(SpaceSharing, BadCombinationsAreNamed) {
  const ThroughputMatrix t = pair_matrix(0.8, 0.6);
  const auto jobs = one_job_per_type(t);
  const auto message = [&](const ThroughputMatrix& matrix, const PolicySpec& spec) {
    try {
      allocate(jobs, matrix, {1}, spec);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(t, {PolicyKind::kMaxMinFairness, false, {}, {}, true}).find("heterogeneity-aware"), std::string::npos);
  EXPECT_NE(message(matrix_of({"v100"}, {{1.0}, {1.0}}), sharing(PolicyKind::kFifo)).find("throughputs of jobs sharing"),
            std::string::npos);
  ThroughputMatrix with_energy = t;
  with_energy.operating_points = {{{{1.0, 100.0}}}, {{{1.0, 100.0}}}};
  EXPECT_NE(message(with_energy, {PolicyKind::kMaxMinFairness, true, {}, 0.1, true}).find("no energy figures"), std::string::npos);
}

TEST(Policies, SlosAreAimedARoundEarlyWhileThatCanBeMet) {
  // 3600 steps at best 2 steps/s (1800 s alone), 360 s rounds.
  EXPECT_DOUBLE_EQ(slo_to_aim(4000.0, 3600.0, 2.0, 360.0), 3640.0);  // a round early
  EXPECT_DOUBLE_EQ(slo_to_aim(2000.0, 3600.0, 2.0, 360.0), 2000.0);  // a round early is too late: the deadline
  EXPECT_EQ(slo_to_aim(1000.0, 3600.0, 2.0, 360.0), Job::kNoSlo);    // lost: binds no more
  EXPECT_EQ(slo_to_aim(-5.0, 3600.0, 2.0, 360.0), Job::kNoSlo);
  EXPECT_EQ(slo_to_aim(Job::kNoSlo, 3600.0, 2.0, 360.0), Job::kNoSlo);
  // The best speed counts only types with enough GPUs for the job.
  const ThroughputMatrix t = matrix_of({"k80", "v100"}, {{1.0, 4.0}});
  EXPECT_DOUBLE_EQ(best_speed(t, 0, {1, 1}), 4.0);
  EXPECT_DOUBLE_EQ(best_speed(t, 0, {1, 0}), 1.0);
  EXPECT_DOUBLE_EQ(best_speed(t, 0, {0, 0}), 0.0);
}

}  // namespace
}  // namespace perseus::cluster
