// The allocation LP every policy builds on (policies.hpp, docs/cluster.md): X as LP variables with
// the rows that keep it valid, space sharing's pair variables, and the helpers that read an
// allocation back. Internal to the cluster module: policies.cpp and water_filling.cpp use it.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "perseus/cluster/linear_program.hpp"
#include "perseus/cluster/policies.hpp"

namespace perseus::cluster {

// GPUs the job takes while it runs.
int scale_of(const ThroughputMatrix& t, const Job& job);

// The matrix a policy sees: T itself, or (agnostic) 1 wherever the job can run.
double seen(const ThroughputMatrix& t, const Job& job, int j, bool aware);

// Pairs' time together per GPU type, by (first, second) job index, first < second.
using PairTimes = std::map<std::pair<std::size_t, std::size_t>, std::vector<double>>;

// Space sharing between job types a <= b on one GPU type, as an LP solution gives it: the time
// each job of an LP row spends in such pairs, on a's side and on b's (for a = b, one side, which
// sums to twice the time together).
struct PairGroup {
  int gpu_type = 0;
  std::vector<std::pair<std::size_t, double>> side_a, side_b;  // (row, time per job of the row)
};

// An LP's allocation: each row's time alone per type, and its space sharing.
struct Chosen {
  std::vector<std::vector<double>> share;
  std::vector<PairGroup> groups;
};

// Turns each group into pairs of jobs, each job of a row taking the row's time:
//   a != b: the north-west corner rule of the transportation problem from a's jobs to b's (both
//           sides sum to the time together): at most |a| + |b| - 1 pairs;
//   a = b:  the jobs' times laid end to end on a circle of length 2Z, the point x paired with
//           x + Z: as no job holds more than Z, no job meets itself; at most 2 |a| pairs.
// Either way every job gets exactly its time. Jobs are `members[row]`.
// O(sum over groups of the jobs on its sides).
PairTimes spread_pairs(const std::vector<PairGroup>& groups, const std::vector<std::vector<std::size_t>>& members,
                       std::size_t gpu_types);

// A pair of job types a <= b of one scale factor on GPU type `gpu_type` where sharing beats
// taking turns: speed_a / alone_a + speed_b / alone_b > 1 (policies.hpp).
struct AdmittedPair {
  int a = 0, b = 0, gpu_type = 0;
  double speed_a = 0.0, speed_b = 0.0;  // each one's steps/s beside the other
};
// Every such pair among the types of `jobs_of_type` (type -> its jobs; a = b needs 2 of them),
// on GPU types with the scale factor's GPUs, by a, then b, then GPU type.
std::vector<AdmittedPair> admitted_pairs(const ThroughputMatrix& t, const std::vector<int>& workers,
                                         const std::map<int, double>& jobs_of_type);

// What one variable of the allocation LP gives one job: `part` of the job's time per unit of
// the variable, spent on `gpu_type` at `speed` steps/s (`seen`: as the policy sees it).
struct Term {
  int variable = 0;
  int gpu_type = 0;
  double part = 0.0;
  double speed = 0.0;
  double seen = 0.0;
};

// Space sharing between job types a <= b on one GPU type: Z, their time together, and for each LP
// row of type a (and of b) w, the time its copies spend in such pairs.
struct PairVariables {
  struct Side {
    std::size_t row;
    int variable;   // w, or Z itself when the row is its type's only one (w = factor Z)
    double factor;  // 1 for w
  };
  int gpu_type = 0;
  int together = 0;
  std::vector<Side> side_a, side_b;  // b empty when a = b
};

// The LP over X with its validity rows. X[m][j] = part[m][j] * variable x[m][j]; x[m][j] is -1
// where job m cannot run on type j.
//   aware:    a variable per (job, type), part 1; rows sum_j X[m][j] <= 1.
//   agnostic: one variable per job (its total share, <= 1), split over the types it can run in
//             proportion to their GPU counts (a scheduler that sees GPUs as alike lands on each
//             type that often), so the baseline does not depend on the vertex the simplex returns.
// Both: capacity rows sum_m scale_m X[m][j] <= workers[j].
// `copies[m]`: job m stands for that many identical jobs, each with the same X (capacity and the
// work objective count it that often).
// Space sharing adds, per pair of job types a <= b of one scale factor and GPU type where
// sharing beats taking turns (policies.hpp), a variable Z (the pairs' time together there, taking
// scale_factor GPUs per unit) and one w per row of type a or b (the time its copies spend in such
// pairs, at the shared speed): sum_{rows of a} w = Z = sum_{rows of b} w, or = 2 Z when a = b,
// where each job also holds at most Z (w <= copies Z), so that it never pairs with itself.
// spread_pairs turns that into pairs of jobs. Variables grow with rows x job types x GPU types,
// not with pairs of jobs.
struct AllocationLp {
  LinearProgram lp;
  std::vector<std::vector<int>> x;
  std::vector<std::vector<double>> part;
  std::vector<std::vector<Term>> job_terms;  // [row]: singles by type, then its pairs
  std::vector<PairVariables> pairs;
  std::vector<double> copies;
  AllocationLp(const std::vector<Job>& jobs, const ThroughputMatrix& t, const std::vector<int>& workers, LinearProgram::Sense sense,
               bool aware, bool space_sharing = false, std::vector<double> copies_of = {});
  // sum over the job's terms of coefficient(term) x the time it gives the job, as terms over
  // variables. coefficient(term) = term.seen gives tput_seen(m, X).
  template <typename F>
  std::vector<std::pair<int, double>> terms(std::size_t m, F coefficient) const {
    std::vector<std::pair<int, double>> out;
    for (const Term& term : job_terms[m]) {
      const double c = coefficient(term) * term.part;
      if (!out.empty() && out.back().first == term.variable) out.back().second += c;
      else out.emplace_back(term.variable, c);
    }
    return out;
  }
  // Adds sum over the job's terms of coefficient(term) x time to the objective.
  template <typename F>
  void add_objective(std::size_t m, F coefficient) {
    for (const auto& [variable, c] : terms(m, coefficient)) lp.add_objective(variable, c);
  }
  // The LP's solves, as PooledAllocationLp's (which add cuts) are called.
  LinearProgram::Solution solve() { return lp.solve(); }
  LinearProgram::Solution resolve() { return lp.resolve(); }
  LinearProgram::Solution solve_mixed_integer(double seconds) { return lp.solve_mixed_integer(seconds); }
  // Each row's X (its time alone per type).
  std::vector<std::vector<double>> shares(const LinearProgram::Solution& s) const;
  // The rows' shares alone and their space sharing.
  Chosen chosen(const LinearProgram::Solution& s) const;
  // Below this a pair's time is the simplex's rounding, not an allocation.
  static constexpr double kNoPair = 1e-9;
};

// Jobs that share one LP row. Jobs with identical rows can: averaging any optimum over them keeps
// it feasible and optimal (the LP is convex and symmetric in them), so one class stands for all.
struct JobClasses {
  std::vector<Job> classes;            // each class's first job
  std::vector<double> copies;          // [class]: jobs it stands for
  std::vector<std::size_t> job_class;  // [job]
};
// Jobs of equal key(job, index) share a class; classes in order of their first job. O(M log M).
using ClassKey = std::tuple<int, int, double, std::size_t>;
JobClasses group_jobs(const std::vector<Job>& jobs, const std::function<ClassKey(const Job&, std::size_t)>& key);

// [job]: scale_m / tput_seen(m, X_equal), which turns tput_seen(m, X) into LAS's normalised
// throughput (equal_share); 0 for a job that runs nowhere.
std::vector<double> normalising_factors(const std::vector<Job>& jobs, const ThroughputMatrix& t, const std::vector<int>& workers,
                                        bool aware);

// max_j T_seen[m][j]: the job's best speed as the policy sees it.
double fastest_seen(const ThroughputMatrix& t, const Job& job, bool aware);

// Sets the objective to sum_m tput_seen(m, X) / max_j T_seen[m][j]: the work done, each job's
// best speed counting 1.
void maximize_work(AllocationLp& a, const std::vector<Job>& jobs, const ThroughputMatrix& t, bool aware);

// The optimum of a policy's objective variable held (to kHold relative), the second LP spends what
// is left on work (maximize_work), so that no GPU idles while a job could use it. Warm from the
// first LP's basis; should CLP not prove the second optimal, the first's X stands.
constexpr double kHold = 1e-9;

LinearProgram::Solution spend_the_rest(AllocationLp& a, int objective_variable, const LinearProgram::Solution& first,
                                       const std::vector<Job>& jobs, const ThroughputMatrix& t, bool aware);

}  // namespace perseus::cluster
