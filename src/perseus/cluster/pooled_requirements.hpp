// Space sharing with each job type's jobs pooled: the policies whose LP asks every job for a
// throughput of its own (makespan: tput_m(X) >= steps_m r) need a w per job, partner type and
// GPU type in AllocationLp, 127,000 variables at 2,048 jobs. Jobs of one type run at the same
// speeds, so what a type's jobs can reach together depends only on how much time the type has
// on each option (alone on a GPU type, or beside a partner type on one), pooled:
//
//   the requirements r_m of the type's jobs can be met, each job within one unit of time, by
//   option times A_o at speeds v_o (sum_o A_o <= jobs) if and only if, for every lambda >= 0,
//       sum_m (r_m - lambda)^+  <=  sum_o A_o (v_o - lambda)^+.
//
// (Any k jobs use at most k units, so at most the fastest k units' work F(k); F is concave in
// k, so {r : sum over any k jobs <= F(k)} is a polymatroid whose greedy vertices, each job in
// turn taking the fastest unit left, are allocations; and max_k sum of the k largest (r_m -
// lambda) is sum_m (r_m - lambda)^+, which with F(k) = min_lambda k lambda + sum_o A_o (v_o -
// lambda)^+ gives the rows.) A same-type pair also caps each job at half the pair's time (it
// cannot pair with itself); that adds the same rows for the type's largest requirement alone
// with the pair's time halved, which is necessary but not always enough, so the pooled optimum
// is split over the jobs by a small LP per type and the caller falls back to the job-by-job LP
// where that fails.
//
// The LP over the pooled times maximises y subject to tput_m >= need_m + y c_m, the rows above
// added as cuts where the last solution breaks them (each cut fixes the set of jobs above
// lambda: sum over that set of (need_m + y c_m - lambda) <= sum_o A_o (v_o - lambda)^+, valid
// for every y); then, y held, the rest of the time goes on work as spend_the_rest does.
// Internal to the cluster module (policies.cpp).
#pragma once

#include <optional>
#include <vector>

#include "perseus/cluster/allocation_lp.hpp"
#include "perseus/cluster/policies.hpp"

namespace perseus::cluster {

struct PooledSolution {
  double y = 0.0;                 // the largest y with every tput_m >= need_m + y c_m
  Chosen chosen;                  // per job: its time alone per GPU type, and its pairs
  std::vector<double> throughput;  // per job: tput_m of `chosen`
  int lp_solves = 0;              // the pooled LP's solves, cuts included, and the per-type splits
};

// Space sharing, heterogeneity-aware. need_m >= 0, c_m >= 0 per job, some c_m > 0. With
// `spend_the_rest`, y held (to kHold), the time left goes on work (maximize_work's objective).
// nullopt where some job runs nowhere or the pooled optimum cannot be split over the jobs (the
// caller solves job by job). Each LP has (job types x GPU types) + pairs variables and a few rows
// per type, whatever the number of jobs; a split costs one LP per type of (its jobs x its
// options used).
std::optional<PooledSolution> maximize_pooled_requirements(const std::vector<Job>& jobs, const ThroughputMatrix& t,
                                                           const std::vector<int>& workers, const std::vector<double>& need,
                                                           const std::vector<double>& c, bool spend_the_rest);

}  // namespace perseus::cluster
