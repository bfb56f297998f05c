#include "perseus/cluster/pooled_requirements.hpp"

#include <algorithm>
#include <map>

#include "perseus/model/errors.hpp"

namespace perseus::cluster {
namespace {

// Rounds of cuts before a solve gives up (not optimal: the caller solves row by row); a few
// suffice in practice.
constexpr int kMaxRounds = 200;

}  // namespace

PooledAllocationLp::PooledAllocationLp(const std::vector<Job>& rows, const ThroughputMatrix& t, const std::vector<int>& workers,
                                       std::vector<double> copies_of, bool throughput_variables)
    : lp(LinearProgram::Sense::kMaximize), copies(std::move(copies_of)), gpu_types_(t.num_gpu_types()) {
  if (copies.empty()) copies.assign(rows.size(), 1.0);
  const int J = gpu_types_;
  std::vector<std::vector<std::pair<int, double>>> capacity(static_cast<std::size_t>(J));
  std::map<int, double> jobs_of_type;
  for (std::size_t m = 0; m < rows.size(); ++m) pools_[rows[m].type].rows.push_back(m), jobs_of_type[rows[m].type] += copies[m];
  std::map<int, double> fastest;
  for (auto& [a, pool] : pools_) {
    const int scale = t.job_types[static_cast<std::size_t>(a)].scale_factor;
    for (int j = 0; j < J; ++j) {
      const double speed = t.at(a, j);
      if (speed <= 0.0 || workers[static_cast<std::size_t>(j)] < scale) continue;
      const int v = lp.add_variable(0.0, kInfinity);
      pool.options.push_back({v, 1.0, speed, j, -1, false});
      capacity[static_cast<std::size_t>(j)].emplace_back(v, scale);
      fastest[a] = std::max(fastest[a], speed);
    }
    runs_everywhere_ = runs_everywhere_ && !pool.options.empty();
  }
  // Pairs where sharing beats taking turns, as AllocationLp admits them.
  for (const AdmittedPair& p : admitted_pairs(t, workers, jobs_of_type)) {
    const int z = lp.add_variable(0.0, kInfinity);
    capacity[static_cast<std::size_t>(p.gpu_type)].emplace_back(z, t.job_types[static_cast<std::size_t>(p.a)].scale_factor);
    pools_[p.a].options.push_back({z, p.a == p.b ? 2.0 : 1.0, p.speed_a, p.gpu_type, p.b, p.a == p.b});
    if (p.a != p.b) pools_[p.b].options.push_back({z, 1.0, p.speed_b, p.gpu_type, p.a, false});
    fastest[p.a] = std::max(fastest[p.a], p.speed_a);
    fastest[p.b] = std::max(fastest[p.b], p.speed_b);
  }
  // A row's throughput per job: at most its fastest option's speed (one unit of time).
  throughput_.assign(rows.size(), -1);
  demand_.resize(rows.size());
  for (std::size_t m = 0; m < rows.size() && throughput_variables; ++m) {
    throughput_[m] = lp.add_variable(0.0, fastest[rows[m].type]);
    demand_[m] = {0.0, {{throughput_[m], 1.0}}};
  }
  for (int j = 0; j < J; ++j)
    if (!capacity[static_cast<std::size_t>(j)].empty())
      lp.add_row(capacity[static_cast<std::size_t>(j)], -kInfinity, workers[static_cast<std::size_t>(j)]);
  for (const auto& [a, pool] : pools_) {
    std::vector<std::pair<int, double>> time;
    for (const Option& o : pool.options) time.emplace_back(o.variable, o.factor);
    if (!time.empty()) lp.add_row(time, -kInfinity, jobs_of_type[a]);
  }
}

double PooledAllocationLp::demand_at(std::size_t m, const LinearProgram::Solution& s) const {
  double value = demand_[m].constant;
  for (const auto& [variable, coefficient] : demand_[m].terms) value += coefficient * s.values[static_cast<std::size_t>(variable)];
  return value;
}

// sum over the rows in `above` of copies x (demand - lambda) <= sum_o A_o (v_o - lambda)^+, a
// same-type pair's time halved when `capped` (one job's share of it; `above` one row, one job).
void PooledAllocationLp::add_cut(const Pool& pool, double lambda, const std::vector<std::size_t>& above, bool capped) {
  std::map<int, double> row;  // demands share variables (y in every row): summed
  for (const Option& o : pool.options) {
    const double factor = capped && o.self_pair ? 1.0 : o.factor;
    if (o.speed > lambda) row[o.variable] += factor * (o.speed - lambda);
  }
  double bound = 0.0;
  for (std::size_t m : above) {
    const double n = capped ? 1.0 : copies[m];
    for (const auto& [variable, coefficient] : demand_[m].terms) row[variable] -= n * coefficient;
    bound += n * (demand_[m].constant - lambda);
  }
  lp.add_row(std::vector<std::pair<int, double>>(row.begin(), row.end()), bound, kInfinity);
}

int PooledAllocationLp::separate(const LinearProgram::Solution& s) {
  const auto value = [&](int variable) { return s.values[static_cast<std::size_t>(variable)]; };
  int added = 0;
  for (const auto& [a, pool] : pools_) {
    if (pool.options.empty()) continue;
    std::vector<double> tput;
    double total = 0.0;
    for (std::size_t m : pool.rows) tput.push_back(demand_at(m, s)), total += copies[m] * tput.back();
    std::vector<double> lambdas{0.0};
    for (const Option& o : pool.options) lambdas.push_back(o.speed);
    lambdas.insert(lambdas.end(), tput.begin(), tput.end());
    // CLP holds rows to about 1e-7: breaks below that are its rounding, not a cut to add.
    const double tolerance = 1e-7 * std::max(1.0, total);
    const auto supply = [&](double lambda, bool capped) {
      double sum = 0.0;
      for (const Option& o : pool.options)
        sum += (capped && o.self_pair ? 1.0 : o.factor) * value(o.variable) * std::max(0.0, o.speed - lambda);
      return sum;
    };
    double worst = tolerance, worst_lambda = -1.0;
    for (double lambda : lambdas) {
      double demand = 0.0;
      for (std::size_t k = 0; k < tput.size(); ++k) demand += copies[pool.rows[k]] * std::max(0.0, tput[k] - lambda);
      const double broken = demand - supply(lambda, false);
      if (broken > worst) worst = broken, worst_lambda = lambda;
    }
    if (worst_lambda >= 0.0) {
      std::vector<std::size_t> above;
      for (std::size_t k = 0; k < tput.size(); ++k)
        if (tput[k] > worst_lambda) above.push_back(pool.rows[k]);
      add_cut(pool, worst_lambda, above, false);
      ++added;
    }
    if (std::none_of(pool.options.begin(), pool.options.end(), [](const Option& o) { return o.self_pair; })) continue;
    const std::size_t top = static_cast<std::size_t>(std::max_element(tput.begin(), tput.end()) - tput.begin());
    worst = tolerance, worst_lambda = -1.0;
    for (double lambda : lambdas) {
      const double broken = std::max(0.0, tput[top] - lambda) - supply(lambda, true);
      if (broken > worst) worst = broken, worst_lambda = lambda;
    }
    if (worst_lambda >= 0.0) {
      add_cut(pool, worst_lambda, {pool.rows[top]}, true);
      ++added;
    }
  }
  return added;
}

void PooledAllocationLp::add_work_cuts() {
  // The work: every row's demand from its type's time. (The first solve would otherwise be
  // unbounded where a demand grows with an objective variable.)
  if (work_cuts_added_) return;
  for (const auto& [a, pool] : pools_) add_cut(pool, 0.0, pool.rows, false);
  work_cuts_added_ = true;
}

LinearProgram::Solution PooledAllocationLp::solve() {
  add_work_cuts();
  for (int round = 0; round < kMaxRounds; ++round) {
    LinearProgram::Solution s = lp.solve();
    ++solves_;
    if (!s.optimal || separate(s) == 0) return s;
  }
  throw SolveError("the pooled allocation LP's cuts did not converge");
}

LinearProgram::Solution PooledAllocationLp::solve_mixed_integer(double seconds) {
  add_work_cuts();
  for (int round = 0; round < kMaxRounds; ++round) {
    LinearProgram::Solution s = lp.solve_mixed_integer(seconds);
    ++solves_;
    if (s.values.empty() || separate(s) == 0) return s;
  }
  throw SolveError("the pooled allocation MILP's cuts did not converge");
}

void PooledAllocationLp::maximize_pooled_work() {
  for (const auto& [a, pool] : pools_) {
    double fastest = 0.0;
    for (const Option& o : pool.options) fastest = std::max(fastest, o.factor > 0.0 && o.partner < 0 ? o.speed : 0.0);
    if (fastest <= 0.0) continue;
    for (const Option& o : pool.options) lp.add_objective(o.variable, o.factor * o.speed / fastest);
  }
}

std::optional<Chosen> PooledAllocationLp::chosen(const LinearProgram::Solution& s, std::vector<double>* throughput_out) {
  const auto value = [&](int variable) { return s.values[static_cast<std::size_t>(variable)]; };
  const std::size_t rows = throughput_.size();
  Chosen out;
  out.share.assign(rows, std::vector<double>(static_cast<std::size_t>(gpu_types_), 0.0));
  std::vector<double> throughput(rows, 0.0);
  std::map<std::pair<int, int>, std::vector<std::pair<std::size_t, double>>> sides;  // (Z, type) -> (row, time per job)
  for (const auto& [a, pool] : pools_) {
    // The same time on each option for every job of a row: averaging a split over a row's
    // identical jobs keeps it a split.
    LinearProgram split(LinearProgram::Sense::kMaximize);
    std::vector<std::size_t> used;
    for (std::size_t k = 0; k < pool.options.size(); ++k)
      if (pool.options[k].factor * value(pool.options[k].variable) > 1e-12) used.push_back(k);
    std::vector<std::vector<int>> var(pool.rows.size(), std::vector<int>(used.size()));
    for (std::size_t i = 0; i < pool.rows.size(); ++i) {
      std::vector<std::pair<int, double>> time, work;
      for (std::size_t u = 0; u < used.size(); ++u) {
        const Option& o = pool.options[used[u]];
        // A job holds at most half of a same-type pair's time: it cannot pair with itself.
        var[i][u] = split.add_variable(0.0, o.self_pair ? value(o.variable) : 1.0);
        time.emplace_back(var[i][u], 1.0);
        work.emplace_back(var[i][u], o.speed);
      }
      split.add_row(time, -kInfinity, 1.0);
      split.add_row(work, demand_at(pool.rows[i], s) * (1.0 - 1e-6), kInfinity);
    }
    for (std::size_t u = 0; u < used.size(); ++u) {
      const Option& o = pool.options[used[u]];
      std::vector<std::pair<int, double>> total;
      for (std::size_t i = 0; i < pool.rows.size(); ++i) total.emplace_back(var[i][u], copies[pool.rows[i]]);
      const double amount = o.factor * value(o.variable);
      split.add_row(total, amount, amount);
    }
    const LinearProgram::Solution dealt = split.solve();
    ++solves_;
    if (!dealt.optimal) return std::nullopt;
    for (std::size_t i = 0; i < pool.rows.size(); ++i) {
      const std::size_t m = pool.rows[i];
      for (std::size_t u = 0; u < used.size(); ++u) {
        const Option& o = pool.options[used[u]];
        const double time = std::max(0.0, dealt.values[static_cast<std::size_t>(var[i][u])]);
        throughput[m] += time * o.speed;
        if (o.partner < 0) out.share[m][static_cast<std::size_t>(o.gpu_type)] += std::min(1.0, time);
        else sides[{o.variable, a}].emplace_back(m, time);
      }
    }
  }
  // The pairs, as AllocationLp::chosen gives them: per Z, its first type's side and its second's.
  for (const auto& [a, pool] : pools_) {
    for (const Option& o : pool.options) {
      if (o.partner < 0 || o.partner < a) continue;  // each pair once, from its first type
      if (value(o.variable) < AllocationLp::kNoPair) continue;
      PairGroup g{o.gpu_type, sides[{o.variable, a}], {}};
      if (!o.self_pair) g.side_b = sides[{o.variable, o.partner}];
      out.groups.push_back(std::move(g));
    }
  }
  if (throughput_out) *throughput_out = std::move(throughput);
  return out;
}

void maximize_work(PooledAllocationLp& a, const std::vector<Job>&, const ThroughputMatrix&, bool) { a.maximize_pooled_work(); }

std::optional<PooledSolution> maximize_pooled_requirements(const std::vector<Job>& jobs, const ThroughputMatrix& t,
                                                           const std::vector<int>& workers, const std::vector<double>& need,
                                                           const std::vector<double>& c, bool spend_the_rest) {
  // y in units that put the largest c at 1: makespan's c are steps (10^5-10^7) and its y a rate
  // (10^-6), and CLP's tolerances on such rows cost the optimum a few tenths of a percent.
  const double unit = c.empty() ? 0.0 : *std::max_element(c.begin(), c.end());
  if (!(unit > 0.0)) return std::nullopt;
  PooledAllocationLp a(jobs, t, workers, {}, false);
  if (!a.runs_everywhere()) return std::nullopt;  // a job that runs nowhere: the caller's LP says so
  try {
    const int y = a.lp.add_variable(0.0, kInfinity, 1.0);
    // Each job's demand need_m + y c_m enters only the cuts: no row per job.
    for (std::size_t m = 0; m < jobs.size(); ++m) a.set_demand(m, need[m], {{y, c[m] / unit}});
    const LinearProgram::Solution first = a.solve();
    if (!first.optimal) return std::nullopt;
    PooledSolution out;
    out.y = first.objective / unit;
    LinearProgram::Solution spent = first;
    if (spend_the_rest) {
      // y held, the rest of the time goes on work, each job's best speed counting 1.
      a.lp.set_objective(y, 0.0);
      a.lp.set_bounds(y, first.objective * (1.0 - kHold), kInfinity);
      a.maximize_pooled_work();
      LinearProgram::Solution second = a.solve();
      if (second.optimal) spent = std::move(second);
    }
    auto chosen = a.chosen(spent, &out.throughput);
    out.lp_solves = a.solves();
    if (!chosen) return std::nullopt;
    out.chosen = std::move(*chosen);
    return out;
  } catch (const SolveError&) {
    return std::nullopt;  // cuts that did not converge: the caller solves job by job
  }
}

}  // namespace perseus::cluster
