// The frontier builder's state and helpers, shared by frontier.cpp (the builder) and
// certification.cpp (certification, its last step). Internal to the solver module: nothing
// outside those two files includes it.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include "perseus/model/errors.hpp"
#include "perseus/solver/bound_crawl.hpp"
#include "perseus/solver/relaxation.hpp"
#include "perseus/solver/frontier.hpp"

namespace perseus {
namespace frontier_internal {

// "%g": a number in an error message, never 309 digits of a huge one.
inline std::string short_number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", value);
  return buffer;
}

// Slack comparisons tolerate float noise in summed measured times.
constexpr double kTimeEpsilon = 1e-9;
// Refinement work (PlanRefiner::work units) charged for one LP relaxation solve.
constexpr double kLpSolvePasses = 200.0;
constexpr double kLpSolveVisits = 4.0e4;
constexpr double kLpQuadraticVisits = 1100.0;
// A crawl step costs at least this many passes over the DAG (measured: 13 on 1,536 nodes, 33
// on 192); an LP solve about this many per node and edge (the network simplex's, measured:
// 1,500 passes on 544, 7,900 on 4,408; cost scaling, which solves from 768 operations
// (min_cost_flow.hpp), takes less, but the count stays, so the budgets and the plans are as
// they were), and rounding its plan (two repairs) about kRoundingPasses more.
// Beside the crawl, the grid's solves take at most kGridShareOfCrawl of it.
constexpr double kCrawlStepPasses = 12.0;
constexpr double kLpSolvePassesPerItem = 2.5;
constexpr double kRoundingPasses = 40.0;
constexpr double kGridShareOfCrawl = 0.3;
// About this many of the crawl's flows become supporting lines (FrontierBuilder::add_flow):
// every (length / kFlowLines)-th step's, and each of that many last steps before T_min, where
// they bound most.
constexpr std::size_t kFlowLines = 256;
// Of the search's work, the share T_min gets: the plan most users run.
constexpr double kShareAtTMin = 0.15;
// The hull crawl's steps (FrontierOptions::bound_crawl_node_steps): fewer leave the lines too
// far apart on small DAGs; more cost time where the lines already touch.
constexpr std::size_t kBoundCrawlStepsMin = 64;
constexpr std::size_t kBoundCrawlStepsMax = 2048;
// What a pass over the DAG costs beyond its nodes and edges, in visits (measured: 0.19 us a
// pass over 38 nodes and edges, 0.55 us over 176).
constexpr double kPassOverheadVisits = 35.0;
// Work charged for a solve of the certification's sweep (LpRelaxation, from an anchor's
// tree), fixed so that the solves a budget pays for do not depend on which thread found an
// anchor's tree first: the fixed part CLP's warm-started solves were charged, without their
// pivots (8-130 a solve, 50 passes each). The anchored solves take a third of CLP's time
// (0.54 against 1.71 ms a solve over the 16 cases' sweeps), and the budget now pays for 2-3
// times as many; charging 0.05 or 0.1 pivots a node as well gave fewer solves and wider
// medians on 384 nodes (docs/solver.md, "The sweep on the anchors' trees").
constexpr double kSweepSolvePasses = 400.0;
// Work charged for a solve of the sweep beside the crawl (FrontierOptions::crawl_sweep_share),
// in passes over the DAG as a crawl step counts them (kCrawlStepPasses): a fixed part and one
// per pivot, measured on the A40 cases' 1,536 nodes (3.5 ms a solve and 0.06 ms a pivot,
// where a crawl step takes 40 us); the deadlines are as many as solves of
// kCrawlSweepPivots pivots would pay for (their mean there was 80-170, from 4 near T_min to
// 370 further on).
constexpr double kCrawlSweepSolvePasses = 1000.0;
constexpr double kCrawlSweepPivotPasses = 20.0;
constexpr double kCrawlSweepPivots = 150.0;

// The reference's fitted energy of a crawl step: cost + S * time * p_blocking.
inline double reference_energy(const CrawlStep& step, const EnergyProblem& problem) {
  return step.fitted_cost + problem.num_gpus() * (static_cast<double>(step.time_q) * problem.unit_time) * problem.p_blocking;
}

// A frontier point of a plan; `step` is the crawl step it was derived from (nullptr: none).
// `critical_path_s`: the plan's measured time if known (NaN: computed here).
inline FrontierPoint make_point(const EnergyProblem& problem, const OptionChoice& choice, std::int64_t index,
                         const CrawlStep* step, double critical_path_s = std::numeric_limits<double>::quiet_NaN()) {
  FrontierPoint point;
  point.choice.assign(choice.begin(), choice.end());
  point.measured = evaluate_measured(problem, choice, critical_path_s);
  point.effective_energy_j =
      point.measured.energy_j - problem.p_blocking * problem.num_gpus() * point.measured.time_s;
  point.crawl_step = step ? index : -1;
  if (step) {
    point.planned_time_q = step->time_q;
    point.fitted_energy_j = reference_energy(*step, problem);
  }
  return point;
}
inline FrontierPoint make_point(const EnergyProblem& problem, const OptionChoice& choice) {
  return make_point(problem, choice, -1, nullptr);
}

// Fastest first; a plan is kept only if it uses strictly less effective energy than every
// faster one. At a deadline D a plan of time T costs energy + p_blocking * S * (D - T) =
// effective energy + p_blocking * S * D (its GPUs block until D), so no other plan is
// worth keeping. Ties in time keep the cheaper.
inline std::vector<FrontierPoint> pareto_filter(std::vector<FrontierPoint> candidates) {
  std::stable_sort(candidates.begin(), candidates.end(), [](const FrontierPoint& a, const FrontierPoint& b) {
    if (a.measured.time_s != b.measured.time_s) return a.measured.time_s < b.measured.time_s;
    return a.effective_energy_j < b.effective_energy_j;
  });
  std::vector<FrontierPoint> kept;
  double best = std::numeric_limits<double>::infinity();
  for (FrontierPoint& point : candidates) {
    if (point.effective_energy_j < best - 1e-9) {
      best = point.effective_energy_j;
      kept.push_back(std::move(point));
    }
  }
  return kept;
}

// Between the crawl's slowest plan and the slowest plan of all, only clocks the crawl never
// plans with are slower (the reference's filter drops them; add_effective_optima keeps
// them): plans there come from the measured options, by reclaiming slack from the crawl's
// start towards evenly spread deadlines, and by repairing the slowest plan down to them.
inline void fill_beyond_crawl(const PlanRefiner& refiner, const OptionChoice& crawl_start, const OptionChoice& slowest,
                       int fills, std::vector<FrontierPoint>* candidates, const EnergyProblem& problem) {
  const double from = refiner.measured_time(crawl_start);
  const double to = refiner.measured_time(slowest);
  if (fills <= 1 || to <= from + kTimeEpsilon) return;
  OptionChoice faster = crawl_start;  // chained: each plan also meets the next, later deadline
  OptionChoice slower = slowest;      // chained: each plan is the start of the next repair
  for (int k = 1; k < fills; ++k) {
    faster = refiner.reclaim_slack(std::move(faster), from + (to - from) * k / fills);
    candidates->push_back(make_point(problem, faster));
    if (refiner.out_of_work()) continue;  // the cheap reclaim chain goes on; repairs stop
    if (auto repaired = refiner.repair(slower, to - (to - from) * k / fills)) {
      slower = std::move(*repaired);
      candidates->push_back(make_point(problem, slower));
    }
  }
}

// Refinement work (PlanRefiner::work) charged for one LP relaxation solve: about
// kLpSolvePasses passes over a DAG of a few hundred nodes and edges, a fixed part that weighs
// more on smaller ones, and about quadratic growth on large ones (calibrated on CLP: 0.2-0.4
// s, some 20,000 passes, on 1,536 nodes; the network simplex takes about 8,000 there and
// 1,500 on 192 nodes, but the charge is kept so that the budget's shares did not move).
inline double lp_solve_work(double dag_size) {
  return std::max({kLpSolvePasses, kLpSolveVisits / dag_size, dag_size * dag_size / kLpQuadraticVisits});
}

// f(0) here and f(1), ..., f(tasks - 1) on threads of their own where `parallel`, after f(0)
// here otherwise; returns when all are done, rethrowing the first exception any of them threw
// (the lowest task's).
template <typename F>
void run_tasks(std::size_t tasks, bool parallel, F&& f) {
  std::vector<std::exception_ptr> failed(tasks);
  const auto guarded = [&](std::size_t k) {
    try {
      f(k);
    } catch (...) {
      failed[k] = std::current_exception();
    }
  };
  std::vector<std::thread> running;
  try {
    for (std::size_t k = 1; parallel && k < tasks; ++k) running.emplace_back(guarded, k);
  } catch (...) {  // no thread to be had: those started finish first
    for (std::thread& thread : running) thread.join();
    throw;
  }
  if (tasks > 0) guarded(0);
  for (std::thread& thread : running) thread.join();
  for (std::size_t k = 1; !parallel && k < tasks && !failed[0]; ++k) guarded(k);
  for (const std::exception_ptr& e : failed) {
    if (e) std::rethrow_exception(e);
  }
}

// Relaxed durations at `t`, between two LP solutions (deadline, durations): interpolated
// linearly. The LP is linear in the deadline, so they meet `t` and are within the LP value's
// curvature of its optimum there.
inline void interpolate_durations(const std::pair<double, std::vector<double>>& below,
                           const std::pair<double, std::vector<double>>& above, double t, std::vector<double>& out) {
  const double w = (t - below.first) / (above.first - below.first);
  out.resize(below.second.size());
  for (std::size_t k = 0; k < out.size(); ++k) out[k] = (1 - w) * below.second[k] + w * above.second[k];
}

// The same from solves ordered by deadline: the two either side of `t` (or the one at it).
// False where `t` lies outside them.
inline bool interpolate_durations(const std::vector<std::pair<double, std::vector<double>>>& solved, double t,
                                  std::vector<double>& out) {
  const auto later = std::lower_bound(solved.begin(), solved.end(), t, [](const auto& a, double x) { return a.first < x; });
  if (later == solved.end()) return false;
  if (later == solved.begin()) {
    if (later->first - t > 1e-9) return false;
    out = later->second;
    return true;
  }
  interpolate_durations(*(later - 1), *later, t, out);
  return true;
}

// The crawl's length in steps, T* - T_min in units: known before it runs, so that the work
// bounded by it can start beside it. (The crawl takes one step per unit; it can stop a few
// short, when a cut would cross a dependency.)
inline std::int64_t crawl_length(const EnergyProblem& problem) {
  const std::size_t n = problem.dag.num_nodes();
  std::vector<std::int64_t> slowest(n), fastest(n);
  for (std::size_t i = 0; i < n; ++i) {
    const OperationOptions& op = problem.options_of(static_cast<Dag::NodeId>(i));
    slowest[i] = op.max_q();
    fastest[i] = op.min_q();
  }
  return critical_path_length<std::int64_t>(problem.dag, slowest) -
         critical_path_length<std::int64_t>(problem.dag, fastest);
}

}  // namespace frontier_internal

// This header's two files only.
using namespace frontier_internal;

// What the builder holds: the crawl's plans as they arrive, and what needs no crawl (the
// plans beyond the crawl's slowest, T_min's relaxed plan, T*'s relaxation and the grid),
// computed by the side refiner, on the second thread when there is one.
struct FrontierBuilder::State {
  struct PendingPlan {
    OptionChoice choice;
    std::int64_t step;
    CrawlStep crawl_step;
  };
  // Steps as the crawl publishes them.
  struct StepBatch {
    std::vector<std::size_t> index;
    std::vector<CrawlStep> steps;
    std::vector<std::size_t> change_begin;  // index.size() + 1 offsets
    std::vector<DurationChange> changes;
    void clear() {
      index.clear();
      steps.clear();
      change_begin.assign(1, 0);
      changes.clear();
    }
    void append(const StepBatch& more) {
      const std::size_t offset = changes.size();
      index.insert(index.end(), more.index.begin(), more.index.end());
      steps.insert(steps.end(), more.steps.begin(), more.steps.end());
      changes.insert(changes.end(), more.changes.begin(), more.changes.end());
      for (std::size_t k = 1; k < more.change_begin.size(); ++k) change_begin.push_back(offset + more.change_begin[k]);
    }
  };

  // The crawl thread's batch, handed to the second thread (appended to what it has not taken
  // yet); `last`: the crawl is done.
  void publish(bool last);

  State(const EnergyProblem& p, FrontierOptions o)
      : problem(p), options(std::move(o)), corners(hull_corners(p)), side(p), relaxation(p), lines(p.p_blocking * p.num_gpus()),
        crawl_lines(p.p_blocking * p.num_gpus()), flow_bound(p), flow_lines(p.p_blocking * p.num_gpus()) {
    const double dag_size = static_cast<double>(problem.dag.num_nodes() + problem.dag.num_edges());
    length = crawl_length(problem);
    search = problem.dag.num_nodes() <= options.local_search_max_nodes;
    const double visits_min = search ? options.search_visits_min : options.refine_visits_min;
    budget = std::max(visits_min / (dag_size + kPassOverheadVisits),
                      options.refine_work_per_crawl_step * static_cast<double>(length));
    lp_work = lp_solve_work(dag_size);
    slowest = slowest_choice(problem);
    fastest = fastest_choice(problem);
    std::vector<std::int64_t> durations(problem.dag.num_nodes());
    for (std::size_t i = 0; i < durations.size(); ++i) durations[i] = problem.options_of(static_cast<Dag::NodeId>(i)).max_q();
    crawl_start = choice_for_durations(problem, durations);
    current = crawl_start;
    threads = options.threads ? options.threads : std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
    published.clear();
    batch.clear();
  }

  // A plan with its slack reclaimed (refining), as a frontier point.
  FrontierPoint point_of(const PlanRefiner& refiner, OptionChoice choice, std::int64_t index = -1,
                         const CrawlStep* step = nullptr) const;

  // A solve on `lp`, its time added to *seconds.
  static std::optional<RelaxedSolution> timed_solve(LpRelaxation& lp, double deadline, double* seconds);
  // A solve on this thread's relaxation; its line joins the bound.
  std::optional<RelaxedSolution> solve_relaxation(double deadline);

  // A bound on the energy of every plan within `from_s` (blocking until then), for a plan of
  // time `to_s` <= from_s: lower by the blocking between the two, which that plan does not
  // count (a later `to_s`, within the time tolerance, leaves it as it is).
  double bound_moved_to(double bound_j, double from_s, double to_s) const {
    return bound_j - problem.p_blocking * problem.num_gpus() * std::max(0.0, from_s - to_s);
  }
  // A plan as a point; its crawl step, if any, from the crawl.
  FrontierPoint point_at(const CrawlResult& crawl, const OptionChoice& plan, std::int64_t step) const;
  // Point i of `points` takes `plan` where it meets the point's time for less effective
  // energy; the point's bound, moved to the new plan's time (less the blocking it no longer
  // counts), still holds there.
  void replace_if_cheaper(const PlanRefiner& refiner, const CrawlResult& crawl, std::vector<FrontierPoint>& points,
                          std::size_t i, const std::optional<OptionChoice>& plan) const;
  // The points slower than point i take its plan, slack reclaimed at their time (in up to
  // `sweeps` sweeps each way, reclaim_slack's default), while that is cheaper, stopping at the
  // first it is not or when the refiner is out of work.
  void carry_to_slower(const PlanRefiner& refiner, const CrawlResult& crawl, std::vector<FrontierPoint>& points,
                       std::size_t i, int sweeps = 8) const;
  // How carry_to_faster steps and stops: it repairs only points at least `min_step_s` faster
  // than the last one repaired, stops at the first repair that fails or saves less than
  // `min_saving` of the point's energy (at 0: that is not cheaper), and, where
  // `repairs_left` is given, once that count of repairs is spent.
  struct FasterCarry {
    double min_step_s = 0.0;
    double min_saving = 0.0;
    int* repairs_left = nullptr;
  };
  // The points faster than point i take its plan repaired down to their time (a minimum-cut
  // speed-up on the measured options, PlanRefiner::repair), each repair from the one before,
  // fastest last, as `how` says, or until the refiner is out of work. The mirror of
  // carry_to_slower: a plan found at one point mends the stretch below it, whose own plans
  // the crawl or a quantised solve left dearer. Returns how many points it made cheaper.
  // Requires `points` by time, fastest first, and i < points.size(). One repair per point it
  // reaches, each O(cuts x (nodes + edges + a warm max flow)), counted as the refiner's work.
  std::size_t carry_to_faster(const PlanRefiner& refiner, const CrawlResult& crawl, std::vector<FrontierPoint>& points,
                              std::size_t i, const FasterCarry& how) const;
  // The best bound known at t: the LP solves' lines and the hull crawl's, whichever is higher.
  std::optional<double> best_bound(double t) const;
  // The bound a point finally carries: best_bound's, or the crawl's flows' lines where higher
  // (kept out of best_bound, which aims the solves and searches: plans do not depend on them).
  std::optional<double> final_bound(double t) const;
  // A point's gap to the best bound at its time (none without a bound).
  std::optional<double> gap_to_bound(const FrontierPoint& point) const;
  // The points more than `gap` above the best bound, fastest first.
  std::vector<std::size_t> points_above(const std::vector<FrontierPoint>& points, double gap) const;
  // The point furthest above the best bound, if more than `gap`, among those `skip` allows.
  std::optional<std::size_t> widest_above(const std::vector<FrontierPoint>& points, double gap,
                                          const std::function<bool(double)>& skip) const;
  // Certification, the frontier's last step (docs/solver.md, "Certified frontier"): every
  // point's bound from the supporting lines of LP solves, more solves where the plans are
  // furthest above it (each offering its rounded plan there, which in the frontier's middle is
  // often cheaper than the crawl's, by up to 1.5% on 8 x 12 pipelines), then the interpolated
  // relaxations, the LP sweep and the local search at the widest gaps, every point
  // inheriting its faster neighbour's plan, slack reclaimed, where that is cheaper, the final
  // polish, the carry down (a slower neighbour's plan repaired to a point's time where that
  // neighbour lies closer to its bound), and last solves for the bound alone where it may lie
  // furthest below the LP optimum (sandwich()). The solves are counted (certify_solves),
  // the rest bounded by shares of the refinement's budget, and with --certify's seconds by
  // those too (lp_deadline).
  // `frontier.points` are the refined points; `refiner` is the builder's own. Without
  // FrontierOptions::certify, only settle().
  void certify(Frontier& frontier, const PlanRefiner& refiner, const CrawlResult& crawl);
  // The certification's solves, sweeps, searches and repairs (all of certify() but settle()).
  void tighten(Frontier& frontier, const PlanRefiner& refiner, const CrawlResult& crawl,
               std::chrono::steady_clock::time_point started);
  // tighten()'s last step: LP solves for the bound alone, where it may lie furthest below the
  // LP optimum (FrontierOptions::certify_sandwich_solves). O(points log lines) a solve.
  void sandwich(Frontier& frontier, const PlanRefiner& refiner);
  // The plans every frontier gets last (the iso-time relaxation's, its local search on small
  // DAGs, the exact MILP's when asked for, those offered from outside) and every point's
  // final bound from the lines proven so far.
  // `started`: when the certification began (certify_seconds counts from then).
  void settle(Frontier& frontier, const PlanRefiner& refiner, std::chrono::steady_clock::time_point started);
  // With FrontierOptions::certify_seconds: where they count from (FrontierBuilder::certify_from;
  // the certification's start without it) and, set as the certification starts, when they end
  // and when its LP side stops. No lp_deadline at the default effort, whose steps are counted,
  // not timed, so that the same input gets the same plans.
  std::optional<std::chrono::steady_clock::time_point> certify_from;
  std::chrono::steady_clock::time_point certify_end;
  std::optional<std::chrono::steady_clock::time_point> lp_deadline;
  bool past_lp_deadline() const { return lp_deadline && std::chrono::steady_clock::now() >= *lp_deadline; }
  // The share of certify_seconds the exact MILP at the widest gaps gets on this DAG
  // (FrontierOptions::certify_exact_share; 0 where it does not run).
  double exact_share() const {
    return options.certify && options.certify_seconds > 0.0 && problem.dag.num_nodes() <= options.certify_exact_max_nodes
               ? std::clamp(options.certify_exact_share, 0.0, 1.0)
               : 0.0;
  }

  // Relaxed durations rounded down to options (no path longer, so it meets `deadline`), slack
  // reclaimed at `deadline`: the sweeps' plans, a few passes, no repair.
  OptionChoice rounded_down_reclaimed(const PlanRefiner& refiner, std::span<const double> durations,
                                      double deadline) const {
    const OptionChoice down = round_down_to_options(problem, durations, 1e-9);
    OptionChoice plan = refiner.reclaim_slack(down, deadline);
    if (options.round_to_hull_corners) {
      if (auto cornered = reclaimed_corners(refiner, durations, down, deadline)) keep_cheaper(refiner, plan, std::move(*cornered));
    }
    return plan;
  }
  // The durations rounded down to hull corners, slack reclaimed at `deadline`
  // (FrontierOptions::round_to_hull_corners); nullopt where that is `rounded_down` itself.
  std::optional<OptionChoice> reclaimed_corners(const PlanRefiner& refiner, std::span<const double> durations,
                                                const OptionChoice& rounded_down, double deadline) const {
    OptionChoice on_corners = round_down_to_corners(problem, corners, durations, 1e-9);
    if (on_corners == rounded_down) return std::nullopt;
    return refiner.reclaim_slack(std::move(on_corners), deadline);
  }
  static void keep_cheaper(const PlanRefiner& refiner, OptionChoice& plan, OptionChoice other) {
    if (refiner.effective_energy(other) < refiner.effective_energy(plan)) plan = std::move(other);
  }
  // Relaxed durations rounded down and up to options, each repaired to `deadline`: the cheaper.
  std::optional<OptionChoice> rounded_plan(const PlanRefiner& refiner, const OptionChoice& rounded_down,
                                           const OptionChoice& rounded_up, double deadline) const;
  std::optional<OptionChoice> rounded_plan(const PlanRefiner& refiner, const RelaxedSolution& relaxed,
                                           double deadline) const;

  // What needs no crawl. Bounded as the old sequence was: the fills within a quarter of the
  // budget, T_min's search within its share of what is left (side_work counts it all).
  void work_beside_crawl();

  // The relaxation crawled on the measured hull: a supporting line at every step, for the
  // final bounds only (the certification's solves go where the LP lines leave the widest
  // gaps: there its rounded plans pay most; aimed by these lines, the medians rose). Then its
  // rounded states as candidate plans, only where the points are not searched (small DAGs
  // get the LP's plan and a local search at each), coarse to fine (every other one, then the
  // rest between, ...) while their repairs stay within a share of the budget, kHullBatch at a
  // time (on hull_helpers, on two threads once the crawl is done). It needs
  // nothing of the frontier's crawl and nothing waits for it, so the first thread free takes
  // it (claim_hull_work): the second after the work that needs no crawl, or the crawl's as
  // soon as its crawl is done. Refiners of its own: the plans do not depend on which thread.
  bool claim_hull_work() { return !hull_claimed.exchange(true); }
  void hull_work();

  // Grid deadline j: the relaxation's line, and its rounded plan as a candidate.
  void solve_grid(std::size_t j);
  // The sweep beside the crawl's deadline j (taken in order, on one warm relaxation, while
  // its counted work lasts; the last adds T*'s durations): its durations and line, kept for
  // certify().
  void solve_crawl_sweep(std::size_t j);
  // Certification's first step: every point further than certify_sweep_gap above its bound
  // offered the sweep's durations either side, interpolated to its time, rounded down and
  // reclaimed (on every thread; the plans do not depend on them).
  void offer_crawl_sweep(Frontier& frontier, const PlanRefiner& refiner, const CrawlResult& crawl);

  // One crawl step: the plan it leads to, if the options changed.
  void consume(std::size_t index, const CrawlStep& step, std::span<const DurationChange> changes);

  // f(refiner, k) for k in [0, count), on `own` and up to `workers` helpers (threads - 1 at
  // most), each on a thread of its own. Their work is added to `own`'s: the total does not
  // depend on the threads.
  template <typename F>
  void for_each_on_threads(const PlanRefiner& own, std::size_t count, std::size_t workers, F&& f) {
    workers = count > 1 ? std::min<std::size_t>(workers, threads - 1) : 0;
    while (helpers.size() < workers) helpers.push_back(std::make_unique<PlanRefiner>(problem));
    std::vector<double> before;
    for (std::size_t t = 0; t < workers; ++t) before.push_back(helpers[t]->work());
    const auto share = [&](const PlanRefiner& r, std::size_t first) {
      for (std::size_t k = first; k < count; k += workers + 1) f(r, k);
    };
    run_tasks(workers + 1, true, [&](std::size_t t) { share(t == 0 ? own : *helpers[t - 1], t); });
    for (std::size_t t = 0; t < workers; ++t) own.add_work(helpers[t]->work() - before[t]);
  }

  // The pending plans reclaimed, on `own` and up to `workers` helpers (a plan's reclaimed
  // slack depends on nothing else, so the result does not depend on the threads).
  void reclaim_pending(const PlanRefiner& own, std::size_t workers);

  // A chunk of the crawl's plans, reclaimed on `refiner`, stored by its index (the order of
  // the candidates does not depend on who reclaimed what).
  // `chunk` was moved out of `chunks` under the lock (the other thread may grow it).
  void reclaim_chunk(const PlanRefiner& refiner, std::size_t c, std::vector<PendingPlan> chunk);

  // The pending plans queued as a chunk for whichever thread takes it first.
  void queue_pending();

  // The second thread: the work beside the crawl, then the steps as they come (queueing
  // their plans in chunks), then chunks to reclaim, then the grid's solves, then the hull
  // crawl unless the first thread, its chunks done, took it first. Every task is
  // done before finish() goes on, whichever thread does it, so the frontier does not depend
  // on timing.
  void run_beside();

  // Relaxation solves (each with its rounded plan) at `count` deadlines taken in order,
  // solved ahead on a helper thread where there is one, else when taken. take(k) waits for
  // the k-th and charges its work to the taker: the same whoever solved it.
  class RelaxationAhead {
   public:
    RelaxationAhead(State& state, std::size_t count, std::function<double(std::size_t)> deadline)
        : state_(state), deadline_(std::move(deadline)), solved_(count) {
      if (state_.threads < 2 || count == 0) return;
      if (!state_.helper_relaxation) state_.helper_relaxation = std::make_unique<LpRelaxation>(state_.problem, state_.relaxation);
      if (state_.helpers.empty()) state_.helpers.push_back(std::make_unique<PlanRefiner>(state_.problem));
      worker_ = std::thread([this] {
        try {
          for (std::size_t k = 0; k < solved_.size(); ++k) {
            {
              std::lock_guard lock(mutex_);
              if (stopped_) break;
            }
            solve(*state_.helper_relaxation, *state_.helpers[0], k);
            {
              std::lock_guard lock(mutex_);
              done_ = k + 1;
            }
            ready_.notify_one();
          }
        } catch (...) {
          std::lock_guard lock(mutex_);
          error_ = std::current_exception();
          stopped_ = true;
          ready_.notify_one();
        }
      });
    }
    RelaxationAhead(const RelaxationAhead&) = delete;
    RelaxationAhead& operator=(const RelaxationAhead&) = delete;
    ~RelaxationAhead() { stop(); }

    // The k-th plan (k: one more than the last taken), its bound in *bound; its work and
    // time charged to `taker` and the state, its line added to the bound.
    std::optional<OptionChoice> take(std::size_t k, const PlanRefiner& taker, std::optional<double>* bound) {
      if (worker_.joinable()) {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [&] { return done_ > k || error_; });
        if (error_) std::rethrow_exception(error_);
      } else {
        solve(state_.relaxation, taker, k);  // its repairs counted on the taker as they run
      }
      Solved& solved = solved_[k];
      taker.add_work((worker_.joinable() ? solved.repair_work : 0.0) + state_.lp_work);
      state_.lp_seconds += solved.seconds;
      if (!solved.relaxed) return std::nullopt;
      state_.lines.add(deadline_(k), *solved.relaxed);
      *bound = solved.relaxed->lower_bound_j;
      return std::move(solved.plan);
    }
    // No more solves ahead (what is taken no more is not needed).
    void stop() {
      {
        std::lock_guard lock(mutex_);
        stopped_ = true;
      }
      if (worker_.joinable()) worker_.join();
    }

   private:
    struct Solved {
      std::optional<RelaxedSolution> relaxed;
      std::optional<OptionChoice> plan;
      double repair_work = 0.0;  // the rounded plans' repairs
      double seconds = 0.0;
    };
    void solve(LpRelaxation& lp, const PlanRefiner& refiner, std::size_t k) {
      Solved& solved = solved_[k];
      const double before = refiner.work();
      solved.relaxed = timed_solve(lp, deadline_(k), &solved.seconds);
      if (solved.relaxed) solved.plan = state_.rounded_plan(refiner, *solved.relaxed, deadline_(k));
      solved.repair_work = refiner.work() - before;
    }

    State& state_;
    std::function<double(std::size_t)> deadline_;
    std::vector<Solved> solved_;
    std::thread worker_;
    std::mutex mutex_;
    std::condition_variable ready_;
    std::size_t done_ = 0;
    bool stopped_ = false;
    std::exception_ptr error_;
  };

  static constexpr std::size_t kChunk = 256;
  static constexpr std::size_t kStepsPerBatch = 64;

  const EnergyProblem& problem;
  const FrontierOptions options;
  const HullCorners corners;  // hull_corners(problem), for the LP's plans rounded to them
  PlanRefiner side;  // the second thread's (or the only one's, without it)
  LpRelaxation relaxation;
  std::unique_ptr<LpRelaxation> helper_relaxation;  // the certification's second solves
  SupportingLines lines;
  SupportingLines crawl_lines;  // the hull crawl's (FrontierOptions::bound_crawl_node_steps)
  std::optional<RelaxationCrawl> hull_crawl;
  std::vector<FrontierPoint> hull_points;  // its rounded states' plans
  // Their repairs: two refiners, a batch of states at a time, and the work of the repairs
  // kept (counted apart from the budget, as finish() adds it).
  std::vector<std::unique_ptr<PlanRefiner>> hull_helpers;
  static constexpr std::size_t kHullBatch = 8;
  double hull_work_counted = 0.0;
  // The frontier crawl's flows as Lagrangian lines (add_flow), for the final bounds only.
  LagrangianBound flow_bound;
  SupportingLines flow_lines;
  std::array<std::vector<double>, 3> flow_prices;  // add_flow's, kept to reuse their memory
  std::atomic<bool> hull_claimed{false};
  std::atomic<bool> crawl_done{false};       // set as finish() starts
  std::int64_t length = 0;  // the crawl's, T* - T_min in units
  double budget = 0.0;
  double lp_work = 0.0;
  bool search = false;
  unsigned threads = 1;
  OptionChoice slowest, fastest, crawl_start, current;

  std::optional<FrontierPoint> slowest_point, start_point;
  std::vector<FrontierPoint> fill_points;
  double t_min = 0.0;
  std::optional<double> t_min_bound;
  std::vector<double> t_min_durations;  // the relaxation's at T_min
  std::optional<FrontierPoint> t_min_point;
  // Iso-time: the all-max plan's time, or T_min where the all-max plan is the fastest; the
  // relaxation there (T_min's own solve in that case) and, where it is slower than T_min,
  // the relaxation's plan, both joined to the frontier after the certification.
  double iso_time = 0.0;
  std::optional<RelaxedSolution> iso_solution;
  std::optional<FrontierPoint> iso_point;
  // FrontierBuilder::offer's points, for the certification's last Pareto filter.
  std::vector<FrontierPoint> offered;
  std::vector<SupportingLine> offered_lines;  // the offered frontier's (Frontier::bound_lines)
  std::optional<double> t_star;
  std::optional<RelaxedSolution> t_star_solution;
  std::vector<double> grid;                            // deadlines solved beside the crawl
  std::vector<std::optional<FrontierPoint>> grid_points;  // their rounded plans
  // The LP swept beside the crawl (FrontierOptions::crawl_sweep_*): its deadlines, fastest
  // first; (deadline, durations) of T_min's solve, each of its solves and T*'s, in order of
  // deadline; its solves' lines; the warm relaxation, made at its first solve.
  std::vector<double> crawl_sweep;
  std::vector<std::pair<double, std::vector<double>>> crawl_sweep_durations;
  std::vector<SupportingLine> crawl_sweep_lines;
  std::unique_ptr<WarmLpRelaxation> crawl_sweep_lp;
  double crawl_sweep_seconds = 0.0;
  double crawl_sweep_budget = 0.0, crawl_sweep_work = 0.0;  // in passes, counted
  double side_work = 0.0;  // the work beside the crawl, after the reclaims in the old order
  double lp_seconds = 0.0;

  std::vector<PendingPlan> pending;
  std::vector<FrontierPoint> crawl_points;  // in crawl order
  std::vector<std::pair<OptionChoice, std::int64_t>> last_plans;  // the fastest few, for T_min
  std::vector<std::unique_ptr<PlanRefiner>> helpers;

  // Between the crawl's thread and the second one.
  bool background = false;
  std::thread beside;
  std::mutex mutex;
  std::condition_variable ready;
  StepBatch published, batch;  // batch: the crawl thread's, not yet published
  bool finished = false, stop = false;
  bool steps_consumed = false;  // the second thread has queued every plan of the crawl
  std::vector<std::vector<PendingPlan>> chunks;       // plans to reclaim, a chunk a task
  std::vector<std::vector<FrontierPoint>> chunk_points;  // reclaimed, per chunk
  std::size_t next_chunk = 0, chunks_done = 0;
  std::exception_ptr error;
};

}  // namespace perseus
