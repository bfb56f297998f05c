#include "perseus/cluster/water_filling.hpp"

#include <algorithm>
#include <map>
#include <tuple>

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
  const std::vector<Entity> entities =
      spec.entities.empty() ? std::vector<Entity>{{"all", 1.0, EntityPolicy::kFairness}} : spec.entities;
  const bool aware = spec.heterogeneity_aware;
  WaterFilling out;
  std::map<std::tuple<int, int, double>, std::size_t> class_of;
  out.job_class.resize(jobs.size());
  for (std::size_t m = 0; m < jobs.size(); ++m) {
    const Job& job = jobs[m];
    std::size_t c = out.classes.size();
    if (entities[static_cast<std::size_t>(job.entity)].policy == EntityPolicy::kFairness)
      c = class_of.emplace(std::make_tuple(job.entity, job.type, job.weight), c).first->second;
    if (c == out.classes.size()) out.classes.push_back(job), out.copies.push_back(0.0);
    out.copies[c] += 1.0;
    out.job_class[m] = c;
  }
  const std::vector<Job>& classes = out.classes;
  const std::size_t C = classes.size();
  // n_c(X) = factor[c] x tput_seen(c, X); 0: the class runs nowhere.
  std::vector<double> factor(C, 0.0), floor(C, 0.0), most(C, 0.0);
  std::vector<char> active(C, 0);
  const auto equal = equal_share(classes, t, workers);
  for (std::size_t c = 0; c < C; ++c) {
    double normal = 0.0;
    for (int j = 0; j < t.num_gpu_types(); ++j) normal += seen(t, classes[c], j, aware) * equal[c][static_cast<std::size_t>(j)];
    if (normal > 0.0) factor[c] = scale_of(t, classes[c]) / normal, active[c] = 1;
    most[c] = factor[c] * fastest_seen(t, classes[c], aware);
  }
  const auto normalised = [&](const AllocationLp& a, std::size_t c) {
    return a.terms(c, [&](const Term& term) { return term.seen * factor[c]; });
  };
  const auto lp = [&] {
    return AllocationLp(classes, t, workers, LinearProgram::Sense::kMaximize, aware, spec.space_sharing, out.copies);
  };

  const auto ease_floors = [&] {
    for (double& f : floor) f = std::max(0.0, f * (1.0 - kFloorSlack) - kFloorSlackAbsolute);
  };
  std::vector<double> weight(C);
  for (std::size_t cap = 2 * C + 4; cap > 0; --cap) {
    // 1. Each active class's weight per job, from its entity's policy.
    std::fill(weight.begin(), weight.end(), 0.0);
    for (std::size_t e = 0; e < entities.size(); ++e) {
      double total = 0.0;
      for (std::size_t c = 0; c < C; ++c)
        if (active[c] && classes[c].entity == static_cast<int>(e)) total += out.copies[c] * classes[c].weight;
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
    LinearProgram::Solution raised;
    for (int ease = 0;; ++ease) {
      AllocationLp level_lp = lp();
      const int level = level_lp.lp.add_variable(0.0, kInfinity, 1.0);
      for (std::size_t c = 0; c < C; ++c) {
        if (factor[c] <= 0.0 || (weight[c] <= 0.0 && floor[c] <= 0.0)) continue;
        auto row = normalised(level_lp, c);
        if (weight[c] > 0.0) row.emplace_back(level, -weight[c]);
        level_lp.lp.add_row(row, floor[c], kInfinity);
      }
      raised = level_lp.lp.solve();
      ++out.lp_solves;
      if (raised.optimal) break;
      if (ease == 3) throw SolveError("the hierarchical policy's water-filling LP was not solved to optimality");
      ease_floors();
    }
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
    LinearProgram::Solution gains;
    for (int ease = 0; ease < 3; ++ease) {
      AllocationLp gain_lp = lp();
      for (std::size_t c = 0; c < C; ++c) {
        if (factor[c] <= 0.0 || (weight[c] <= 0.0 && floor[c] <= 0.0)) continue;
        auto row = normalised(gain_lp, c);
        if (weight[c] > 0.0) {
          can_gain[c] = gain_lp.lp.add_variable(0.0, 1.0, 1.0);
          gain_lp.lp.set_integer(can_gain[c]);
          row.emplace_back(can_gain[c], -kGain * std::max(1.0, floor[c]));
        }
        gain_lp.lp.add_row(row, floor[c], kInfinity);
      }
      gains = gain_lp.lp.solve_mixed_integer(kMilpSeconds);
      ++out.milp_solves;
      if (!gains.infeasible) break;
      ease_floors();
    }
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
    AllocationLp queue_lp = lp();
    bool queue = false;
    for (std::size_t c = 0; c < C; ++c) {
      if (factor[c] <= 0.0) continue;
      if (floor[c] > 0.0) queue_lp.lp.add_row(normalised(queue_lp, c), floor[c], kInfinity);
      if (active[c] && floor[c] <= 0.0) {
        queue = true;
        for (const auto& [variable, coefficient] : normalised(queue_lp, c)) queue_lp.lp.add_objective(variable, coefficient);
      }
    }
    if (!queue) continue;
    const auto queue_gain = queue_lp.lp.solve();
    ++out.lp_solves;
    if (queue_gain.optimal && queue_gain.objective <= kGain)
      for (std::size_t c = 0; c < C; ++c)
        if (floor[c] <= 0.0) active[c] = 0;
  }
  // Every floor held, what is left goes to work (jobs of weight 0 among them).
  for (int ease = 0;; ++ease) {
    AllocationLp final_lp = lp();
    for (std::size_t c = 0; c < C; ++c)
      if (factor[c] > 0.0 && floor[c] > 0.0) final_lp.lp.add_row(normalised(final_lp, c), floor[c], kInfinity);
    maximize_work(final_lp, classes, t, aware);
    const auto spent = final_lp.lp.solve();
    ++out.lp_solves;
    if (spent.optimal) {
      out.chosen = final_lp.chosen(spent);
      return out;
    }
    if (ease == 3) throw SolveError("the hierarchical policy's last LP was not solved to optimality");
    ease_floors();
  }
}

}  // namespace perseus::cluster
