// The hierarchical policy (water filling): hand-solved cases, a reference leximin computed by a
// different method (one LP per job instead of the bottleneck MILP), the entity shares it
// promises, aware against agnostic, and its errors.
#include <algorithm>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "matrices.hpp"

#include "perseus/cluster/jobs.hpp"
#include "perseus/cluster/linear_program.hpp"
#include "perseus/cluster/policies.hpp"
#include "perseus/cluster/water_filling.hpp"

namespace perseus::cluster {
namespace {

using testing::matrix_of;

PolicySpec hierarchical(std::vector<Entity> entities = {}, bool aware = true) {
  PolicySpec spec;
  spec.policy = PolicyKind::kHierarchical;
  spec.heterogeneity_aware = aware;
  spec.entities = std::move(entities);
  return spec;
}

Job job_of(int type, int entity = 0, double weight = 1.0) {
  Job job;
  job.type = type;
  job.entity = entity;
  job.weight = weight;
  return job;
}

// Each class's throughput per job in a water filling's allocation, its pairs' included.
std::vector<double> class_throughputs(const WaterFilling& w, const ThroughputMatrix& t) {
  const std::vector<Job>& classes = w.grouped.classes;
  std::vector<double> out(classes.size(), 0.0);
  for (std::size_t c = 0; c < classes.size(); ++c) out[c] = effective_throughput(t, classes[c].type, w.chosen.share[c]);
  for (const PairGroup& g : w.chosen.groups) {
    const int a = classes[g.side_a.front().first].type;
    const int b = g.side_b.empty() ? a : classes[g.side_b.front().first].type;
    const auto speeds = t.shared_speeds(a, b, g.gpu_type);
    for (const auto& [row, time] : g.side_a) out[row] += time * speeds->first;
    for (const auto& [row, time] : g.side_b) out[row] += time * speeds->second;
  }
  return out;
}

TEST(WaterFilling, PooledSpaceSharingReachesTheClassByClassLevels) {
  // With space sharing the rounds run on each job type's classes pooled (pooled_requirements.hpp):
  // the same first level and every class at the same throughput as on the class-by-class LP (the
  // leximin is unique in the normalised throughputs; measured within 3.3e-4, the rounds' floors
  // being held to kFloorSlack), on Gavel's matrix, three entities, the second FIFO, GPUs scarce
  // so that pairs pay.
  const ThroughputMatrix t = read_gavel_throughputs(bundled_gavel_throughputs());
  PolicySpec spec = hierarchical({{"e0", 1.0}, {"e1", 2.0, EntityPolicy::kFifo}, {"e2", 3.0}});
  spec.space_sharing = true;
  for (const int count : {12, 40}) {
    std::vector<Job> jobs = random_jobs(t, count, 21 + static_cast<std::uint64_t>(count));
    for (std::size_t m = 0; m < jobs.size(); ++m) jobs[m].entity = static_cast<int>(m % 3), jobs[m].weight = 1.0 + m % 2;
    const std::vector<int> workers{4, 4, 4};
    const WaterFilling pooled = water_fill(jobs, t, workers, spec, Pooling::kAlways);
    const WaterFilling by_class = water_fill(jobs, t, workers, spec, Pooling::kNever);
    ASSERT_TRUE(pooled.pooled) << count << " jobs: the pooled allocation was not dealt out";
    EXPECT_FALSE(by_class.pooled);
    EXPECT_NEAR(pooled.first_level, by_class.first_level, 1e-4 * by_class.first_level) << count << " jobs";
    const auto mine = class_throughputs(pooled, t), theirs = class_throughputs(by_class, t);
    ASSERT_EQ(mine.size(), theirs.size());
    for (std::size_t c = 0; c < mine.size(); ++c)
      EXPECT_NEAR(mine[c], theirs[c], 1e-3 * std::max(theirs[c], 1e-3)) << count << " jobs, class " << c;
    if (count == 40) {
      EXPECT_GT(pooled.chosen.groups.size(), 10u);  // 40 jobs on 12 GPUs: pairs pay
    }
    // Below 128 classes allocate() runs them class by class (Pooling::kAuto).
    const Allocation a = allocate(jobs, t, workers, spec);
    EXPECT_NEAR(a.objective, by_class.first_level, 1e-9 * by_class.first_level);
  }
}

TEST(WaterFilling, TheDissertationsExampleSolvedByHand) {
  // §5.4.3: 4 identical jobs on 4 identical GPUs, job 1 of weight 3 and jobs 2-4 of weight 1. The
  // first round's LP gives job 1 a whole GPU and the others 1/3 each (level 2: 1 = 3/6 x 2);
  // job 1 is bottlenecked; the second round fills the other three to a whole GPU each.
  const ThroughputMatrix t = matrix_of({"v100"}, {{10.0}});
  const std::vector<Job> jobs{job_of(0, 0, 3.0), job_of(0), job_of(0), job_of(0)};
  const Allocation a = allocate(jobs, t, {4}, hierarchical());
  EXPECT_NEAR(a.objective, 2.0, 1e-6);
  for (std::size_t m = 0; m < jobs.size(); ++m) EXPECT_NEAR(a.share[m][0], 1.0, 1e-5) << m;
}

TEST(WaterFilling, LeftoverIsSharedFairlyNotByWork) {
  // 3 GPUs; A of weight 4 saturates at one GPU with B, C, D at 1/4 each; the 1.25 GPUs left rise
  // B, C, D together to 2/3 each (maximising work alone could give them in any split). Four job
  // types alike, so that no two jobs share an LP row and symmetry alone cannot split it evenly.
  const ThroughputMatrix t = matrix_of({"v100"}, {{10.0}, {10.0}, {10.0}, {10.0}});
  const std::vector<Job> jobs{job_of(0, 0, 4.0), job_of(1), job_of(2), job_of(3)};
  const Allocation a = allocate(jobs, t, {3}, hierarchical());
  EXPECT_NEAR(a.share[0][0], 1.0, 1e-5);
  for (std::size_t m = 1; m < jobs.size(); ++m) EXPECT_NEAR(a.share[m][0], 2.0 / 3.0, 1e-5) << m;
}

TEST(WaterFilling, FairnessAcrossEntitiesFifoWithinOne) {
  // Product (fairness) and research (FIFO), equal weights, 4 GPUs; jobs in arrival order R1 P1 R2
  // P2 R3. Round 1: R1 (all of research's weight) rises to a whole GPU at level 1, P1 and P2
  // (1/2 each) to 1/2; R1 is bottlenecked. Round 2: R2 takes research's weight; level 1 more
  // fills P1, P2 and R2 to a whole GPU and the cluster. R3 arrives last and gets nothing.
  const ThroughputMatrix t = matrix_of({"v100"}, {{10.0}});
  const std::vector<Entity> entities{{"product", 1.0, EntityPolicy::kFairness}, {"research", 1.0, EntityPolicy::kFifo}};
  const std::vector<Job> jobs{job_of(0, 1), job_of(0, 0), job_of(0, 1), job_of(0, 0), job_of(0, 1)};
  const Allocation a = allocate(jobs, t, {4}, hierarchical(entities));
  const std::vector<double> expected{1.0, 1.0, 1.0, 1.0, 0.0};
  for (std::size_t m = 0; m < jobs.size(); ++m) EXPECT_NEAR(a.share[m][0], expected[m], 1e-5) << m;
}

TEST(WaterFilling, EntitiesShareInProportionToTheirWeights) {
  // Research (FIFO) weighs 3, product (fairness) 1, 4 GPUs, 4 jobs each. Each round research's
  // head rises to a whole GPU at level 1/3 while product's four jobs gain 1/12 each: after three
  // rounds research holds 3 GPUs and product 1 (3:1), and the cluster is full.
  const ThroughputMatrix t = matrix_of({"v100"}, {{10.0}});
  const std::vector<Entity> entities{{"product", 1.0, EntityPolicy::kFairness}, {"research", 3.0, EntityPolicy::kFifo}};
  std::vector<Job> jobs;
  for (int k = 0; k < 4; ++k) jobs.push_back(job_of(0, 1)), jobs.push_back(job_of(0, 0));
  const Allocation a = allocate(jobs, t, {4}, hierarchical(entities));
  EXPECT_NEAR(a.objective, 1.0 / 3.0, 1e-6);
  const std::vector<double> research{1.0, 1.0, 1.0, 0.0};
  for (int k = 0; k < 4; ++k) {
    EXPECT_NEAR(a.share[2 * k][0], research[k], 1e-5) << "research job " << k;
    EXPECT_NEAR(a.share[2 * k + 1][0], 0.25, 1e-5) << "product job " << k;
  }
}

// The leximin allocation of weighted normalised throughputs, by progressive filling with one LP
// per job to find who is bottlenecked (aware, single-GPU jobs, one entity): the reference the
// MILP's answer must match.
std::vector<double> leximin_reference(const std::vector<Job>& jobs, const ThroughputMatrix& t, const std::vector<int>& workers) {
  const std::size_t M = jobs.size(), J = workers.size();
  const auto equal = equal_share(jobs, t, workers);
  std::vector<double> factor(M), floor(M, 0.0);
  std::vector<bool> frozen(M, false);
  for (std::size_t m = 0; m < M; ++m) factor[m] = 1.0 / effective_throughput(t, jobs[m].type, equal[m]);
  // An LP over x[m][j] with validity rows, floors held; `extra` adds rows and objective.
  const auto solve = [&](auto extra) {
    LinearProgram lp(LinearProgram::Sense::kMaximize);
    std::vector<std::vector<int>> x(M);
    std::vector<std::vector<std::pair<int, double>>> capacity(J);
    for (std::size_t m = 0; m < M; ++m) {
      std::vector<std::pair<int, double>> total;
      for (std::size_t j = 0; j < J; ++j) {
        x[m].push_back(lp.add_variable(0.0, t.at(jobs[m].type, static_cast<int>(j)) > 0.0 ? 1.0 : 0.0));
        total.emplace_back(x[m][j], 1.0);
        capacity[j].emplace_back(x[m][j], 1.0);
      }
      lp.add_row(total, -kInfinity, 1.0);
    }
    for (std::size_t j = 0; j < J; ++j) lp.add_row(capacity[j], -kInfinity, workers[j]);
    const auto normalised = [&](std::size_t m) {
      std::vector<std::pair<int, double>> row;
      for (std::size_t j = 0; j < J; ++j) row.emplace_back(x[m][j], factor[m] * t.at(jobs[m].type, static_cast<int>(j)));
      return row;
    };
    for (std::size_t m = 0; m < M; ++m) lp.add_row(normalised(m), floor[m] * (1.0 - 1e-7), kInfinity);
    extra(lp, normalised);
    return lp.solve();
  };
  while (std::find(frozen.begin(), frozen.end(), false) != frozen.end()) {
    const auto level = solve([&](LinearProgram& lp, auto normalised) {
      const int l = lp.add_variable(0.0, kInfinity, 1.0);
      for (std::size_t m = 0; m < M; ++m)
        if (!frozen[m]) {
          auto row = normalised(m);
          row.emplace_back(l, -jobs[m].weight);
          lp.add_row(row, floor[m], kInfinity);
        }
    });
    const double raise = level.objective;
    for (std::size_t m = 0; m < M; ++m)
      if (!frozen[m]) floor[m] += jobs[m].weight * raise;
    bool any = false;
    for (std::size_t m = 0; m < M; ++m) {
      if (frozen[m]) continue;
      const auto best = solve([&](LinearProgram& lp, auto normalised) {
        for (const auto& [variable, c] : normalised(m)) lp.add_objective(variable, c);
      });
      if (best.objective <= floor[m] * (1.0 + 1e-6) + 1e-9) frozen[m] = true, any = true;
    }
    if (!any) break;  // cannot happen at an LP optimum; guards the test against looping
  }
  return floor;
}

TEST(WaterFilling, MatchesTheLeximinFoundJobByJobOnRandomClusters) {
  // The weighted normalised throughputs of a leximin-optimal allocation are unique, so the MILP
  // path and the per-job LP path must agree on every job (to 1e-4: floors are held a millionth
  // below each round's LP, and what that frees goes to work; a wrong bottleneck moves a job by
  // percents).
  const ThroughputMatrix gavel = read_gavel_throughputs(bundled_gavel_throughputs());
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 6; ++trial) {
    const std::vector<int> workers{static_cast<int>(1 + rng() % 3), static_cast<int>(1 + rng() % 3), static_cast<int>(1 + rng() % 3)};
    std::vector<Job> jobs = random_jobs(gavel, 4 + static_cast<int>(rng() % 6), 100 + static_cast<std::uint64_t>(trial));
    for (Job& job : jobs) job.weight = 1.0 + static_cast<double>(rng() % 3);
    const Allocation a = allocate(jobs, gavel, workers, hierarchical());
    const auto reference = leximin_reference(jobs, gavel, workers);
    const auto equal = equal_share(jobs, gavel, workers);
    for (std::size_t m = 0; m < jobs.size(); ++m) {
      const double normalised = a.throughput[m] / effective_throughput(gavel, jobs[m].type, equal[m]);
      EXPECT_NEAR(normalised, reference[m], 1e-4 * std::max(1.0, reference[m])) << "trial " << trial << " job " << m;
    }
  }
}

TEST(WaterFilling, AwareDoesAtLeastTheAgnosticsWorkOnTheDissertationsSmallCluster) {
  // §5.7.3's multi-level fairness: 3 V100 + 3 P100 + 3 K80, 18 jobs in 3 entities of weight 1, 2
  // and 3. The aware policy's least weighted share is at least the agnostic one's (the agnostic
  // allocation is feasible for it), and its total work is higher.
  const ThroughputMatrix gavel = read_gavel_throughputs(bundled_gavel_throughputs());
  const std::vector<int> workers = parse_gpu_counts("v100:3,p100:3,k80:3", gavel);
  const std::vector<Entity> entities{{"e0", 1.0, EntityPolicy::kFairness}, {"e1", 2.0, EntityPolicy::kFairness},
                                     {"e2", 3.0, EntityPolicy::kFairness}};
  for (std::uint64_t seed : {1, 2, 3}) {
    std::vector<Job> jobs = random_jobs(gavel, 18, seed);
    for (std::size_t m = 0; m < jobs.size(); ++m) jobs[m].entity = static_cast<int>(m / 6);
    const Allocation aware = allocate(jobs, gavel, workers, hierarchical(entities, true));
    const Allocation agnostic = allocate(jobs, gavel, workers, hierarchical(entities, false));
    const auto work = [&](const Allocation& a) {
      double sum = 0.0;
      for (std::size_t m = 0; m < jobs.size(); ++m) {
        double fastest = 0.0;
        for (int j = 0; j < gavel.num_gpu_types(); ++j) fastest = std::max(fastest, gavel.at(jobs[m].type, j));
        sum += a.throughput[m] / fastest;
      }
      return sum;
    };
    EXPECT_GT(work(aware), work(agnostic)) << "seed " << seed;
    // Entity shares in GPUs follow 1:2:3 under the agnostic policy (GPUs are alike to it), to
    // within the floors' slack (1e-6 of each a round), which the last LP hands to any job: the
    // agnostic work is the same whichever gets it.
    std::vector<double> gpus(3, 0.0);
    for (std::size_t m = 0; m < jobs.size(); ++m)
      for (double x : agnostic.share[m]) gpus[static_cast<std::size_t>(jobs[m].entity)] += x;
    EXPECT_NEAR(gpus[0] + gpus[1] + gpus[2], 9.0, 1e-9) << "seed " << seed;
    EXPECT_NEAR(gpus[1], 2.0 * gpus[0], 1e-4) << "seed " << seed;
    EXPECT_NEAR(gpus[2], 3.0 * gpus[0], 1e-4) << "seed " << seed;
  }
}

TEST(WaterFilling, RoundsDoNotGrowWithTheQueue) {
  // Gavel's cluster, jobs dealt to three entities (the second FIFO). With room for every job, each
  // gets all its time on its fastest type, and the rounds that end at each job's most are found
  // by a few LPs, not one each. With a queue far past the cluster, the FIFO queue stops at once
  // when it cannot gain: 512 jobs once took 873 LP solves (the FIFO head gained dust from the
  // floors' slack round after round, neither rising nor stopping, until the round cap).
  const ThroughputMatrix gavel = read_gavel_throughputs(bundled_gavel_throughputs());
  const std::vector<Entity> entities{{"e0", 1.0, EntityPolicy::kFairness}, {"e1", 2.0, EntityPolicy::kFifo},
                                     {"e2", 3.0, EntityPolicy::kFairness}};
  const auto dealt = [&](int count) {
    std::vector<Job> jobs = random_jobs(gavel, count, 1);
    for (std::size_t m = 0; m < jobs.size(); ++m) jobs[m].entity = static_cast<int>(m % 3);
    return jobs;
  };
  const std::vector<Job> few = dealt(40);
  const Allocation roomy = allocate(few, gavel, {36, 36, 36}, hierarchical(entities));
  for (std::size_t m = 0; m < few.size(); ++m) {
    double fastest = 0.0;
    for (int j = 0; j < gavel.num_gpu_types(); ++j) fastest = std::max(fastest, gavel.at(few[m].type, j));
    EXPECT_NEAR(roomy.throughput[m], fastest, 1e-3 * fastest) << "job " << m;
  }
  EXPECT_LE(roomy.lp_solves, 5);
  const Allocation full = allocate(dealt(512), gavel, {36, 36, 36}, hierarchical(entities));
  EXPECT_LE(full.lp_solves, 60);
}

TEST(WaterFilling, RefusesUnknownEntitiesAndBadWeights) {
  const ThroughputMatrix t = matrix_of({"v100"}, {{10.0}});
  EXPECT_THROW(allocate({job_of(0, 1)}, t, {1}, hierarchical()), InputError);
  EXPECT_THROW(allocate({job_of(0, 2)}, t, {1}, hierarchical({{"a"}, {"b"}})), InputError);
  EXPECT_THROW(allocate({job_of(0, 0)}, t, {1}, hierarchical({{"a", 0.0}})), InputError);
  EXPECT_THROW(allocate({job_of(0, -1)}, t, {1}, hierarchical()), InputError);
  EXPECT_EQ(parse_policy("hierarchical"), PolicyKind::kHierarchical);
}

}  // namespace
}  // namespace perseus::cluster
