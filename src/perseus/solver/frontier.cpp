#include "perseus/solver/frontier.hpp"

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

namespace perseus {
namespace {

// "%g": a number in an error message, never 309 digits of a huge one.
std::string short_number(double value) {
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
// on 192); a network-simplex solve about this many per node and edge (measured: 1,500 passes
// on 544, 7,900 on 4,408), and rounding its plan (two repairs) about kRoundingPasses more.
// Beside the crawl, the grid's solves take at most kGridShareOfCrawl of it.
constexpr double kCrawlStepPasses = 12.0;
constexpr double kNetworkSimplexPassesPerItem = 2.5;
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
// Work charged for a warm-started solve of the sweep (WarmLpRelaxation): a fixed part and
// one per simplex pivot, calibrated on bloom-176b A100 8 x 12 and 8 x 96 (192 and 1,536
// nodes), where a pivot took about as long as 30-50 passes over the DAG and a solve's fixed
// part 200-500.
constexpr double kWarmSolvePasses = 400.0;
constexpr double kWarmPivotPasses = 50.0;
// Its start from a solved deadline's durations (WarmLpRelaxation::start_from): primal pivots,
// about 7 passes each on 768 nodes.
constexpr double kStartPivotPasses = 10.0;

// The reference's fitted energy of a crawl step: cost + S * time * p_blocking.
double reference_energy(const CrawlStep& step, const EnergyProblem& problem) {
  return step.fitted_cost + problem.num_gpus() * (static_cast<double>(step.time_q) * problem.unit_time) * problem.p_blocking;
}

// A frontier point of a plan; `step` is the crawl step it was derived from (nullptr: none).
FrontierPoint make_point(const EnergyProblem& problem, const OptionChoice& choice, std::int64_t index,
                         const CrawlStep* step) {
  FrontierPoint point;
  point.choice.assign(choice.begin(), choice.end());
  point.measured = evaluate_measured(problem, choice);
  point.effective_energy_j =
      point.measured.energy_j - problem.p_blocking * problem.num_gpus() * point.measured.time_s;
  point.crawl_step = step ? index : -1;
  if (step) {
    point.planned_time_q = step->time_q;
    point.fitted_energy_j = reference_energy(*step, problem);
  }
  return point;
}
FrontierPoint make_point(const EnergyProblem& problem, const OptionChoice& choice) {
  return make_point(problem, choice, -1, nullptr);
}

// Fastest first; a plan is kept only if it uses strictly less effective energy than every
// faster one. At a deadline D a plan of time T costs energy + p_blocking * S * (D - T) =
// effective energy + p_blocking * S * D (its GPUs block until D), so no other plan is
// worth keeping. Ties in time keep the cheaper.
std::vector<FrontierPoint> pareto_filter(std::vector<FrontierPoint> candidates) {
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
void fill_beyond_crawl(const PlanRefiner& refiner, const OptionChoice& crawl_start, const OptionChoice& slowest,
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
double lp_solve_work(double dag_size) {
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
void interpolate_durations(const std::pair<double, std::vector<double>>& below,
                           const std::pair<double, std::vector<double>>& above, double t, std::vector<double>& out) {
  const double w = (t - below.first) / (above.first - below.first);
  out.resize(below.second.size());
  for (std::size_t k = 0; k < out.size(); ++k) out[k] = (1 - w) * below.second[k] + w * above.second[k];
}

// The crawl's length in steps, T* - T_min in units: known before it runs, so that the work
// bounded by it can start beside it. (The crawl takes one step per unit; it can stop a few
// short, when a cut would cross a dependency.)
std::int64_t crawl_length(const EnergyProblem& problem) {
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

}  // namespace

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
  void publish(bool last) {
    {
      std::lock_guard lock(mutex);
      published.append(batch);
      finished = finished || last;
    }
    ready.notify_all();
    batch.clear();
  }

  State(const EnergyProblem& p, FrontierOptions o)
      : problem(p), options(std::move(o)), side(p), relaxation(p), lines(p.p_blocking * p.num_gpus()),
        crawl_lines(p.p_blocking * p.num_gpus()), hull_refiner(p), flow_bound(p), flow_lines(p.p_blocking * p.num_gpus()) {
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
                         const CrawlStep* step = nullptr) const {
    if (options.refine) choice = refiner.reclaim_slack(std::move(choice), refiner.measured_time(choice));
    return make_point(problem, choice, index, step);
  }

  // A solve on `lp`, its time added to *seconds.
  static std::optional<RelaxedSolution> timed_solve(LpRelaxation& lp, double deadline, double* seconds) {
    const auto started = std::chrono::steady_clock::now();
    auto relaxed = lp.solve(deadline);
    *seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return relaxed;
  }
  // A solve on this thread's relaxation; its line joins the bound.
  std::optional<RelaxedSolution> solve_relaxation(double deadline) {
    auto relaxed = timed_solve(relaxation, deadline, &lp_seconds);
    if (relaxed) lines.add(deadline, *relaxed);
    return relaxed;
  }

  // A plan as a point; its crawl step, if any, from the crawl.
  FrontierPoint point_at(const CrawlResult& crawl, const OptionChoice& plan, std::int64_t step) const;
  // Point i of `points` takes `plan` where it meets the point's time for less effective
  // energy; the point's bound still holds at its time.
  void replace_if_cheaper(const PlanRefiner& refiner, const CrawlResult& crawl, std::vector<FrontierPoint>& points,
                          std::size_t i, const std::optional<OptionChoice>& plan) const;
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
  // relaxations, the LP sweep and the local search at the widest gaps, and last every point
  // inheriting its faster neighbour's plan, slack reclaimed, where that is cheaper. The solves
  // are counted (certify_solves), the rest bounded by shares of the refinement's budget.
  // `frontier.points` are the refined points; `refiner` is the builder's own.
  void certify(Frontier& frontier, const PlanRefiner& refiner, const CrawlResult& crawl);

  // Relaxed durations rounded down and up to options, each repaired to `deadline`: the cheaper.
  std::optional<OptionChoice> rounded_plan(const PlanRefiner& refiner, const OptionChoice& rounded_down,
                                           const OptionChoice& rounded_up, double deadline) const {
    auto down = refiner.repair(rounded_down, deadline);
    auto up = refiner.repair(rounded_up, deadline);
    if (!up || (down && refiner.effective_energy(*down) <= refiner.effective_energy(*up))) return down;
    return up;
  }
  std::optional<OptionChoice> rounded_plan(const PlanRefiner& refiner, const RelaxedSolution& relaxed,
                                           double deadline) const {
    return rounded_plan(refiner, relaxed.rounded, relaxed.rounded_up, deadline);
  }

  // What needs no crawl. Bounded as the old sequence was: the fills within a quarter of the
  // budget, T_min's search within its share of what is left (side_work counts it all).
  void work_beside_crawl() {
    slowest_point = point_of(side, slowest);
    start_point = point_of(side, crawl_start);
    if (!options.refine) return;
    const double from = side.work();
    side.set_work_limit(from + 0.25 * budget);
    fill_beyond_crawl(side, crawl_start, slowest, options.fills_beyond_crawl, &fill_points, problem);
    side.set_work_limit(std::numeric_limits<double>::infinity());
    // T_min: the relaxation's plan first (it also gives the lower bound), with a local search
    // on small DAGs; none where the solve costs more than t_min_relaxation_budgets.
    t_min = side.measured_time(fastest);
    const bool solve_t_min = lp_work <= options.t_min_relaxation_budgets * budget;
    const auto relaxed = solve_t_min ? solve_relaxation(t_min) : std::nullopt;
    if (solve_t_min) side.add_work(lp_work);
    if (relaxed) {
      t_min_bound = relaxed->lower_bound_j;
      t_min_durations = relaxed->duration_s;
      if (auto plan = rounded_plan(side, *relaxed, t_min)) {
        const double left = std::max(0.0, budget - (side.work() - from));
        side.set_work_limit(side.work() + kShareAtTMin * left);
        if (search) *plan = side.local_search(std::move(*plan), t_min);
        side.set_work_limit(std::numeric_limits<double>::infinity());
        t_min_point = make_point(problem, *plan);
      }
    }
    // T*'s relaxation, the certification's first solve (large DAGs, whose slowest point is
    // the slowest plan's; small ones search their points first).
    if (!search) {
      t_star = slowest_point->measured.time_s;
      t_star_solution = solve_relaxation(*t_star);
      // The grid solved while the crawl runs, as many as a share of its length pays for (none
      // when that is under two: the crawl would end first).
      const double dag_size = static_cast<double>(problem.dag.num_nodes() + problem.dag.num_edges());
      const double solve_passes = kNetworkSimplexPassesPerItem * dag_size + kRoundingPasses;
      const double solves = std::floor(kGridShareOfCrawl * kCrawlStepPasses * static_cast<double>(length) / solve_passes);
      const int count = solves < 2 ? 0 : static_cast<int>(std::min(solves, static_cast<double>(options.certify_grid_max)));
      for (int j = 1; j <= count; ++j) {
        const double share = std::pow(static_cast<double>(j) / static_cast<double>(count + 1), options.fast_end_power);
        grid.push_back(t_min + (*t_star - t_min) * share);
      }
      grid_points.resize(grid.size());
    }
    side_work = side.work() - from;
  }

  // The relaxation crawled on the measured hull: a supporting line at every step, for the
  // final bounds only (the certification's solves go where the LP lines leave the widest
  // gaps: there its rounded plans pay most; aimed by these lines, the medians rose). Then its
  // rounded states as candidate plans, only where the points are not searched (small DAGs
  // get the LP's plan and a local search at each), coarse to fine (every other one, then the
  // rest between, ...) while their repairs stay within a share of the budget. Nothing else
  // waits for it, so it runs last, on whichever thread is free first (claim_hull_work), with
  // a refiner of its own: the plans do not depend on which thread.
  bool claim_hull_work() { return !hull_claimed.exchange(true); }
  void hull_work() {
    if (!options.refine || options.bound_crawl_node_steps <= 0) return;
    const std::size_t nodes = problem.dag.num_nodes();
    const double steps = std::clamp(options.bound_crawl_node_steps / static_cast<double>(nodes),
                                    static_cast<double>(kBoundCrawlStepsMin), static_cast<double>(kBoundCrawlStepsMax));
    const double states = search || nodes > options.hull_plan_max_nodes || options.hull_plan_node_states <= 0.0
                              ? 0.0
                              : std::clamp(options.hull_plan_node_states / static_cast<double>(nodes), 16.0, 128.0);
    hull_crawl = crawl_relaxation(problem, static_cast<std::size_t>(steps), static_cast<std::size_t>(states),
                                  options.hull_plan_fast_end_power);
    for (const SupportingLine& line : hull_crawl->lines) crawl_lines.add(line);
    if (hull_crawl->rounded.empty()) return;
    const PlanRefiner& refiner = hull_refiner;
    const double limit = options.hull_plan_work_share * budget;
    const std::size_t count = hull_crawl->rounded.size();
    std::vector<char> done(count, 0);
    for (std::size_t stride = std::bit_floor(count); stride >= 1 && refiner.work() < limit; stride /= 2) {
      for (std::size_t j = stride - 1; j < count && refiner.work() < limit; j += stride) {
        if (done[j]) continue;
        done[j] = 1;
        const RoundedState& state = hull_crawl->rounded[j];
        auto down = refiner.repair(state.down, state.time_s);
        auto up = refiner.repair(state.up, state.time_s);
        if (!up || (down && refiner.effective_energy(*down) <= refiner.effective_energy(*up))) up = std::move(down);
        if (up) hull_points.push_back(make_point(problem, *up));
      }
    }
  }

  // Grid deadline j: the relaxation's line, and its rounded plan as a candidate.
  void solve_grid(std::size_t j) {
    if (const auto relaxed = solve_relaxation(grid[j])) {
      if (auto plan = rounded_plan(side, *relaxed, grid[j])) grid_points[j] = make_point(problem, *plan);
    }
  }

  // One crawl step: the plan it leads to, if the options changed.
  void consume(std::size_t index, const CrawlStep& step, std::span<const DurationChange> changes) {
    bool changed = false;
    for (const DurationChange& change : changes) {
      const auto option = static_cast<std::int32_t>(problem.options_of(change.node).option_for_duration(change.duration_q));
      changed |= option != current[change.node];
      current[change.node] = option;
    }
    if (!changed) return;
    pending.push_back({current, static_cast<std::int64_t>(index), step});
    last_plans.emplace_back(current, static_cast<std::int64_t>(index));
    if (last_plans.size() > options.t_min_repairs) last_plans.erase(last_plans.begin());
  }

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
  void reclaim_pending(const PlanRefiner& own, std::size_t workers) {
    std::vector<FrontierPoint> points(pending.size());
    for_each_on_threads(own, pending.size(), workers, [&](const PlanRefiner& r, std::size_t i) {
      points[i] = point_of(r, std::move(pending[i].choice), pending[i].step, &pending[i].crawl_step);
    });
    for (FrontierPoint& point : points) crawl_points.push_back(std::move(point));
    pending.clear();
  }

  // A chunk of the crawl's plans, reclaimed on `refiner`, stored by its index (the order of
  // the candidates does not depend on who reclaimed what).
  // `chunk` was moved out of `chunks` under the lock (the other thread may grow it).
  void reclaim_chunk(const PlanRefiner& refiner, std::size_t c, std::vector<PendingPlan> chunk) {
    std::vector<FrontierPoint> points;
    points.reserve(chunk.size());
    for (PendingPlan& plan : chunk) points.push_back(point_of(refiner, std::move(plan.choice), plan.step, &plan.crawl_step));
    std::lock_guard lock(mutex);
    chunk_points[c] = std::move(points);
    ++chunks_done;
  }

  // The pending plans queued as a chunk for whichever thread takes it first.
  void queue_pending() {
    std::lock_guard lock(mutex);
    chunks.push_back(std::move(pending));
    chunk_points.emplace_back();
    pending.clear();
  }

  // The second thread: the work beside the crawl, then the steps as they come (queueing
  // their plans in chunks), then chunks to reclaim, then the grid's solves, then the hull
  // crawl unless the first thread, its chunks done, took it first. Every task is
  // done before finish() goes on, whichever thread does it, so the frontier does not depend
  // on timing.
  void run_beside() {
    try {
      work_beside_crawl();
      StepBatch taken;
      taken.clear();
      std::size_t grid_next = 0;
      while (true) {
        bool last = false;
        std::optional<std::size_t> chunk;
        std::vector<PendingPlan> chunk_plans;
        {
          std::unique_lock lock(mutex);
          ready.wait(lock, [&] {
            return stop || !published.index.empty() || (finished && !steps_consumed) || next_chunk < chunks.size() ||
                   grid_next < grid.size() || (steps_consumed && next_chunk == chunks.size()) ||
                   (steps_consumed && !hull_claimed);
          });
          if (stop) return;
          std::swap(taken, published);
          last = finished;
          // A chunk is claimed only when there is nothing to queue first.
          if (taken.index.empty() && !(last && !steps_consumed) && next_chunk < chunks.size()) {
            chunk = next_chunk++;
            chunk_plans = std::move(chunks[*chunk]);
          }
        }
        if (!taken.index.empty()) {
          for (std::size_t k = 0; k < taken.index.size(); ++k) {
            consume(taken.index[k], taken.steps[k],
                    {taken.changes.data() + taken.change_begin[k], taken.changes.data() + taken.change_begin[k + 1]});
            if (pending.size() >= kChunk) queue_pending();
          }
          taken.clear();
          ready.notify_all();
          continue;
        }
        if (last && !steps_consumed) {
          if (!pending.empty()) queue_pending();
          {
            std::lock_guard lock(mutex);
            steps_consumed = true;
          }
          ready.notify_all();
          continue;
        }
        if (chunk) {
          reclaim_chunk(side, *chunk, std::move(chunk_plans));
          ready.notify_all();
          continue;
        }
        if (grid_next < grid.size()) {
          solve_grid(grid_next++);
          continue;
        }
        if (steps_consumed && claim_hull_work()) {
          hull_work();
          continue;
        }
        if (steps_consumed) return;  // nothing left to claim: the rest is being reclaimed
      }
    } catch (...) {
      std::lock_guard lock(mutex);
      error = std::current_exception();
      stop = true;
      ready.notify_all();
    }
  }

  // Relaxation solves (each with its rounded plan) at `count` deadlines taken in order,
  // solved ahead on a helper thread where there is one, else when taken. take(k) waits for
  // the k-th and charges its work to the taker: the same whoever solved it.
  class RelaxationAhead {
   public:
    RelaxationAhead(State& state, std::size_t count, std::function<double(std::size_t)> deadline)
        : state_(state), deadline_(std::move(deadline)), solved_(count) {
      if (state_.threads < 2 || count == 0) return;
      if (!state_.helper_relaxation) state_.helper_relaxation = std::make_unique<LpRelaxation>(state_.problem);
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
  PlanRefiner side;  // the second thread's (or the only one's, without it)
  LpRelaxation relaxation;
  std::unique_ptr<LpRelaxation> helper_relaxation;  // the certification's second solves
  SupportingLines lines;
  SupportingLines crawl_lines;  // the hull crawl's (FrontierOptions::bound_crawl_node_steps)
  std::optional<RelaxationCrawl> hull_crawl;
  std::vector<FrontierPoint> hull_points;  // its rounded states' plans
  PlanRefiner hull_refiner;                // theirs (its work is counted apart from the budget)
  // The frontier crawl's flows as Lagrangian lines (add_flow), for the final bounds only.
  LagrangianBound flow_bound;
  SupportingLines flow_lines;
  std::array<std::vector<double>, 3> flow_prices;  // add_flow's, kept to reuse their memory
  std::atomic<bool> hull_claimed{false};
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
  std::optional<double> t_star;
  std::optional<RelaxedSolution> t_star_solution;
  std::vector<double> grid;                            // deadlines solved beside the crawl
  std::vector<std::optional<FrontierPoint>> grid_points;  // their rounded plans
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

// A plan as a point; its crawl step, if any, from the crawl.
FrontierPoint FrontierBuilder::State::point_at(const CrawlResult& crawl, const OptionChoice& plan, std::int64_t step) const {
  return make_point(problem, plan, step, step >= 0 ? &crawl.steps[static_cast<std::size_t>(step)] : nullptr);
}

void FrontierBuilder::State::replace_if_cheaper(const PlanRefiner& refiner, const CrawlResult& crawl,
                                                std::vector<FrontierPoint>& points, std::size_t i,
                                                const std::optional<OptionChoice>& plan) const {
  const double deadline = points[i].measured.time_s;
  if (!plan || refiner.effective_energy(*plan) >= points[i].effective_energy_j - 1e-9 ||
      refiner.measured_time(*plan) > deadline + kTimeEpsilon) {
    return;
  }
  const std::optional<double> bound = points[i].lower_bound_j;
  points[i] = point_at(crawl, *plan, points[i].crawl_step);
  points[i].lower_bound_j = bound;
}

std::optional<double> FrontierBuilder::State::best_bound(double t) const {
  auto bound = lines.energy_at(t);
  if (const auto crawled = crawl_lines.energy_at(t)) bound = std::max(bound.value_or(*crawled), *crawled);
  return bound;
}

std::optional<double> FrontierBuilder::State::final_bound(double t) const {
  auto bound = best_bound(t);
  if (const auto flowed = flow_lines.energy_at(t)) bound = std::max(bound.value_or(*flowed), *flowed);
  return bound;
}

std::optional<double> FrontierBuilder::State::gap_to_bound(const FrontierPoint& point) const {
  const auto bound = best_bound(point.measured.time_s);
  if (!bound) return std::nullopt;
  return point.measured.energy_j / *bound - 1.0;
}

std::vector<std::size_t> FrontierBuilder::State::points_above(const std::vector<FrontierPoint>& points, double gap) const {
  std::vector<std::size_t> above;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (gap_to_bound(points[i]).value_or(0.0) > gap) above.push_back(i);
  }
  return above;
}

std::optional<std::size_t> FrontierBuilder::State::widest_above(const std::vector<FrontierPoint>& points, double gap,
                                                                const std::function<bool(double)>& skip) const {
  std::optional<std::size_t> widest;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (skip(points[i].measured.time_s)) continue;
    if (const auto g = gap_to_bound(points[i]); g && *g > gap) {
      gap = *g;
      widest = i;
    }
  }
  return widest;
}

void FrontierBuilder::State::certify(Frontier& frontier, const PlanRefiner& refiner, const CrawlResult& crawl) {
  State& s = *this;
  const double lp_solve_work = lp_work;
  const auto replace = [&](std::vector<FrontierPoint>& points, std::size_t i, const std::optional<OptionChoice>& plan) {
    replace_if_cheaper(refiner, crawl, points, i, plan);
  };
  const auto started = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  refiner.set_work_limit(std::numeric_limits<double>::infinity());
  std::vector<FrontierPoint>& points = frontier.points;
  std::vector<double> solved_at;  // deadlines solved here
  std::vector<std::pair<double, std::vector<double>>> relaxed_durations;  // (deadline, durations) of every solve
  if (!s.t_min_durations.empty()) relaxed_durations.emplace_back(s.t_min, s.t_min_durations);
  const auto solved = [&](double t) {
    return std::any_of(solved_at.begin(), solved_at.end(), [&](double s) { return std::abs(s - t) <= kTimeEpsilon; });
  };
  // Counted solves: certify_solves, or fewer where an LP solve is a large part of the
  // refinement's budget (on 1,536 nodes one costs about two thirds of it): three there.
  // The grid solved beside the crawl counts for half as many (a solve where the gap is
  // widest is worth about two spread evenly), leaving at least two (T*'s among them).
  const double grid_credit = std::floor(static_cast<double>(s.grid.size()) / 2.0);
  const double counted_solves = std::min<double>(
      std::max(2.0, options.certify_solves - grid_credit),
      std::max(1.0, std::floor(options.certify_work_share * budget / lp_solve_work)));
  // Rounds of two solves, the second on a helper thread with a relaxation of its own: T*'s
  // first (with T_min's, every point then lies between two tangents), then the points
  // furthest above the bound so far without a solve of their own, the second of a round at
  // least a sixteenth of the frontier's span from the first (two neighbours prove about the
  // same). Always pairs, whatever the threads, so the same input gets the same bounds.
  const double span = points.back().measured.time_s - points.front().measured.time_s;
  const auto widest_unsolved = [&](std::optional<double> apart_from) -> std::optional<double> {
    std::optional<double> found;
    double widest = options.certify_target_gap;
    for (const FrontierPoint& point : points) {
      const double t = point.measured.time_s;
      if (solved(t) || (apart_from && std::abs(t - *apart_from) < span / 16.0)) continue;
      const auto bound = lines.energy_at(t);
      const double gap = bound ? point.measured.energy_j / *bound - 1.0 : 1.0;
      if (gap > widest) {
        widest = gap;
        found = t;
      }
    }
    return found;
  };
  std::vector<double> targets{points.back().measured.time_s};
  if (counted_solves >= 2) {
    solved_at.push_back(targets[0]);  // not a second time in this round
    if (const auto second = widest_unsolved(targets[0])) targets.push_back(*second);
    solved_at.pop_back();
  }
  for (int made = 0; !targets.empty();) {
    // The second solve of the round beside this one, on a relaxation and refiner of its own.
    std::optional<RelaxedSolution> first, second;
    std::optional<OptionChoice> first_plan, second_plan;
    double second_seconds = 0.0;
    double helper_work = 0.0;
    if (targets.size() > 1) {
      if (!s.helper_relaxation) s.helper_relaxation = std::make_unique<LpRelaxation>(problem);
      if (s.helpers.empty()) s.helpers.push_back(std::make_unique<PlanRefiner>(problem));
      helper_work = s.helpers[0]->work();
    }
    // T*'s solve was made beside the crawl.
    const bool precomputed = made == 0 && s.t_star && std::abs(*s.t_star - targets[0]) <= kTimeEpsilon;
    run_tasks(targets.size(), s.threads > 1, [&](std::size_t k) {
      if (k == 0) {
        first = precomputed ? s.t_star_solution : s.solve_relaxation(targets[0]);
        if (first) first_plan = rounded_plan(refiner, *first, targets[0]);
      } else {
        second = State::timed_solve(*s.helper_relaxation, targets[1], &second_seconds);
        if (second) second_plan = s.rounded_plan(*s.helpers[0], *second, targets[1]);
      }
    });
    if (targets.size() > 1) {
      s.lp_seconds += second_seconds;
      refiner.add_work(s.helpers[0]->work() - helper_work);
      if (second) lines.add(targets[1], *second);
    }
    // Each solve offers its rounded plan at its point.
    if (first) relaxed_durations.emplace_back(targets[0], first->duration_s);
    if (targets.size() > 1 && second) relaxed_durations.emplace_back(targets[1], second->duration_s);
    for (std::size_t j = 0; j < targets.size(); ++j) {
      solved_at.push_back(targets[j]);
      ++frontier.certify_solves;
      const std::optional<OptionChoice>& plan = j == 0 ? first_plan : second_plan;
      const auto at = std::find_if(points.begin(), points.end(), [&](const FrontierPoint& p) {
        return std::abs(p.measured.time_s - targets[j]) <= kTimeEpsilon;
      });
      if (plan && at != points.end()) replace(points, at - points.begin(), plan);
    }
    made += static_cast<int>(targets.size());
    // The next round: what is left of the counted solves (two at most), then pairs while
    // --certify's seconds last.
    const int left = made < counted_solves ? static_cast<int>(counted_solves) - made
                                           : (elapsed() < options.certify_seconds ? 2 : 0);
    targets.clear();
    if (left == 0) break;
    if (const auto next = widest_unsolved(std::nullopt)) {
      targets.push_back(*next);
      if (left >= 2) {
        if (const auto other = widest_unsolved(*next)) targets.push_back(*other);
      }
    }
  }
  // Then where a point is still more than certify_worst_gap above the best bound known
  // (the hull crawl's lines included: there they lie within hundredths of a percent of the
  // LP optimum), a solve there for its rounded plan, widest first, at most
  // certify_worst_solves (and as many as the counted solves' share of the budget pays for).
  // The inheritance below carries each plan to its slower neighbours, so points up to a 64th
  // of the span slower than one of these deadlines wait for it; faster ones do not. Such
  // points gather where the frontier is steepest, near T_min, where the crawl's quantised
  // plans were 1.0-1.3% above the LP optimum and the LP's rounded plans 0.1-0.3%
  // (docs/solver.md, "Certified frontier").
  // Points up to a 64th of the span slower than one of `deadlines` wait for what the
  // inheritance carries from it.
  const auto waits_for = [&](const std::vector<double>& deadlines, double t) {
    return std::any_of(deadlines.begin(), deadlines.end(), [&](double d) { return t >= d && t - d < span / 64.0; });
  };
  {
    const auto cap = static_cast<int>(std::min<double>(
        options.certify_worst_solves, std::floor(options.certify_work_share * budget / lp_solve_work)));
    std::vector<double> aimed;  // this loop's deadlines
    for (int made = 0; made < cap; ++made) {
      const auto target = widest_above(points, options.certify_worst_gap, [&](double t) {
        return solved(t) || waits_for(aimed, t);
      });
      if (!target) break;
      const double t = points[*target].measured.time_s;
      const auto relaxed = s.solve_relaxation(t);
      solved_at.push_back(t);
      aimed.push_back(t);
      ++frontier.certify_solves;
      if (!relaxed) continue;
      relaxed_durations.emplace_back(t, relaxed->duration_s);
      replace(points, *target, rounded_plan(refiner, *relaxed, t));
    }
    // Points still that far above, between two solved deadlines, widest first while the
    // repairs stay within certify_interpolation_share of the refinement's budget: the two
    // solutions' durations interpolated to the point's time (feasible there, the LP being
    // linear in the deadline; within the LP value's curvature of its optimum), rounded to
    // options and repaired. Near T_min, where the inherited plans stay 0.7-0.8% above the
    // optimum, these come within 0.1-0.3% of it for two repairs, no solve.
    std::sort(relaxed_durations.begin(), relaxed_durations.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::size_t> far;
    if (options.certify_interpolation_share > 0) far = points_above(points, options.certify_worst_gap);
    std::vector<double> gaps(points.size());
    for (const std::size_t i : far) gaps[i] = *gap_to_bound(points[i]);
    std::stable_sort(far.begin(), far.end(), [&](std::size_t a, std::size_t b) { return gaps[a] > gaps[b]; });
    const double work_limit = refiner.work() + options.certify_interpolation_share * budget;
    std::vector<double> between;
    for (const std::size_t i : far) {
      if (refiner.work() >= work_limit) break;
      const double t = points[i].measured.time_s;
      const auto above = std::lower_bound(relaxed_durations.begin(), relaxed_durations.end(), t,
                                          [](const auto& a, double x) { return a.first < x; });
      if (above == relaxed_durations.begin() || above == relaxed_durations.end()) continue;
      interpolate_durations(*(above - 1), *above, t, between);
      const RoundedChoice rounded = round_to_options(problem, between, 1e-9);
      replace(points, i, rounded_plan(refiner, rounded.down, rounded.up, t));
    }
  }
  // Last, the LP swept over the points still more than certify_sweep_gap above the best
  // bound, fastest first, warm-started: near T_min, where those crowd, the frontier's plans
  // stayed 0.4-0.8% above the LP optimum, and its rounded-down plans at each point,
  // reclaimed, 0.15-0.3% (bloom-176b A100 8 x 12, a probe). The points between two solves
  // get their durations interpolated (feasible, within the LP's curvature of optimal). In
  // two halves, each on a relaxation and refiner of its own, within half the share: beside
  // each other where there are two threads, one after the other otherwise, the same plans.
  if (options.certify_sweep_share > 0 && problem.dag.num_nodes() <= options.certify_sweep_max_nodes) {
    const std::vector<std::size_t> far = points_above(points, options.certify_sweep_gap);
    struct Half {
      std::span<const std::size_t> far;  // its points, fastest first
      std::vector<std::pair<std::size_t, OptionChoice>> plans;  // (point, plan) offered
      std::vector<SupportingLine> lines;
      std::size_t solves = 0;
      double lp_seconds = 0.0;
    };
    const std::size_t middle = far.size() / 2;
    std::array<Half, 2> halves;
    halves[0].far = std::span<const std::size_t>(far).first(middle);
    halves[1].far = std::span<const std::size_t>(far).subspan(middle);
    const std::size_t stride = static_cast<std::size_t>(std::max(1, options.certify_sweep_stride));
    const double half_share = 0.5 * options.certify_sweep_share * budget;
    const auto sweep = [&](Half& half, WarmLpRelaxation& relaxation, const PlanRefiner& r) {
      const double work_limit = r.work() + half_share;
      // From the solved deadline nearest its first point (a quarter of a start from nothing).
      if (!half.far.empty() && !relaxed_durations.empty()) {
        const double first_t = points[half.far.front()].measured.time_s;
        const auto nearest = std::min_element(relaxed_durations.begin(), relaxed_durations.end(), [&](const auto& a, const auto& b) {
          return std::abs(a.first - first_t) < std::abs(b.first - first_t);
        });
        relaxation.start_from(nearest->first, nearest->second);
        r.add_work(kWarmSolvePasses + kStartPivotPasses * relaxation.last_iterations());
      }
      const auto offer = [&](std::size_t i, const std::vector<double>& durations) {
        half.plans.emplace_back(i, r.reclaim_slack(round_to_options(problem, durations, 1e-9).down, points[i].measured.time_s));
      };
      std::optional<std::pair<double, std::vector<double>>> previous;  // the last solve's deadline and durations
      std::size_t previous_at = 0;
      std::vector<double> between;
      for (std::size_t a = 0; a < half.far.size() && r.work() < work_limit;) {
        const std::size_t i = half.far[a];
        const double t = points[i].measured.time_s;
        SupportingLine line;
        const auto solve_started = std::chrono::steady_clock::now();
        auto relaxed = relaxation.solve(t, &line);
        half.lp_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - solve_started).count();
        r.add_work(kWarmSolvePasses + kWarmPivotPasses * relaxation.last_iterations());
        ++half.solves;
        if (relaxed) {
          half.lines.push_back(line);
          offer(i, relaxed->duration_s);
          std::pair<double, std::vector<double>> solved_here(t, std::move(relaxed->duration_s));
          for (std::size_t b = previous ? previous_at + 1 : a; b < a; ++b) {
            interpolate_durations(*previous, solved_here, points[half.far[b]].measured.time_s, between);
            offer(half.far[b], between);
          }
          previous = std::move(solved_here);
          previous_at = a;
        }
        if (a + 1 == half.far.size()) break;
        a = std::min(a + stride, half.far.size() - 1);
      }
    };
    if (!far.empty()) {
      if (s.helpers.empty()) s.helpers.push_back(std::make_unique<PlanRefiner>(problem));
      const double helper_work = s.helpers[0]->work();
      WarmLpRelaxation first(problem), second(problem);  // CLP loads here, before any thread starts
      run_tasks(2, s.threads > 1, [&](std::size_t k) {
        if (k == 0) sweep(halves[0], first, refiner);
        else sweep(halves[1], second, *s.helpers[0]);
      });
      refiner.add_work(s.helpers[0]->work() - helper_work);
      for (Half& half : halves) {
        for (const SupportingLine& line : half.lines) lines.add(line);
        for (auto& [i, plan] : half.plans) replace(points, i, std::move(plan));
        frontier.certify_sweep_solves += half.solves;
        s.lp_seconds += half.lp_seconds;
      }
    }
  }
  // Then a round of local search at the points still furthest above their bound, where the
  // LP's rounding does not help (the moves screened by the LP's prices there), the widest
  // first; the inheritance below carries each to its slower neighbours, so points up to a
  // 64th of the span slower than a searched one wait for it.
  if (problem.dag.num_nodes() <= options.certify_search_max_nodes) {
    const double search_limit = refiner.work() + options.certify_search_share * budget;
    refiner.set_work_limit(search_limit);
    std::vector<double> searched;
    for (int made = 0; made < options.certify_search_points && !refiner.out_of_work(); ++made) {
      const auto target =
          widest_above(points, options.certify_worst_gap, [&](double t) { return waits_for(searched, t); });
      if (!target) break;
      const double t = points[*target].measured.time_s;
      searched.push_back(t);
      const auto relaxed = s.solve_relaxation(t);
      refiner.add_work(lp_solve_work);
      if (!relaxed) continue;
      replace(points, *target,
              refiner.local_search(points[*target].option_choice(), t, 1, PlanRefiner::Moves::kAll,
                                   &relaxed->price_j_per_s));
      ++frontier.certify_searches;
    }
    refiner.set_work_limit(std::numeric_limits<double>::infinity());
  }
  // Slower points inherit what improved, slack reclaimed: one pass, fastest first. A
  // chunk at a time, each point's candidate from its faster neighbour as the chunk starts
  // is worked out on every thread; where that neighbour has just been replaced, its new
  // plan is reclaimed instead. The same as the sequential pass.
  constexpr std::size_t kInheritChunk = 256;
  constexpr int kInheritSweeps = 1;
  std::vector<OptionChoice> inherited;
  for (std::size_t from = 1; from < points.size(); from += kInheritChunk) {
    const std::size_t to = std::min(points.size(), from + kInheritChunk);
    inherited.assign(to - from, {});
    s.for_each_on_threads(refiner, to - from, s.threads - 1, [&](const PlanRefiner& r, std::size_t k) {
      inherited[k] = r.reclaim_slack(points[from + k - 1].option_choice(), points[from + k].measured.time_s, kInheritSweeps);
    });
    bool replaced = false;  // the previous point, in this chunk
    for (std::size_t i = from; i < to; ++i) {
      const double before = points[i].effective_energy_j;
      replace(points, i,
              replaced ? refiner.reclaim_slack(points[i - 1].option_choice(), points[i].measured.time_s, kInheritSweeps)
                       : std::move(inherited[i - from]));
      replaced = points[i].effective_energy_j != before;
    }
  }
  points = pareto_filter(std::move(points));
  for (FrontierPoint& point : points) {
    // A plan's own energy caps its bound: where the bound is tight, rounding in the sum of
    // lines (thousands of joules, cancelling) can leave it a hair above.
    auto bound = final_bound(point.measured.time_s);
    if (bound) bound = std::min(*bound, point.measured.energy_j);
    if (bound && (!point.lower_bound_j || *bound > *point.lower_bound_j)) point.lower_bound_j = bound;
  }
  // T_min's bound, where its relaxation was not solved (t_min_relaxation_budgets): the best
  // line's there, mostly the crawl's flows'.
  if (!frontier.t_min_lower_bound_j && !points.empty() && points.front().measured.time_s <= t_min + kTimeEpsilon) {
    frontier.t_min_lower_bound_j = points.front().lower_bound_j;
  }
  frontier.certify_seconds = elapsed();
}

FrontierBuilder::FrontierBuilder(const EnergyProblem& problem, const FrontierOptions& options, bool beside_crawl)
    : state_(std::make_unique<State>(problem, options)) {
  State& s = *state_;
  s.background = beside_crawl && s.threads > 1;
  if (s.background) s.beside = std::thread([&s] { s.run_beside(); });
}

FrontierBuilder::~FrontierBuilder() {
  State& s = *state_;
  if (s.beside.joinable()) {
    {
      std::lock_guard lock(s.mutex);
      s.stop = true;
    }
    s.ready.notify_all();
    s.beside.join();
  }
}

void FrontierBuilder::add_step(std::size_t index, const CrawlStep& step, std::span<const DurationChange> changes) {
  State& s = *state_;
  if (!s.background) {
    s.consume(index, step, changes);
    if (s.pending.size() >= State::kChunk) s.reclaim_pending(s.side, s.threads - 1);
    return;
  }
  s.batch.index.push_back(index);
  s.batch.steps.push_back(step);
  s.batch.changes.insert(s.batch.changes.end(), changes.begin(), changes.end());
  s.batch.change_begin.push_back(s.batch.changes.size());
  if (s.batch.index.size() >= State::kStepsPerBatch) s.publish(false);
}

std::size_t FrontierBuilder::flow_every() const {
  return std::max<std::int64_t>(1, state_->length / static_cast<std::int64_t>(kFlowLines));
}

void FrontierBuilder::add_flow(const CrawlFlow& flow) {
  State& s = *state_;
  if (flow.through_unbounded_arcs()) return;  // its line is noise (CrawlFlow)
  // The flows are in cost per time unit; the bound takes J/s.
  const double per_second = 1.0 / s.problem.unit_time;
  const auto priced = [&](std::span<const double> flows, std::vector<double>& prices) -> std::span<const double> {
    prices.resize(flows.size());
    std::transform(flows.begin(), flows.end(), prices.begin(), [&](double f) { return f * per_second; });
    return prices;
  };
  s.flow_lines.add(s.flow_bound.line(priced(flow.dependencies, s.flow_prices[0]), priced(flow.starts, s.flow_prices[1]),
                                     priced(flow.ends, s.flow_prices[2])));
}

Frontier FrontierBuilder::finish(const CrawlResult& crawl) {
  State& s = *state_;
  const EnergyProblem& problem = s.problem;
  const FrontierOptions& options = s.options;
  if (s.background) s.publish(true);
  Frontier frontier;
  frontier.all_max = evaluate_highest_clock(problem);
  const PlanRefiner refiner(problem);
  if (s.background) {
    // This thread, its crawl done, takes chunks too until every one is reclaimed.
    bool stopped = false;
    while (true) {
      std::size_t chunk = 0;
      std::vector<State::PendingPlan> plans;
      {
        std::unique_lock lock(s.mutex);
        s.ready.wait(lock, [&] {
          return s.stop || s.next_chunk < s.chunks.size() || (s.steps_consumed && s.chunks_done == s.chunks.size());
        });
        if (s.stop || s.next_chunk == s.chunks.size()) {
          stopped = s.stop;
          break;
        }
        chunk = s.next_chunk++;
        plans = std::move(s.chunks[chunk]);
      }
      s.reclaim_chunk(refiner, chunk, std::move(plans));
      s.ready.notify_all();
    }
    if (!stopped && s.claim_hull_work()) {
      try {
        s.hull_work();
      } catch (...) {
        {
          std::lock_guard lock(s.mutex);
          s.stop = true;
        }
        s.ready.notify_all();
        s.beside.join();
        throw;
      }
    }
    s.beside.join();
    if (s.error) std::rethrow_exception(s.error);
    for (std::vector<FrontierPoint>& points : s.chunk_points) {
      for (FrontierPoint& point : points) s.crawl_points.push_back(std::move(point));
    }
  } else {
    s.work_beside_crawl();
    for (std::size_t j = 0; j < s.grid.size(); ++j) s.solve_grid(j);
    s.hull_work();
  }
  const std::size_t total = crawl.steps.size() + 2;
  std::size_t done = total;
  if (options.progress) options.progress(done, total);
  s.reclaim_pending(refiner, s.threads - 1);

  // Candidates in the order the sequential build made them: the slowest plan, the crawl's
  // start, the crawl's plans, the fastest plan, then what refining adds.
  std::vector<FrontierPoint> candidates;
  candidates.reserve(s.crawl_points.size() + s.fill_points.size() + 4);
  candidates.push_back(std::move(*s.slowest_point));
  candidates.push_back(std::move(*s.start_point));
  for (FrontierPoint& point : s.crawl_points) candidates.push_back(std::move(point));
  candidates.push_back(s.point_of(refiner, s.fastest));
  frontier.candidates = candidates.size();
  frontier.lp_seconds = s.lp_seconds;

  if (!options.refine) {
    frontier.points = pareto_filter(std::move(candidates));
    return frontier;
  }
  // What follows is bounded in work (refine_visits_min, refine_work_per_crawl_step): a
  // quarter for the plans beyond the crawl's slowest, then T_min (both done beside the
  // crawl: side_work), then the local search of small DAGs.
  // The reclaims (the helpers' counted where they ran) and the hull crawl's repairs.
  refiner.add_work(s.side.work() - s.side_work + s.hull_refiner.work());
  const double budget = s.budget;
  const double bounded_from = refiner.work();
  refiner.add_work(s.side_work);
  const double limit = bounded_from + budget;
  frontier.refine_budget = budget;
  const auto account = [&] {
    frontier.refine_work = refiner.work() - bounded_from;
    frontier.lp_seconds = s.lp_seconds;
  };
  refiner.set_work_limit(limit);
  for (FrontierPoint& point : s.fill_points) candidates.push_back(std::move(point));
  const bool search = s.search;
  const double lp_solve_work = s.lp_work;
  const auto rounded_plan = [&](const RelaxedSolution& relaxed, double deadline) {
    return s.rounded_plan(refiner, relaxed, deadline);
  };
  // The relaxation's plan at `deadline`, rounded to options and made to meet it.
  const auto relaxed_plan = [&](double deadline, std::optional<double>* bound) -> std::optional<OptionChoice> {
    const auto relaxed = s.solve_relaxation(deadline);
    refiner.add_work(lp_solve_work);
    if (!relaxed) return std::nullopt;
    *bound = relaxed->lower_bound_j;
    return rounded_plan(*relaxed, deadline);
  };
  // A plan as a point; its crawl step, if any, from the crawl.
  const auto point_at = [&](const OptionChoice& plan, std::int64_t step) { return s.point_at(crawl, plan, step); };

  // T_min: the crawl's fastest plans take longer than the all-max plan on the measured data
  // (quantisation hides up to a unit per operation); repaired to the all-max time they, and
  // the relaxation's plan there (found beside the crawl, with the lower bound), are much
  // cheaper than the all-max plan with its slack reclaimed. The crawl's plans, the fastest
  // first, while a third of the work left lasts.
  const double t_min = s.t_min;
  frontier.t_min_lower_bound_j = s.t_min_bound;
  frontier.t_min_relaxation_solved = s.t_min_bound.has_value();
  if (s.t_min_point) candidates.push_back(std::move(*s.t_min_point));
  for (std::optional<FrontierPoint>& point : s.grid_points) {
    if (point) candidates.push_back(std::move(*point));
  }
  frontier.hull_crawl_steps = s.hull_crawl ? s.hull_crawl->steps : 0;
  frontier.hull_crawl_plans = s.hull_points.size();
  for (FrontierPoint& point : s.hull_points) candidates.push_back(std::move(point));
  const double repairs_limit = refiner.work() + std::max(0.0, limit - refiner.work()) / 3.0;
  for (auto it = s.last_plans.rbegin(); it != s.last_plans.rend() && refiner.work() < repairs_limit; ++it) {
    if (auto repaired = refiner.repair(std::move(it->first), t_min)) candidates.push_back(point_at(*repaired, it->second));
  }
  frontier.candidates = candidates.size();
  frontier.points = pareto_filter(std::move(candidates));
  if (frontier.t_min_lower_bound_j && frontier.points.front().measured.time_s <= t_min + kTimeEpsilon) {
    frontier.points.front().lower_bound_j = frontier.t_min_lower_bound_j;
  }
  // Point i of `points` takes `plan` where it meets the point's time for less effective
  // energy; the point's bound still holds at its time.
  const auto replace_if_cheaper = [&](std::vector<FrontierPoint>& points, std::size_t i,
                                      const std::optional<OptionChoice>& plan) {
    s.replace_if_cheaper(refiner, crawl, points, i, plan);
  };
  const auto certify = [&] { s.certify(frontier, refiner, crawl); };
  if (!search) {
    certify();
    account();
    return frontier;
  }

  // Small DAGs: every point, the fastest first, takes the cheapest of its own plan, the
  // previous point's improved plan (which meets this point's time too, so improvements carry
  // over to slower points) and the relaxation's plan at its time. Where two neighbours
  // differ by more than `max_energy_step` of energy, deadlines in between get plans of their
  // own, so that a deadline between two points loses little.
  std::vector<FrontierPoint> improved;
  OptionChoice previous;
  // Local-search rounds: T_min, the plan most users run, gets more; the loosest points fewer.
  constexpr int kRoundsAtTMin = 8;
  constexpr int kRoundsPerPoint = 2;
  constexpr int kRoundsForward = 2;  // speed-ups and exchanges only
  // The forward pass's share of the search's work: every point searched, the chain that
  // carries improvements to slower points (on 64 nodes it needs about 60% of the budget).
  constexpr double kForwardShare = 0.6;
  constexpr int kRoundsPerFill = 0;
  // The loose points' share of what the forward and backward passes leave (the gap fills
  // take the rest).
  constexpr double kLooseShare = 0.5;
  const auto improve_at = [&](double deadline, const OptionChoice& own, std::int64_t step,
                              const FrontierPoint* slower, int rounds, PlanRefiner::Moves moves,
                              const std::function<std::optional<OptionChoice>(std::optional<double>*)>& relaxation) {
    OptionChoice start = own;
    double start_cost = own.empty() ? std::numeric_limits<double>::infinity() : refiner.effective_energy(own);
    const auto consider = [&](std::optional<OptionChoice> plan) {
      if (!plan) return;
      const double cost = refiner.effective_energy(*plan);
      if (cost < start_cost && refiner.measured_time(*plan) <= deadline + kTimeEpsilon) {
        start = std::move(*plan);
        start_cost = cost;
      }
    };
    if (!previous.empty()) consider(refiner.reclaim_slack(previous, deadline));
    if (slower) consider(refiner.repair(slower->option_choice(), deadline));
    std::optional<double> bound;
    if (relaxation) consider(relaxation(&bound));
    if (start.empty()) return;
    previous = refiner.local_search(std::move(start), deadline, rounds, moves);
    improved.push_back(point_at(previous, step));
    if (bound) {
      // The bound holds for every plan within `deadline`, so also, with less blocking, at
      // the improved plan's own (possibly shorter) time.
      const double earlier = deadline - improved.back().measured.time_s;
      improved.back().lower_bound_j = *bound - problem.p_blocking * problem.num_gpus() * earlier;
    }
  };
  // At most local_search_max_points points (evenly spread, T_min and T* among them) get the
  // relaxation's plan; the others start from their neighbour's, reclaimed. Every point gets
  // kRoundsForward rounds of the cheap moves, from the best of those starts. The work left is
  // shared: 60% to this forward pass (T_min's local search takes kShareAtTMin of it), a
  // seventh of the rest to the backward pass, half of the rest to local searches where the
  // plans are furthest from their LP bound, the rest to the gap fills. Once the forward
  // share is spent, a point still takes the cheaper of its LP plan and its faster
  // neighbour's, reclaimed, unsearched.
  const std::size_t count = frontier.points.size();
  const std::size_t stride = (count + options.local_search_max_points - 1) /
                             std::max<std::size_t>(1, options.local_search_max_points);
  const auto share_of_rest = [&](double share) {
    refiner.set_work_limit(refiner.work() + share * std::max(0.0, limit - refiner.work()));
  };
  const double forward_limit = refiner.work() + kForwardShare * std::max(0.0, limit - refiner.work());
  // The relaxation at the forward pass's points, solved ahead of the pass on a second thread
  // where there is one (it takes about half the pass's time on small DAGs). A solve and its
  // rounded plan depend on nothing but the point's time, and each is counted as work when the
  // pass takes it, so the frontier is the same on any number of threads.
  std::vector<std::size_t> relaxed_points;
  for (std::size_t i = 0; i < count; ++i) {
    if (i % stride == 0 || i + 1 == count) relaxed_points.push_back(i);
  }
  State::RelaxationAhead ahead(s, relaxed_points.size(), [&](std::size_t k) { return frontier.points[relaxed_points[k]].measured.time_s; });
  std::size_t next_ahead = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const FrontierPoint& point = frontier.points[i];
    if (i == 0) refiner.set_work_limit(refiner.work() + kShareAtTMin * std::max(0.0, forward_limit - refiner.work()));
    // Every such point takes its LP plan, the budget spent or not (their number is bounded by
    // local_search_max_points): a point past the budget still starts from it.
    const bool relaxed = next_ahead < relaxed_points.size() && relaxed_points[next_ahead] == i;
    const auto take = [&](std::optional<double>* bound) {
      return ahead.take(next_ahead++, refiner, bound);
    };
    improve_at(point.measured.time_s, point.option_choice(), point.crawl_step, nullptr,
               i == 0 ? kRoundsAtTMin : kRoundsForward, i == 0 ? PlanRefiner::Moves::kAll : PlanRefiner::Moves::kExchanges,
               relaxed ? std::function<std::optional<OptionChoice>(std::optional<double>*)>(take) : nullptr);
    if (i == 0) refiner.set_work_limit(forward_limit);
    if (options.progress) options.progress(done, total);
  }
  ahead.stop();
  share_of_rest(1.0 / 7.0);
  std::vector<FrontierPoint> points = pareto_filter(std::move(improved));
  // Backward, slowest first: each point also tries its slower neighbour's plan repaired
  // down to its time (a minimum-cut speed-up on the measured options). The forward pass
  // carries what faster plans found to slower points; this carries the structure of slower
  // plans, which single moves rarely reach, to faster ones.
  for (std::size_t i = points.size() - 1; i-- > 0 && !refiner.out_of_work();) {
    auto repaired = refiner.repair(points[i + 1].option_choice(), points[i].measured.time_s);
    replace_if_cheaper(points, i, repaired);
  }
  // Local search where it can gain most: the points furthest above their LP bound first
  // (the steep stretch above T_min, where the relaxation's integrality gap is widest and the
  // forward pass's cheap moves stall). Each such point gets the relaxation solved at its time
  // and two rounds of every move from three starts: its own plan and the relaxation's plan
  // rounded down and up, each repaired (a start that is dearer at first often ends cheaper);
  // the slow-and-repair moves only where the relaxation's prices say they pay. What it finds
  // goes to its neighbours: slower ones take it with their slack reclaimed, faster ones
  // repaired down to their time, as long as that is cheaper.
  share_of_rest(kLooseShare);
  std::vector<std::pair<double, std::size_t>> loose;  // (gap to the bound, point)
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (points[i].lower_bound_j) loose.emplace_back(points[i].measured.energy_j / *points[i].lower_bound_j, i);
  }
  std::stable_sort(loose.begin(), loose.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [gap, i] : loose) {
    if (refiner.out_of_work() || gap < 1.0 + options.certify_target_gap) break;
    const double deadline = points[i].measured.time_s;
    const auto relaxed = s.solve_relaxation(deadline);
    refiner.add_work(lp_solve_work);
    if (!relaxed) continue;
    std::vector<OptionChoice> starts{points[i].option_choice()};
    for (const OptionChoice* rounded : {&relaxed->rounded, &relaxed->rounded_up}) {
      if (auto repaired = refiner.repair(*rounded, deadline)) starts.push_back(std::move(*repaired));
    }
    const double before = points[i].effective_energy_j;
    for (OptionChoice& start : starts) {
      replace_if_cheaper(points, i,
                         refiner.local_search(std::move(start), deadline, kRoundsPerPoint, PlanRefiner::Moves::kAll,
                                              &relaxed->price_j_per_s));
    }
    if (points[i].effective_energy_j >= before) continue;
    const OptionChoice found = points[i].option_choice();
    for (std::size_t j = i + 1; j < points.size() && !refiner.out_of_work(); ++j) {
      const double was = points[j].effective_energy_j;
      replace_if_cheaper(points, j, refiner.reclaim_slack(found, points[j].measured.time_s));
      if (points[j].effective_energy_j >= was) break;
    }
    for (std::size_t j = i; j-- > 0 && !refiner.out_of_work();) {
      const double was = points[j].effective_energy_j;
      replace_if_cheaper(points, j, refiner.repair(found, points[j].measured.time_s));
      if (points[j].effective_energy_j >= was) break;
    }
  }
  points = pareto_filter(std::move(points));
  refiner.set_work_limit(limit);
  // Gap fills, the widest gaps (in energy) first, so that what the budget leaves unfilled
  // are the gaps a deadline loses least in.
  improved = points;
  std::vector<std::pair<double, std::size_t>> gaps;  // (energy drop in steps, faster point)
  for (std::size_t i = 0; i + 1 < points.size(); ++i) {
    const double step_j = options.max_energy_step * points[i + 1].measured.energy_j;
    const double steps = step_j > 0 ? (points[i].effective_energy_j - points[i + 1].effective_energy_j) / step_j : 0;
    if (steps >= 1.0) gaps.emplace_back(steps, i);
  }
  std::stable_sort(gaps.begin(), gaps.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [steps, i] : gaps) {
    if (refiner.out_of_work()) break;
    previous = points[i].option_choice();
    const FrontierPoint& next = points[i + 1];
    const int fills = std::min(options.max_fills_per_gap, static_cast<int>(steps));
    for (int f = 1; f <= fills; ++f) {
      const double from = points[i].measured.time_s;
      const double deadline = from + (next.measured.time_s - from) * f / (fills + 1);
      improve_at(deadline, {}, next.crawl_step, &next, kRoundsPerFill, PlanRefiner::Moves::kAll,
                 [&](std::optional<double>* bound) { return relaxed_plan(deadline, bound); });
    }
  }
  frontier.points = pareto_filter(std::move(improved));
  certify();
  account();
  return frontier;
}

Frontier build_frontier(const EnergyProblem& problem, const CrawlResult& crawl, const FrontierOptions& options) {
  FrontierBuilder builder(problem, options, false);
  for (std::size_t k = 0; k < crawl.steps.size(); ++k) {
    builder.add_step(k, crawl.steps[k],
                     {crawl.changes.data() + crawl.change_begin[k], crawl.changes.data() + crawl.change_begin[k + 1]});
  }
  return builder.finish(crawl);
}

Certificate certificate(const Frontier& frontier) {
  std::vector<double> gaps;
  for (const FrontierPoint& point : frontier.points) {
    if (point.lower_bound_j) gaps.push_back(point.measured.energy_j / *point.lower_bound_j - 1.0);
  }
  Certificate c;
  c.bounded_points = gaps.size();
  if (gaps.empty()) return c;
  std::sort(gaps.begin(), gaps.end());
  c.median_gap = gaps[gaps.size() / 2];
  c.worst_gap = gaps.back();
  return c;
}

const FrontierPoint& Frontier::least_energy_point() const {
  return *std::min_element(points.begin(), points.end(), [](const FrontierPoint& a, const FrontierPoint& b) {
    return a.measured.energy_j < b.measured.energy_j;
  });
}

std::optional<std::size_t> select_for_deadline(const std::vector<double>& times_fastest_first,
                                               double deadline_s) {
  if (!(deadline_s > 0.0)) {  // NaN too
    throw InputError("a deadline must be a positive number of seconds, got " + short_number(deadline_s));
  }
  if (times_fastest_first.empty()) return std::nullopt;
  const double target = std::min(times_fastest_first.back(), deadline_s) + kTimeEpsilon;
  const auto after = std::upper_bound(times_fastest_first.begin(), times_fastest_first.end(), target);
  if (after == times_fastest_first.begin()) return std::nullopt;
  return static_cast<std::size_t>(after - times_fastest_first.begin()) - 1;
}

const FrontierPoint* select_for_deadline(const Frontier& frontier, double deadline_s) {
  std::vector<double> times;
  times.reserve(frontier.points.size());
  for (const FrontierPoint& point : frontier.points) times.push_back(point.measured.time_s);
  const auto index = select_for_deadline(times, deadline_s);
  return index ? &frontier.points[*index] : nullptr;
}

double energy_at(const EnergyProblem& problem, const FrontierPoint& point, double iteration_s) {
  if (!(iteration_s >= 0.0) || !std::isfinite(iteration_s)) {
    throw InputError("an iteration time must be a finite number of seconds >= 0, got " + short_number(iteration_s));
  }
  const double wait = std::max(0.0, iteration_s - point.measured.time_s);
  return point.measured.energy_j + problem.p_blocking * problem.num_gpus() * wait;
}

}  // namespace perseus
