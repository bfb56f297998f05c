#include "perseus/cluster/water_filling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "perseus/cluster/pooled_requirements.hpp"

namespace perseus::cluster {

namespace {

// A job is bottlenecked when it cannot gain this much (of its floor, at least of an equal share)
// while every other job keeps its floor: below it, a gain is the LPs' rounding.
constexpr double kGain = 1e-4;
// Floors are held this much (relative, and absolute) below the LP's values, so that the next
// round's LP and MILP, solved to CLP's and CBC's tolerances, stay feasible (should they not,
// they are eased as much again, at most 3 times).
constexpr double kFloorSlack = 1e-6;
constexpr double kFloorSlackAbsolute = 1e-9;
// The least gain that counts for a job whose floor is f (the MILP's delta).
double least_gain(double floor) { return kGain * std::max(1.0, floor); }

// With space sharing, the rounds run pooled (PooledAllocationLp) from this many classes on
// (Pooling::kAuto). Below it the class-by-class LPs take about a second at most, and a pooled
// attempt whose allocation cannot be dealt out to the classes (a same-type pair's cap), then
// redone class by class, took 3.0 s where they take 1.1 (128 jobs, 86 classes); from 135
// classes on the pooled rounds took 0.3-0.9 s against 1.4-10.7 s (BM_Hierarchical's jobs).
constexpr std::size_t kPooledClassesMin = 128;
// CBC's time per MILP; past it the best z found stands (jobs it could not show able to gain are
// taken as bottlenecked: the allocation stays valid and fair, if not proven Pareto efficient).
constexpr double kMilpSeconds = 10.0;

}  // namespace

WaterFilling water_fill(const std::vector<Job>& jobs, const ThroughputMatrix& t, const std::vector<int>& workers,
                        const PolicySpec& spec, Pooling pooling) {
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
  std::vector<double> floor, most(C, 0.0);
  std::vector<char> active;
  for (std::size_t c = 0; c < C; ++c) most[c] = factor[c] * fastest_seen(t, classes[c], aware);
  const auto ease_floors = [&] {
    for (double& f : floor) f = std::max(0.0, f * (1.0 - kFloorSlack) - kFloorSlackAbsolute);
  };
  // One LP serves every step: X with its validity rows and a row per class, n_c(X) >= floor_c
  // (the floors are the rows' lower bounds). A round adds columns of its own: the level L, with
  // -w_c in each weighted class's row, or the MILP's z_c, with -delta_c; the columns of earlier
  // rounds are fixed at 0. As nothing else changes but bounds and the objective, each step starts
  // from the last one's basis (LinearProgram::resolve): a few pivots, not an LP from scratch.
  // (An LP built afresh each step took 9.8 ms an allocation of 50 to 100 classes.)
  // The rounds on `a`: AllocationLp, or with space sharing PooledAllocationLp (each job type's
  // classes pooled, pooled_requirements.hpp), whose chosen() may find its allocation cannot be
  // dealt out to the classes (nullopt).
  const auto fill = [&](auto& a) -> std::optional<Chosen> {
    floor.assign(C, 0.0);
    active.assign(C, 0);
    for (std::size_t c = 0; c < C; ++c) active[c] = factor[c] > 0.0;
    out.lp_solves = out.milp_solves = out.rounds = 0;
    out.first_level = 0.0;
    std::vector<int> row_of(C, -1);
    for (std::size_t c = 0; c < C; ++c)
      if (factor[c] > 0.0) row_of[c] = a.lp.add_row(a.terms(c, [&](const Term& term) { return term.seen * factor[c]; }), 0.0, kInfinity);
    std::vector<int> round_columns;
    bool solved = false;
    const auto solve_holding = [&](const std::vector<double>& f) {
      for (std::size_t c = 0; c < C; ++c)
        if (row_of[c] >= 0) a.lp.set_row_bounds(row_of[c], f[c], kInfinity);
      ++out.lp_solves;
      LinearProgram::Solution s = solved ? a.resolve() : a.solve();
      solved = true;
      return s;
    };
    // The LP with every floor held; while the floors prove infeasible (rounded past what CLP
    // accepts) they are eased, at most 3 times.
    const auto solve_holding_floors = [&] {
      for (int ease = 0;; ++ease) {
        LinearProgram::Solution s = solve_holding(floor);
        if (!s.infeasible || ease == 3) return s;
        ease_floors();
      }
    };
    // The last round's columns leave the LP (fixed at 0).
    const auto retire_round = [&] {
      for (const int v : round_columns) a.lp.set_bounds(v, 0.0, 0.0), a.lp.set_objective(v, 0.0);
      round_columns.clear();
    };

    // 1. Each active class's weight per job, from its entity's policy; false when none has one.
    const auto weigh = [&](const std::vector<char>& on, std::vector<double>& weight) {
      std::fill(weight.begin(), weight.end(), 0.0);
      bool any = false;
      for (std::size_t e = 0; e < entities.size(); ++e) {
        double total = 0.0;
        for (std::size_t c = 0; c < C; ++c)
          if (on[c] && classes[c].entity == static_cast<int>(e)) total += copies[c] * classes[c].weight;
        for (std::size_t c = 0; c < C && total > 0.0; ++c) {
          if (!on[c] || classes[c].entity != static_cast<int>(e) || classes[c].weight <= 0.0) continue;
          any = true;
          if (entities[e].policy == EntityPolicy::kFifo) {
            weight[c] = entities[e].weight;
            break;
          }
          weight[c] = entities[e].weight * classes[c].weight / total;
        }
      }
      return any;
    };
    const auto raise_floor = [&](std::size_t c, double reached, std::vector<double>& f) {
      f[c] = std::max(0.0, reached * (1.0 - kFloorSlack) - kFloorSlackAbsolute);
    };

    // Rounds that end at a job's own most need no LP to find them. While the cluster has room, the
    // level rises until the next weighted class reaches its most; that re-weights its peers (step 1)
    // and the level goes on: a sequence of events known in closed form. `replay` plays up to
    // `events` of them on (f, on) and returns how many there were. A feasibility LP (every floor
    // held; after the first, dual simplex from the last basis, as only floors move) tells whether
    // the cluster holds the floors after k events; it does for every k up to some last one (floors
    // only rise), found by bisection, and the rounds up to it are taken at once: O(log events)
    // LPs instead of one per event. (In a 4-jobs/hour trace 90% of rounds were such; the 5,000-job
    // trace took 157 s.)
    std::vector<double> scratch_weight(C);
    const auto replay = [&](int events, std::vector<double>& f, std::vector<char>& on) {
      int played = 0;
      for (; played < events && weigh(on, scratch_weight); ++played) {
        // As a round whose LP stops there: the level at the first class's most; classes that reach
        // theirs (within kGain) stop.
        double level = kInfinity;
        for (std::size_t c = 0; c < C; ++c)
          if (scratch_weight[c] > 0.0) level = std::min(level, std::max(0.0, (most[c] - f[c]) / scratch_weight[c]));
        for (std::size_t c = 0; c < C; ++c) {
          if (scratch_weight[c] <= 0.0) continue;
          const double reached = f[c] + scratch_weight[c] * level;
          raise_floor(c, reached, f);
          if (reached >= most[c] * (1.0 - kGain)) on[c] = 0;
        }
      }
      return played;
    };
    const auto holds = [&](const std::vector<double>& f) {
      retire_round();
      return !solve_holding(f).infeasible;
    };
    const auto take_rounds_to_most = [&] {
      std::vector<double> f = floor;
      std::vector<char> on = active;
      const int events = replay(std::numeric_limits<int>::max(), f, on);
      const auto after = [&](int k) {
        f = floor, on = active;
        replay(k, f, on);
      };
      int reachable = 0;
      if (events > 0 && holds(f)) {
        reachable = events;
      } else if (events > 1) {
        after(1);
        if (holds(f)) {
          int lo = 1, hi = events;  // lo holds, hi does not
          while (hi - lo > 1) {
            const int mid = lo + (hi - lo) / 2;
            after(mid);
            (holds(f) ? lo : hi) = mid;
          }
          reachable = lo;
        }
      }
      if (reachable == 0) return false;
      after(reachable);
      floor = std::move(f), active = std::move(on);
      out.rounds += reachable;
      return true;
    };

    std::vector<double> weight(C);
    bool after_most = false;
    for (std::size_t cap = 2 * C + 4; cap > 0; --cap) {
      // After a round that ended at a job's most, the rounds to come that end so too, at once.
      // (Not after every round: once the cluster is full, a round's level stops short of the next
      // job's most, and probing for it cost two LPs a round.)
      if (after_most) {
        after_most = false;
        if (take_rounds_to_most()) continue;
      }
      if (!weigh(active, weight)) break;
      ++out.rounds;
      // 2. Raise the weighted jobs' level together above their floors.
      retire_round();
      std::vector<std::pair<int, double>> level_entries;
      for (std::size_t c = 0; c < C; ++c)
        if (weight[c] > 0.0) level_entries.emplace_back(row_of[c], -weight[c]);
      round_columns.push_back(a.lp.add_column(0.0, kInfinity, 1.0, level_entries));
      const LinearProgram::Solution raised = solve_holding_floors();
      if (!raised.optimal) throw SolveError("the hierarchical policy's water-filling LP was not solved to optimality");
      if (out.rounds == 1) out.first_level = raised.objective;
      // The level rose when some weighted job gained the MILP's delta. Were the weighted jobs all
      // able to gain their delta at once, the level would reach the least delta_c / w_c, so a level
      // that did not rise leaves the MILP some job to stop: every round raises a floor by a delta
      // or stops a job. (A level compared with a fixed threshold instead, not weighed, let the
      // FIFO head gain 1.4e-4 of its throughput from the floors' slack round after round, neither
      // rising nor stopped, until the round cap: 1,445 idle rounds at 2,048 jobs.)
      const double level = raised.objective;
      bool rose = false, capped = false;
      for (std::size_t c = 0; c < C && !rose; ++c)
        rose = weight[c] > 0.0 && weight[c] * level >= least_gain(floor[c]);
      if (rose)
        for (std::size_t c = 0; c < C; ++c) {
          if (weight[c] <= 0.0) continue;
          const double reached = floor[c] + weight[c] * level;
          raise_floor(c, reached, floor);
          // At its own most (all its time on its fastest type) a job is bottlenecked by itself.
          if (reached >= most[c] * (1.0 - kGain)) active[c] = 0, capped = true;
        }
      // A level stopped by such jobs needs no MILP: were another job stuck too, the next round's
      // level would not rise, and its MILP would find it.
      if (capped) {
        after_most = true;
        continue;
      }
      // 3. Which weighted jobs can still gain with everyone else held at their floors (the MILP).
      retire_round();
      std::vector<int> can_gain(C, -1);
      for (std::size_t c = 0; c < C; ++c)
        if (weight[c] > 0.0) {
          can_gain[c] = a.lp.add_column(0.0, 1.0, 1.0, {{row_of[c], -least_gain(floor[c])}});
          round_columns.push_back(can_gain[c]);
        }
      ++out.milp_solves;
      // The relaxation first: its z = 1 gain together, and the z below 1 rounded down keep every
      // row (z only lowers a row's bound), so when the ones number the relaxation's optimum rounded
      // down, no integer z does better and CBC is not needed. (In a 4-jobs/hour trace the
      // relaxation was fractional in 95% of these MILPs, and the rounding certified every one; CBC
      // took 2.9 ms each.)
      LinearProgram::Solution gains = solve_holding_floors();
      if (gains.infeasible) {
        gains.values.clear();
      } else {
        int ones = 0;
        for (std::size_t c = 0; c < C; ++c)
          if (can_gain[c] >= 0) {
            double& z = gains.values[static_cast<std::size_t>(can_gain[c])];
            z = z >= 1.0 - 1e-9 ? 1.0 : 0.0;
            ones += z > 0.0;
          }
        if (!gains.optimal || ones < static_cast<int>(std::floor(gains.objective + 1e-6))) {
          for (const int z : can_gain)
            if (z >= 0) a.lp.set_integer(z);
          gains = a.solve_mixed_integer(kMilpSeconds);
          solved = false;  // CBC's model is not CLP's: the next step solves afresh
        }
      }
      // No solution (CBC's time ran out, or the floors stayed infeasible): the weighted jobs stop.
      // So do they when the MILP, within its tolerances, has every one gain though the level did not
      // rise: the round must move.
      bool any_gains = false, any_stopped = false;
      for (std::size_t c = 0; c < C; ++c) {
        if (can_gain[c] < 0) continue;
        if (gains.values.empty() || gains.values[static_cast<std::size_t>(can_gain[c])] < 0.5) active[c] = 0, any_stopped = true;
        else any_gains = true;
      }
      if (!rose && !any_stopped) {
        for (std::size_t c = 0; c < C; ++c)
          if (can_gain[c] >= 0) active[c] = 0;
        any_gains = false;
      }
      // 4. With no weighted job able to gain and no level risen, the cluster may be full for FIFO's
      // queue (jobs of weight 0) too: if their best total gain with every floor held is none, none
      // can gain alone now or later (floors only rise), and they all stop here, not a round each.
      if (any_gains || rose) continue;
      retire_round();
      bool queue = false;
      std::vector<std::pair<int, double>> queue_objective;
      for (std::size_t c = 0; c < C; ++c)
        if (active[c] && floor[c] <= 0.0) {
          queue = true;
          for (const auto& entry : a.terms(c, [&](const Term& term) { return term.seen * factor[c]; })) {
            a.lp.add_objective(entry.first, entry.second);
            queue_objective.push_back(entry);  // X's objective is 0 until the last LP: reset after
          }
        }
      if (!queue) continue;
      const LinearProgram::Solution queue_gain = solve_holding_floors();
      for (const auto& entry : queue_objective) a.lp.set_objective(entry.first, 0.0);
      if (queue_gain.optimal && queue_gain.objective <= kGain)
        for (std::size_t c = 0; c < C; ++c)
          if (floor[c] <= 0.0) active[c] = 0;
    }
    // Every floor held, what is left goes to work (jobs of weight 0 among them).
    retire_round();
    maximize_work(a, classes, t, aware);
    const LinearProgram::Solution spent = solve_holding_floors();
    if (!spent.optimal) throw SolveError("the hierarchical policy's last LP was not solved to optimality");
    return std::optional<Chosen>(a.chosen(spent));
  };
  const bool pool = pooling == Pooling::kAlways || (pooling == Pooling::kAuto && C >= kPooledClassesMin);
  if (spec.space_sharing && pool) {
    PooledAllocationLp pooled(classes, t, workers, copies);
    try {
      if (pooled.runs_everywhere())
        if (auto chosen = fill(pooled)) {
          out.chosen = std::move(*chosen);
          out.lp_solves = pooled.solves();  // every round of cuts and every split counted
          out.pooled = true;
          return out;
        }
    } catch (const SolveError&) {
      // The pooled LP failed where CLP would not on AllocationLp's: solved class by class below.
    }
  }
  AllocationLp a(classes, t, workers, LinearProgram::Sense::kMaximize, aware, spec.space_sharing, copies);
  out.chosen = *fill(a);
  return out;
}

}  // namespace perseus::cluster
