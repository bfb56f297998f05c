// Hierarchical policies by water filling (the dissertation's §5.4.3; docs/cluster.md). Internal to
// the cluster module: allocate() calls it for PolicyKind::kHierarchical.
//
// Every job m has a normalised throughput n_m(X) = scale_m tput_seen(m, X) / tput_seen(m, X_equal)
// (LAS's, policies.hpp) and a floor f_m (0 at first). Each round:
//   1. Weights: an active (not yet bottlenecked) job of entity s gets w_s w_m / sum of its active
//      peers' w under fairness; under FIFO the entity's first active job gets w_s, the others 0.
//   2. LP (CLP): maximise L subject to n_m(X) >= f_m + w_job_m L for active jobs with a weight,
//      n_m(X) >= f_m for every other job; then f_m += w_job_m L*.
//   3. MILP (CBC): maximise sum_m z_m, z_m binary for those jobs, subject to
//      n_m(X) >= f_m + delta_m z_m and n_m(X) >= f_m for all: the jobs with z_m = 0 cannot gain
//      delta_m without another losing; they are bottlenecked and leave the active set.
// until no active job has a weight. A last LP holds every floor and maximises the work done (jobs
// of weight 0 take what is left). A round whose level rose by less than every weighted job's
// delta leaves the MILP a job to stop, so every round raises a floor by a delta or stops a job.
// Shortcuts (docs/cluster.md):
//   - rounds that end at jobs' own most (all their time on their fastest type) are known in
//     closed form while the cluster has room; a bisection of feasibility LPs finds the last one it
//     holds and takes them all at once (O(log rounds) LPs, not one a round);
//   - the MILP's relaxation, its fractional z rounded down, is its optimum when the ones number
//     the relaxation's optimum rounded down (CBC only otherwise);
//   - when nothing can rise, one LP tells whether FIFO's queue can gain at all, so a full cluster
//     ends it in one round;
//   - one LP serves every step, each round adding its columns (L or z): each solve starts from the
//     last basis.
// At an LP optimum some weighted job is always bottlenecked (were each able to gain alone, the
// average of those allocations would raise L: the LP is convex), so there are at most as many
// rounds as LP rows; in practice one per fairness class that a full cluster bottlenecks.
// Jobs of one entity, type and weight under fairness are one class of the LPs (symmetric, like
// LAS's); FIFO jobs are classes of their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "perseus/cluster/allocation_lp.hpp"

namespace perseus::cluster {

struct WaterFilling {
  JobClasses grouped;
  Chosen chosen;                       // [class] shares and pairs
  double first_level = 0.0;            // round 1's L: the top-level max-min objective
  int lp_solves = 0, milp_solves = 0, rounds = 0;
  bool pooled = false;  // the rounds ran on PooledAllocationLp (their lp_solves count its cuts' rounds)
};

// With space sharing, whether the rounds run on each job type's classes pooled
// (PooledAllocationLp): from 128 classes on (kAuto), always or never (as tests compare). Pooled
// rounds whose allocation cannot be dealt out to the classes are run again on AllocationLp.
enum class Pooling : std::uint8_t { kAuto, kAlways, kNever };

// Preconditions: check() has passed (job types, weights, entities valid). Throws SolveError
// when CLP fails on a round's LP.
WaterFilling water_fill(const std::vector<Job>& jobs, const ThroughputMatrix& t, const std::vector<int>& workers,
                        const PolicySpec& spec, Pooling pooling = Pooling::kAuto);

}  // namespace perseus::cluster
