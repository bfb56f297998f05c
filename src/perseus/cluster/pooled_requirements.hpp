// Space sharing with each job type's rows pooled. AllocationLp gives every row (job or class) a
// w per partner type and GPU type, 127,000 variables at 2,048 jobs. Jobs of one type run at the
// same speeds, so what a type's rows can reach together depends only on how much time the type
// has on each option (alone on a GPU type, or beside a partner type on one), pooled:
//
//   per-job throughputs t_m of the type's jobs can be met, each job within one unit of time, by
//   option times A_o at speeds v_o (sum_o A_o <= jobs) if and only if, for every lambda >= 0,
//       sum_m (t_m - lambda)^+  <=  sum_o A_o (v_o - lambda)^+.
//
// (Any k jobs use at most k units, so at most the fastest k units' work F(k); F is concave in
// k, so {t : sum over any k jobs <= F(k)} is a polymatroid whose greedy vertices, each job in
// turn taking the fastest unit left, are allocations; and max_k sum of the k largest (t_m -
// lambda) is sum_m (t_m - lambda)^+, which with F(k) = min_lambda k lambda + sum_o A_o (v_o -
// lambda)^+ gives the rows.) A same-type pair also caps each job at half the pair's time (it
// cannot pair with itself); that adds the same rows for the type's largest throughput alone
// with the pair's time halved, which is necessary but not always enough, so the pooled optimum
// is split over the rows by a small LP per type and the caller falls back to AllocationLp where
// that fails.
//
// PooledAllocationLp is an LP over the pooled times, the pairs' Z and a throughput variable per
// row; the rows above enter as cuts where a solution breaks them (each cut fixes the set of rows
// above lambda, and so is valid for every solution), solve() adding them until none is broken.
// Internal to the cluster module (policies.cpp, water_filling.cpp).
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "perseus/cluster/allocation_lp.hpp"
#include "perseus/cluster/policies.hpp"

namespace perseus::cluster {

class PooledAllocationLp {
 public:
  // `rows` (aware, space sharing), row m standing for `copies[m]` identical jobs (1 each when
  // empty). runs_everywhere() is false where a row's type runs on no GPU type. Each row's job
  // gets at least its demand: its throughput variable (throughput(m)), or with
  // `throughput_variables` false an affine expression the caller sets (set_demand) before
  // solve(), which needs neither a variable nor a row per job.
  PooledAllocationLp(const std::vector<Job>& rows, const ThroughputMatrix& t, const std::vector<int>& workers,
                     std::vector<double> copies = {}, bool throughput_variables = true);

  LinearProgram lp;
  std::vector<double> copies;

  bool runs_everywhere() const { return runs_everywhere_; }
  // The variable holding row m's throughput, steps/s per job (tput_seen: the policy is aware).
  int throughput(std::size_t m) const { return throughput_[m]; }
  // Row m's demand: constant + sum of coefficient x variable, steps/s per job.
  void set_demand(std::size_t m, double constant, std::vector<std::pair<int, double>> terms) {
    demand_[m] = {constant, std::move(terms)};
  }
  // As AllocationLp::terms: row m's throughput times coefficient(term), for a term that stands
  // for the whole of it (speed and seen 1 per unit of the throughput variable).
  template <typename F>
  std::vector<std::pair<int, double>> terms(std::size_t m, F coefficient) const {
    return {{throughput_[m], coefficient(Term{throughput_[m], -1, 1.0, 1.0, 1.0})}};
  }
  // The LP with cuts added until none is broken; SolveError when a few hundred rounds do not
  // get there. solves() counts every LP (and MILP) solved.
  LinearProgram::Solution solve();
  LinearProgram::Solution resolve() { return solve(); }
  LinearProgram::Solution solve_mixed_integer(double seconds);
  // Each type's pooled times split over its rows, each row's job its throughput (to 1e-6) within
  // one unit of time: nullopt where that fails. Per row, throughput_out[m] is what the split gives.
  std::optional<Chosen> chosen(const LinearProgram::Solution& s, std::vector<double>* throughput_out = nullptr);
  int solves() const { return solves_; }
  // Adds to the objective the work the pooled times do, each type's best speed alone counting 1:
  // what the rows' throughputs sum to once split (the split deals out all of it), with no cut
  // needed to hold the rows' own variables up to it.
  void maximize_pooled_work();

 private:
  struct Option {
    int variable = 0;
    double factor = 1.0;  // the type's time on it: factor x variable (2 for a same-type pair)
    double speed = 0.0;
    int gpu_type = 0;
    int partner = -1;  // partner job type; -1 alone
    bool self_pair = false;
  };
  struct Pool {
    std::vector<std::size_t> rows;
    std::vector<Option> options;
  };
  struct Demand {
    double constant = 0.0;
    std::vector<std::pair<int, double>> terms;
  };
  double demand_at(std::size_t m, const LinearProgram::Solution& s) const;
  void add_work_cuts();  // once, before the first solve
  // Adds the most broken cut of every type (and of its largest demand alone where the type
  // pairs with itself); returns how many.
  int separate(const LinearProgram::Solution& s);
  void add_cut(const Pool& pool, double lambda, const std::vector<std::size_t>& above, bool capped);

  int gpu_types_ = 0;
  bool runs_everywhere_ = true;
  std::map<int, Pool> pools_;
  std::vector<int> throughput_;  // -1 without throughput variables
  std::vector<Demand> demand_;
  bool work_cuts_added_ = false;  // the cut at lambda = 0 for every type (the work)
  int solves_ = 0;
};

// AllocationLp's maximize_work on the pooled LP: maximize_pooled_work (the arguments are
// AllocationLp's; space sharing is aware).
void maximize_work(PooledAllocationLp& a, const std::vector<Job>& rows, const ThroughputMatrix& t, bool aware = true);

struct PooledSolution {
  double y = 0.0;                  // the largest y with every tput_m >= need_m + y c_m
  Chosen chosen;                   // per job: its time alone per GPU type, and its pairs
  std::vector<double> throughput;  // per job: tput_m of `chosen`
  int lp_solves = 0;               // the pooled LP's solves, cuts included, and the per-type splits
};

// Maximises y subject to tput_m >= need_m + y c_m for every job (need_m >= 0, c_m >= 0, some
// c_m > 0), space sharing, aware; with `spend_the_rest`, y held (to kHold), the time left goes on
// work (maximize_work's objective). nullopt where some job runs nowhere or the optimum cannot be
// split over the jobs (the caller solves job by job). Each LP has (job types x GPU types) +
// pairs + jobs variables and a few rows per type; a split costs one LP per type of (its jobs x
// the options it uses).
std::optional<PooledSolution> maximize_pooled_requirements(const std::vector<Job>& jobs, const ThroughputMatrix& t,
                                                           const std::vector<int>& workers, const std::vector<double>& need,
                                                           const std::vector<double>& c, bool spend_the_rest);

}  // namespace perseus::cluster
