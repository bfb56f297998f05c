#include "perseus/cluster/water_filling.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace perseus::cluster {

namespace {

// A job is bottlenecked when it cannot gain this much (of its floor, at least of an equal share)
// while every other job keeps its floor: below it, a gain is the LPs' rounding.
constexpr double kGain = 1e-4;
// Floors are held this much (relative, and absolute) below the LP's values, so that the next
// round's LP and MILP, solved to CLP's and CBC's tolerances, stay feasible (should they not,
// they are eased as much again, at most 3 times); a level below kNoRise is no gain (the MILP's
// measure) and raises no floor.
constexpr double kFloorSlack = 1e-6;
constexpr double kFloorSlackAbsolute = 1e-9;
constexpr double kNoRise = kGain;
// CBC's time per MILP; past it the best z found stands (jobs it could not show able to gain are
// taken as bottlenecked: the allocation stays valid and fair, if not proven Pareto efficient).
constexpr double kMilpSeconds = 10.0;

}  // namespace

WaterFilling water_fill(const std::vector<Job>& jobs, const ThroughputMatrix& t, const std::vector<int>& workers,
                        const PolicySpec& spec) {
  const std::vector<Entity> entities = entities_of(spec);
  const bool aware = spec.heterogeneity_aware;
  WaterFilling out;
  // Under fairness, jobs of one entity, type and weight are one class; under FIFO each job is.
  out.grouped = group_jobs(jobs, [&](const Job& job, std::size_t m) {
    const bool fifo = entities[static_cast<std::size_t>(job.entity)].policy == EntityPolicy::kFifo;
    return ClassKey{job.entity, job.type, job.weight, fifo ? m : 0};
  });
  const std::vector<Job>& classes = out.grouped.classes;
  const std::vector<double>& copies = out.grouped.copies;
  const std::size_t C = classes.size();
  // n_c(X) = factor[c] x tput_seen(c, X) (factor 0: the class runs nowhere); `most` is n_c with
  // all its time on its fastest type.
  const std::vector<double> factor = normalising_factors(classes, t, workers, aware);
  std::vector<double> floor(C, 0.0), most(C, 0.0);
  std::vector<char> active(C, 0);
  for (std::size_t c = 0; c < C; ++c) {
    active[c] = factor[c] > 0.0;
    most[c] = factor[c] * fastest_seen(t, classes[c], aware);
  }
  const auto ease_floors = [&] {
    for (double& f : floor) f = std::max(0.0, f * (1.0 - kFloorSlack) - kFloorSlackAbsolute);
  };
  // An LP over the classes with every floor held, n_c(X) >= floor_c. `extend(a, c, row)` may add
  // variables, terms to class c's row and objective coefficients; it returns whether it added to
  // the row (a class without a floor then gets its row too). `solve(a)` solves it; while the
  // floors prove infeasible (rounded past what CLP or CBC accepts) they are eased, at most 3 times.
  // `start(a)` runs first on each LP built.
  const auto holding_floors = [&](auto start, auto extend, auto solve) {
    for (int ease = 0;; ++ease) {
      AllocationLp a(classes, t, workers, LinearProgram::Sense::kMaximize, aware, spec.space_sharing, copies);
      start(a);
      for (std::size_t c = 0; c < C; ++c) {
        if (factor[c] <= 0.0) continue;
        auto row = a.terms(c, [&](const Term& term) { return term.seen * factor[c]; });
        if (extend(a, c, row) || floor[c] > 0.0) a.lp.add_row(row, floor[c], kInfinity);
      }
      LinearProgram::Solution s = solve(a);
      if (!s.infeasible || ease == 3) return std::make_pair(std::move(a), std::move(s));
      ease_floors();
    }
  };
  const auto nothing_first = [](AllocationLp&) {};
  const auto no_terms = [](AllocationLp&, std::size_t, std::vector<std::pair<int, double>>&) { return false; };
  const auto solve_lp = [&](AllocationLp& a) {
    ++out.lp_solves;
    return a.lp.solve();
  };

  std::vector<double> weight(C);
  for (std::size_t cap = 2 * C + 4; cap > 0; --cap) {
    // 1. Each active class's weight per job, from its entity's policy.
    std::fill(weight.begin(), weight.end(), 0.0);
    for (std::size_t e = 0; e < entities.size(); ++e) {
      double total = 0.0;
      for (std::size_t c = 0; c < C; ++c)
        if (active[c] && classes[c].entity == static_cast<int>(e)) total += copies[c] * classes[c].weight;
      for (std::size_t c = 0; c < C && total > 0.0; ++c) {
        if (!active[c] || classes[c].entity != static_cast<int>(e) || classes[c].weight <= 0.0) continue;
        if (entities[e].policy == EntityPolicy::kFifo) {
          weight[c] = entities[e].weight;
          break;
        }
        weight[c] = entities[e].weight * classes[c].weight / total;
      }
    }
    if (std::none_of(weight.begin(), weight.end(), [](double w) { return w > 0.0; })) break;
    ++out.rounds;
    // 2. Raise the weighted jobs' level together above their floors.
    int level = -1;
    const auto raised = holding_floors(
        [&](AllocationLp& a) { level = a.lp.add_variable(0.0, kInfinity, 1.0); },
        [&](AllocationLp&, std::size_t c, std::vector<std::pair<int, double>>& row) {
          if (weight[c] <= 0.0) return false;
          row.emplace_back(level, -weight[c]);
          return true;
        },
        solve_lp).second;
    if (!raised.optimal) throw SolveError("the hierarchical policy's water-filling LP was not solved to optimality");
    if (out.rounds == 1) out.first_level = raised.objective;
    bool capped = false;
    if (raised.objective > kNoRise)
      for (std::size_t c = 0; c < C; ++c) {
        if (weight[c] <= 0.0) continue;
        const double reached = floor[c] + weight[c] * raised.objective;
        floor[c] = std::max(0.0, reached * (1.0 - kFloorSlack) - kFloorSlackAbsolute);
        // At its own most (all its time on its fastest type) a job is bottlenecked by itself.
        if (reached >= most[c] * (1.0 - kGain)) active[c] = 0, capped = true;
      }
    // A level stopped by such jobs needs no MILP: were another job stuck too, the next round's
    // level would not rise, and its MILP would find it.
    if (capped) continue;
    // 3. Which weighted jobs can still gain with everyone else held at their floors (the MILP).
    std::vector<int> can_gain(C, -1);
    const auto gains = holding_floors(
        nothing_first,
        [&](AllocationLp& a, std::size_t c, std::vector<std::pair<int, double>>& row) {
          if (weight[c] <= 0.0) return false;
          can_gain[c] = a.lp.add_variable(0.0, 1.0, 1.0);
          a.lp.set_integer(can_gain[c]);
          row.emplace_back(can_gain[c], -kGain * std::max(1.0, floor[c]));
          return true;
        },
        [&](AllocationLp& a) {
          ++out.milp_solves;
          return a.lp.solve_mixed_integer(kMilpSeconds);
        }).second;
    // No solution (CBC's time ran out, or the floors stayed infeasible): the weighted jobs stop.
    bool any_gains = false;
    for (std::size_t c = 0; c < C; ++c) {
      if (can_gain[c] < 0) continue;
      if (gains.values.empty() || gains.values[static_cast<std::size_t>(can_gain[c])] < 0.5) active[c] = 0;
      else any_gains = true;
    }
    // 4. With no weighted job able to gain and no level risen, the cluster may be full for FIFO's
    // queue (jobs of weight 0) too: if their best total gain with every floor held is none, none
    // can gain alone now or later (floors only rise), and they all stop here, not a round each.
    if (any_gains || raised.objective > kNoRise) continue;
    bool queue = false;
    const auto queue_gain = holding_floors(
        nothing_first,
        [&](AllocationLp& a, std::size_t c, std::vector<std::pair<int, double>>& row) {
          if (active[c] && floor[c] <= 0.0) {
            queue = true;
            for (const auto& [variable, coefficient] : row) a.lp.add_objective(variable, coefficient);
          }
          return false;
        },
        solve_lp).second;
    if (queue && queue_gain.optimal && queue_gain.objective <= kGain)
      for (std::size_t c = 0; c < C; ++c)
        if (floor[c] <= 0.0) active[c] = 0;
  }
  // Every floor held, what is left goes to work (jobs of weight 0 among them).
  auto [last, spent] = holding_floors(nothing_first, no_terms, [&](AllocationLp& a) {
    maximize_work(a, classes, t, aware);
    return solve_lp(a);
  });
  if (!spent.optimal) throw SolveError("the hierarchical policy's last LP was not solved to optimality");
  out.chosen = last.chosen(spent);
  return out;
}

}  // namespace perseus::cluster
