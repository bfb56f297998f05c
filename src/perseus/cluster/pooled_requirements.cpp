#include "perseus/cluster/pooled_requirements.hpp"

#include <algorithm>
#include <map>

namespace perseus::cluster {
namespace {

// An option of a job type: alone on a GPU type, or beside a partner type on one. Its pooled time
// is `factor` x the LP variable (a same-type pair's time counts on both of its jobs' sides).
struct Option {
  int variable = 0;
  double factor = 1.0;
  double speed = 0.0;
  int gpu_type = 0;
  int partner = -1;  // partner job type; -1 alone
  bool self_pair = false;
};

struct Pool {
  std::vector<std::size_t> jobs;
  std::vector<Option> options;
  double fastest = 0.0;  // its best speed alone
};

// Rounds of cuts before giving up (the caller then solves job by job); a few suffice in practice.
constexpr int kMaxRounds = 200;

}  // namespace

std::optional<PooledSolution> maximize_pooled_requirements(const std::vector<Job>& jobs, const ThroughputMatrix& t,
                                                           const std::vector<int>& workers, const std::vector<double>& need,
                                                           const std::vector<double>& c, bool spend_the_rest) {
  const int J = t.num_gpu_types();
  PooledSolution out;
  // y in units that put the largest c at 1: makespan's c are steps (10^5-10^7) and its y a rate
  // (10^-6), and CLP's tolerances on such rows cost the optimum a few tenths of a percent.
  const double unit = c.empty() ? 0.0 : *std::max_element(c.begin(), c.end());
  if (!(unit > 0.0)) return std::nullopt;
  LinearProgram lp(LinearProgram::Sense::kMaximize);
  std::vector<std::vector<std::pair<int, double>>> capacity(static_cast<std::size_t>(J));
  std::map<int, Pool> pools;
  for (std::size_t m = 0; m < jobs.size(); ++m) pools[jobs[m].type].jobs.push_back(m);
  for (auto& [a, pool] : pools) {
    const int scale = t.job_types[static_cast<std::size_t>(a)].scale_factor;
    for (int j = 0; j < J; ++j) {
      const double speed = t.at(a, j);
      if (speed <= 0.0 || workers[static_cast<std::size_t>(j)] < scale) continue;
      const int v = lp.add_variable(0.0, kInfinity);
      pool.options.push_back({v, 1.0, speed, j, -1, false});
      capacity[static_cast<std::size_t>(j)].emplace_back(v, scale);
      pool.fastest = std::max(pool.fastest, speed);
    }
    if (pool.options.empty()) return std::nullopt;  // a job that runs nowhere: the caller's LP says so
  }
  // Pairs where sharing beats taking turns, as AllocationLp admits them.
  for (auto it_a = pools.begin(); it_a != pools.end(); ++it_a) {
    for (auto it_b = it_a; it_b != pools.end(); ++it_b) {
      const int a = it_a->first, b = it_b->first;
      const int scale = t.job_types[static_cast<std::size_t>(a)].scale_factor;
      if (scale != t.job_types[static_cast<std::size_t>(b)].scale_factor || (a == b && it_a->second.jobs.size() < 2)) continue;
      for (int j = 0; j < J; ++j) {
        const double alone_a = t.at(a, j), alone_b = t.at(b, j);
        if (workers[static_cast<std::size_t>(j)] < scale || alone_a <= 0.0 || alone_b <= 0.0) continue;
        const auto speeds = t.shared_speeds(a, b, j);
        if (!speeds || speeds->first <= 0.0 || speeds->second <= 0.0 ||
            speeds->first / alone_a + speeds->second / alone_b <= 1.0 + 1e-9)
          continue;
        const int z = lp.add_variable(0.0, kInfinity);
        capacity[static_cast<std::size_t>(j)].emplace_back(z, scale);
        it_a->second.options.push_back({z, a == b ? 2.0 : 1.0, speeds->first, j, b, a == b});
        if (a != b) it_b->second.options.push_back({z, 1.0, speeds->second, j, a, false});
      }
    }
  }
  const int y = lp.add_variable(0.0, kInfinity, 1.0);
  for (int j = 0; j < J; ++j)
    if (!capacity[static_cast<std::size_t>(j)].empty())
      lp.add_row(capacity[static_cast<std::size_t>(j)], -kInfinity, workers[static_cast<std::size_t>(j)]);
  // The cut at lambda for the jobs in `above`: sum (need + y c - lambda) <= sum_o A_o (v_o -
  // lambda)^+, a same-type pair's time halved when `capped` (one job's share of it).
  const auto add_cut = [&](const Pool& pool, double lambda, const std::vector<std::size_t>& above, bool capped) {
    std::vector<std::pair<int, double>> row;
    for (const Option& o : pool.options) {
      const double factor = capped && o.self_pair ? 1.0 : o.factor;
      if (o.speed > lambda) row.emplace_back(o.variable, factor * (o.speed - lambda));
    }
    double rest = 0.0, slope = 0.0;
    for (std::size_t m : above) rest += need[m] - lambda, slope += c[m] / unit;
    row.emplace_back(y, -slope);
    lp.add_row(row, rest, kInfinity);
  };
  for (const auto& [a, pool] : pools) {
    std::vector<std::pair<int, double>> time;
    for (const Option& o : pool.options) time.emplace_back(o.variable, o.factor);
    lp.add_row(time, -kInfinity, static_cast<double>(pool.jobs.size()));
    add_cut(pool, 0.0, pool.jobs, false);
  }

  // Adds the most broken cut of every type (and of its largest requirement alone, where the
  // type pairs with itself); returns how many it added.
  const auto separate = [&](const LinearProgram::Solution& s) {
    const double at_y = s.values[static_cast<std::size_t>(y)] / unit;
    int added = 0;
    for (const auto& [a, pool] : pools) {
      std::vector<double> r;
      double total = 0.0;
      for (std::size_t m : pool.jobs) r.push_back(need[m] + at_y * c[m]), total += r.back();
      std::vector<double> lambdas{0.0};
      for (const Option& o : pool.options) lambdas.push_back(o.speed);
      lambdas.insert(lambdas.end(), r.begin(), r.end());
      // CLP holds rows to about 1e-7: breaks below that are its rounding, not a cut to add.
      const double tolerance = 1e-7 * std::max(1.0, total);
      const auto supply = [&](double lambda, bool capped) {
        double sum = 0.0;
        for (const Option& o : pool.options) {
          const double time = (capped && o.self_pair ? 1.0 : o.factor) * s.values[static_cast<std::size_t>(o.variable)];
          sum += time * std::max(0.0, o.speed - lambda);
        }
        return sum;
      };
      double worst = tolerance, worst_lambda = -1.0;
      for (double lambda : lambdas) {
        double demand = 0.0;
        for (double rm : r) demand += std::max(0.0, rm - lambda);
        const double broken = demand - supply(lambda, false);
        if (broken > worst) worst = broken, worst_lambda = lambda;
      }
      if (worst_lambda >= 0.0) {
        std::vector<std::size_t> above;
        for (std::size_t k = 0; k < r.size(); ++k)
          if (r[k] > worst_lambda) above.push_back(pool.jobs[k]);
        add_cut(pool, worst_lambda, above, false);
        ++added;
      }
      if (std::none_of(pool.options.begin(), pool.options.end(), [](const Option& o) { return o.self_pair; })) continue;
      const std::size_t top = static_cast<std::size_t>(std::max_element(r.begin(), r.end()) - r.begin());
      worst = tolerance, worst_lambda = -1.0;
      for (double lambda : lambdas) {
        const double broken = std::max(0.0, r[top] - lambda) - supply(lambda, true);
        if (broken > worst) worst = broken, worst_lambda = lambda;
      }
      if (worst_lambda >= 0.0) {
        add_cut(pool, worst_lambda, {pool.jobs[top]}, true);
        ++added;
      }
    }
    return added;
  };
  const auto solve_with_cuts = [&]() -> std::optional<LinearProgram::Solution> {
    for (int round = 0; round < kMaxRounds; ++round) {
      LinearProgram::Solution s = lp.solve();
      ++out.lp_solves;
      if (!s.optimal) return std::nullopt;
      if (separate(s) == 0) return s;
    }
    return std::nullopt;
  };
  const auto first = solve_with_cuts();
  if (!first) return std::nullopt;
  out.y = first->objective / unit;
  std::optional<LinearProgram::Solution> spent = first;
  if (spend_the_rest) {
    // y held, the rest of the time goes on work, each job's best speed counting 1.
    lp.set_objective(y, 0.0);
    lp.set_bounds(y, first->objective * (1.0 - kHold), kInfinity);
    for (const auto& [a, pool] : pools)
      for (const Option& o : pool.options) lp.add_objective(o.variable, o.factor * o.speed / pool.fastest);
    spent = solve_with_cuts();
    if (!spent) spent = first;
  }
  const double final_y = spent->values[static_cast<std::size_t>(y)] / unit;

  // Each type's pooled times split over its jobs.
  out.chosen.share.assign(jobs.size(), std::vector<double>(static_cast<std::size_t>(J), 0.0));
  out.throughput.assign(jobs.size(), 0.0);
  std::map<std::pair<int, int>, std::vector<std::pair<std::size_t, double>>> sides;  // (Z variable, type) -> (job, time)
  for (const auto& [a, pool] : pools) {
    LinearProgram split(LinearProgram::Sense::kMaximize);
    std::vector<std::size_t> used;
    for (std::size_t k = 0; k < pool.options.size(); ++k)
      if (pool.options[k].factor * spent->values[static_cast<std::size_t>(pool.options[k].variable)] > 1e-12) used.push_back(k);
    std::vector<std::vector<int>> var(pool.jobs.size(), std::vector<int>(used.size()));
    for (std::size_t i = 0; i < pool.jobs.size(); ++i) {
      std::vector<std::pair<int, double>> time, work;
      for (std::size_t u = 0; u < used.size(); ++u) {
        const Option& o = pool.options[used[u]];
        // A job holds at most half of a same-type pair's time: it cannot pair with itself.
        const double cap = o.self_pair ? spent->values[static_cast<std::size_t>(o.variable)] : 1.0;
        var[i][u] = split.add_variable(0.0, cap);
        time.emplace_back(var[i][u], 1.0);
        work.emplace_back(var[i][u], o.speed);
      }
      const std::size_t m = pool.jobs[i];
      split.add_row(time, -kInfinity, 1.0);
      split.add_row(work, (need[m] + final_y * c[m]) * (1.0 - 1e-6), kInfinity);
    }
    for (std::size_t u = 0; u < used.size(); ++u) {
      const Option& o = pool.options[used[u]];
      std::vector<std::pair<int, double>> total;
      for (std::size_t i = 0; i < pool.jobs.size(); ++i) total.emplace_back(var[i][u], 1.0);
      const double amount = o.factor * spent->values[static_cast<std::size_t>(o.variable)];
      split.add_row(total, amount, amount);
    }
    const LinearProgram::Solution s = split.solve();
    ++out.lp_solves;
    if (!s.optimal) return std::nullopt;
    for (std::size_t i = 0; i < pool.jobs.size(); ++i) {
      const std::size_t m = pool.jobs[i];
      for (std::size_t u = 0; u < used.size(); ++u) {
        const Option& o = pool.options[used[u]];
        const double time = std::max(0.0, s.values[static_cast<std::size_t>(var[i][u])]);
        out.throughput[m] += time * o.speed;
        if (o.partner < 0) out.chosen.share[m][static_cast<std::size_t>(o.gpu_type)] += std::min(1.0, time);
        else sides[{o.variable, a}].emplace_back(m, time);
      }
    }
  }
  // The pairs, as AllocationLp::chosen gives them: per Z, its first type's side and its second's.
  for (auto it_a = pools.begin(); it_a != pools.end(); ++it_a) {
    for (const Option& o : it_a->second.options) {
      if (o.partner < 0 || o.partner < it_a->first) continue;  // each pair once, from its first type
      if (spent->values[static_cast<std::size_t>(o.variable)] < AllocationLp::kNoPair) continue;
      PairGroup g{o.gpu_type, sides[{o.variable, it_a->first}], {}};
      if (!o.self_pair) g.side_b = sides[{o.variable, o.partner}];
      out.chosen.groups.push_back(std::move(g));
    }
  }
  return out;
}

}  // namespace perseus::cluster
