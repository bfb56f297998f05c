#include "perseus/solver/frontier.hpp"

#include "perseus/solver/frontier_state.hpp"

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
// Helpers and the builder's state: frontier_state.hpp (shared with certification.cpp).

void FrontierBuilder::State::publish(bool last) {
  {
    std::lock_guard lock(mutex);
    published.append(batch);
    finished = finished || last;
  }
  ready.notify_all();
  batch.clear();
}

FrontierPoint FrontierBuilder::State::point_of(const PlanRefiner& refiner, OptionChoice choice, std::int64_t index,
                       const CrawlStep* step) const {
  double time_s = std::numeric_limits<double>::quiet_NaN();
  if (options.refine) choice = refiner.reclaim_slack_at_own_time(std::move(choice), &time_s);
  return make_point(problem, choice, index, step, time_s);
}

std::optional<RelaxedSolution> FrontierBuilder::State::timed_solve(LpRelaxation& lp, double deadline, double* seconds) {
  const auto started = std::chrono::steady_clock::now();
  auto relaxed = lp.solve(deadline);
  *seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return relaxed;
}

std::optional<RelaxedSolution> FrontierBuilder::State::solve_relaxation(double deadline) {
  auto relaxed = timed_solve(relaxation, deadline, &lp_seconds);
  if (relaxed) lines.add(deadline, *relaxed);
  return relaxed;
}

std::optional<OptionChoice> FrontierBuilder::State::rounded_plan(const PlanRefiner& refiner, const OptionChoice& rounded_down,
                                         const OptionChoice& rounded_up, double deadline) const {
  auto down = refiner.repair(rounded_down, deadline);
  auto up = refiner.repair(rounded_up, deadline);
  if (!up || (down && refiner.effective_energy(*down) <= refiner.effective_energy(*up))) return down;
  return up;
}

std::optional<OptionChoice> FrontierBuilder::State::rounded_plan(const PlanRefiner& refiner, const RelaxedSolution& relaxed,
                                         double deadline) const {
  auto plan = rounded_plan(refiner, relaxed.rounded, relaxed.rounded_up, deadline);
  if (!options.round_to_hull_corners) return plan;
  std::optional<OptionChoice> cornered = reclaimed_corners(refiner, relaxed.duration_s, relaxed.rounded, deadline);
  if (!cornered || refiner.measured_time(*cornered) > deadline + kTimeEpsilon) return plan;  // durations within 1 ns
  if (!plan) return cornered;
  keep_cheaper(refiner, *plan, std::move(*cornered));
  return plan;
}

void FrontierBuilder::State::work_beside_crawl() {
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
  // The all-max plan's time, where it is slower than T_min: the deadline of a user who keeps
  // today's iteration time (iso-time, the plan most users run). Just above T_min the crawl's
  // quantised plans lie furthest above the LP: on bloom-176b A100 8 x 96 the frontier's plan
  // there was 0.56% above the LP optimum, the relaxation's rounded plan 0.09% (a probe). It
  // joins the frontier last, after the certification (see there).
  if (solve_t_min) {
    const double iso_t = evaluate_highest_clock(problem).time_s;
    if (iso_t > t_min + kTimeEpsilon) {
      // Its line joins the bounds at the end too: offered now, it changes which points the
      // certification finds furthest above their bounds.
      iso_time = iso_t;
      iso_solution = timed_solve(relaxation, iso_t, &lp_seconds);
      if (iso_solution) {
        if (auto plan = rounded_plan(side, *iso_solution, iso_t)) iso_point = make_point(problem, *plan);
      }
    } else if (relaxed) {
      iso_time = t_min;  // the all-max plan is the fastest: iso-time is T_min
      iso_solution = relaxed;
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
    const double solve_passes = kLpSolvePassesPerItem * dag_size + kRoundingPasses;
    const double solves = std::floor(kGridShareOfCrawl * kCrawlStepPasses * static_cast<double>(length) / solve_passes);
    const int count = solves < 2 ? 0 : static_cast<int>(std::min(solves, static_cast<double>(options.certify_grid_max)));
    for (int j = 1; j <= count; ++j) {
      const double share = std::pow(static_cast<double>(j) / static_cast<double>(count + 1), options.fast_end_power);
      grid.push_back(t_min + (*t_star - t_min) * share);
    }
    grid_points.resize(grid.size());
    // The sweep beside the crawl, sized the same way for its warm solves.
    crawl_sweep_budget = options.crawl_sweep_share * kCrawlStepPasses * static_cast<double>(length);
    const double sweep_solves =
        std::floor(crawl_sweep_budget / (kCrawlSweepSolvePasses + kCrawlSweepPivotPasses * kCrawlSweepPivots));
    const std::size_t nodes = problem.dag.num_nodes();
    if (options.certify && sweep_solves >= options.crawl_sweep_min && nodes >= options.crawl_sweep_min_nodes &&
        nodes <= options.crawl_sweep_max_nodes && t_star_solution && *t_star > t_min) {
      const int n = static_cast<int>(std::min(sweep_solves, static_cast<double>(options.crawl_sweep_max)));
      for (int j = 1; j <= n; ++j) {
        const double share = std::pow(static_cast<double>(j) / static_cast<double>(n + 1), options.fast_end_power);
        crawl_sweep.push_back(t_min + (*t_star - t_min) * share);
      }
      if (!t_min_durations.empty()) crawl_sweep_durations.emplace_back(t_min, t_min_durations);
    }
  }
  side_work = side.work() - from;
}

void FrontierBuilder::State::solve_crawl_sweep(std::size_t j) {
  const auto started = std::chrono::steady_clock::now();
  if (!crawl_sweep_lp) {
    crawl_sweep_lp = std::make_unique<WarmLpRelaxation>(problem);
    // From T_min's solve where there is one: a quarter of a start from nothing.
    if (!crawl_sweep_durations.empty()) crawl_sweep_lp->start_from(t_min, crawl_sweep_durations.front().second);
  }
  if (crawl_sweep_work < crawl_sweep_budget) {
    SupportingLine line;
    auto relaxed = crawl_sweep_lp->solve(crawl_sweep[j], &line);
    crawl_sweep_work += kCrawlSweepSolvePasses + kCrawlSweepPivotPasses * crawl_sweep_lp->last_iterations();
    if (relaxed) {
      crawl_sweep_lines.push_back(line);
      crawl_sweep_durations.emplace_back(crawl_sweep[j], std::move(relaxed->duration_s));
    }
  }
  if (j + 1 == crawl_sweep.size()) crawl_sweep_durations.emplace_back(*t_star, t_star_solution->duration_s);
  crawl_sweep_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

void FrontierBuilder::State::hull_work() {
  if (!options.refine || !options.certify || options.bound_crawl_node_steps <= 0) return;
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
  const double limit = options.hull_plan_work_share * budget;
  const std::size_t count = hull_crawl->rounded.size();
  // Coarse to fine: every stride-th state, halving the stride (each state once).
  std::vector<std::size_t> order;
  std::vector<char> listed(count, 0);
  for (std::size_t stride = std::bit_floor(count); stride >= 1; stride /= 2) {
    for (std::size_t j = stride - 1; j < count; j += stride) {
      if (!listed[j]) order.push_back(j);
      listed[j] = 1;
    }
  }
  // A state's plan: rounded down and up, each repaired to its time, the cheaper.
  const auto plan_of = [&](const PlanRefiner& r, std::size_t j) {
    const RoundedState& state = hull_crawl->rounded[j];
    auto down = r.repair(state.down, state.time_s);
    auto up = r.repair(state.up, state.time_s);
    if (!up || (down && r.effective_energy(*down) <= r.effective_energy(*up))) up = std::move(down);
    return up;
  };
  // kHullBatch states at a time, taken in turn by two refiners of their own (and, once the
  // crawl is done and the other thread may be idle, on two threads), then kept in order while
  // the work before each is still within the limit, the rest dropped: the same plans as one
  // repair after another, on any threads (a repair does not depend on what its refiner did
  // before). In pairs the threads waited on each other (one rounded-up plan takes 1 repair
  // step, another 500): on bloom 8 x 12 the repairs took 41-48 ms against 44-51 ms on one
  // thread; in batches of 8, 28-35 ms (three runs each).
  if (hull_helpers.empty()) {
    for (int t = 0; t < 2; ++t) hull_helpers.push_back(std::make_unique<PlanRefiner>(problem));
  }
  for (std::size_t k = 0; k < order.size() && hull_work_counted < limit; k += kHullBatch) {
    const std::size_t n = std::min(kHullBatch, order.size() - k);
    std::vector<std::optional<OptionChoice>> plans(n);
    std::vector<double> works(n, 0.0);
    std::atomic<std::size_t> next{0};
    run_tasks(2, threads > 1 && crawl_done.load(), [&](std::size_t t) {
      const PlanRefiner& own = *hull_helpers[t];
      for (std::size_t i = next++; i < n; i = next++) {
        const double from = own.work();
        plans[i] = plan_of(own, order[k + i]);
        works[i] = own.work() - from;
      }
    });
    for (std::size_t i = 0; i < n && hull_work_counted < limit; ++i) {
      hull_work_counted += works[i];
      if (plans[i]) hull_points.push_back(make_point(problem, *plans[i]));
    }
  }
}

void FrontierBuilder::State::solve_grid(std::size_t j) {
  if (const auto relaxed = solve_relaxation(grid[j])) {
    if (auto plan = rounded_plan(side, *relaxed, grid[j])) grid_points[j] = make_point(problem, *plan);
  }
}

void FrontierBuilder::State::consume(std::size_t index, const CrawlStep& step, std::span<const DurationChange> changes) {
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

void FrontierBuilder::State::reclaim_pending(const PlanRefiner& own, std::size_t workers) {
  std::vector<FrontierPoint> points(pending.size());
  for_each_on_threads(own, pending.size(), workers, [&](const PlanRefiner& r, std::size_t i) {
    points[i] = point_of(r, std::move(pending[i].choice), pending[i].step, &pending[i].crawl_step);
  });
  for (FrontierPoint& point : points) crawl_points.push_back(std::move(point));
  pending.clear();
}

void FrontierBuilder::State::reclaim_chunk(const PlanRefiner& refiner, std::size_t c, std::vector<PendingPlan> chunk) {
  std::vector<FrontierPoint> points;
  points.reserve(chunk.size());
  for (PendingPlan& plan : chunk) points.push_back(point_of(refiner, std::move(plan.choice), plan.step, &plan.crawl_step));
  std::lock_guard lock(mutex);
  chunk_points[c] = std::move(points);
  ++chunks_done;
}

void FrontierBuilder::State::queue_pending() {
  std::lock_guard lock(mutex);
  chunks.push_back(std::move(pending));
  chunk_points.emplace_back();
  pending.clear();
}

void FrontierBuilder::State::run_beside() {
  try {
    work_beside_crawl();
    // Then the hull work, unless the crawl's thread, done first, has claimed it: nothing in
    // it waits for the crawl, and during a long crawl (the A40 profiles: 0.1-2 s) this thread
    // has time to spare, the steps queueing meanwhile.
    if (claim_hull_work()) hull_work();
    StepBatch taken;
    taken.clear();
    std::size_t grid_next = 0, sweep_next = 0;
    while (true) {
      bool last = false;
      std::optional<std::size_t> chunk;
      std::vector<PendingPlan> chunk_plans;
      {
        std::unique_lock lock(mutex);
        ready.wait(lock, [&] {
          return stop || !published.index.empty() || (finished && !steps_consumed) || next_chunk < chunks.size() ||
                 grid_next < grid.size() || sweep_next < crawl_sweep.size() ||
                 (steps_consumed && next_chunk == chunks.size());
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
      if (sweep_next < crawl_sweep.size()) {
        solve_crawl_sweep(sweep_next++);
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
  // Kept as it was, the bound rose above the energy of plans up to 0.06% cheaper on
  // pipelines of up to 64 nodes.
  if (bound) points[i].lower_bound_j = bound_moved_to(*bound, deadline, points[i].measured.time_s);
}

void FrontierBuilder::State::carry_to_slower(const PlanRefiner& refiner, const CrawlResult& crawl,
                                             std::vector<FrontierPoint>& points, std::size_t i, int sweeps) const {
  const OptionChoice found = points[i].option_choice();
  for (std::size_t j = i + 1; j < points.size() && !refiner.out_of_work(); ++j) {
    const double was = points[j].effective_energy_j;
    replace_if_cheaper(refiner, crawl, points, j, refiner.reclaim_slack(found, points[j].measured.time_s, sweeps));
    if (points[j].effective_energy_j >= was) break;
  }
}

std::size_t FrontierBuilder::State::carry_to_faster(const PlanRefiner& refiner, const CrawlResult& crawl,
                                                    std::vector<FrontierPoint>& points, std::size_t i,
                                                    const FasterCarry& how) const {
  OptionChoice carried = points[i].option_choice();
  double last_t = points[i].measured.time_s;
  std::size_t cheaper = 0;
  for (std::size_t k = i; k-- > 0 && !refiner.out_of_work();) {
    const double t = points[k].measured.time_s;
    if (last_t - t < how.min_step_s) continue;
    if (how.repairs_left) {
      if (*how.repairs_left <= 0) break;
      --*how.repairs_left;
    }
    std::optional<OptionChoice> repaired = refiner.repair(carried, t);
    if (!repaired) break;
    const double was = points[k].effective_energy_j;
    const double saved = was - refiner.effective_energy(*repaired);
    replace_if_cheaper(refiner, crawl, points, k, repaired);
    if (points[k].effective_energy_j >= was) break;
    ++cheaper;
    if (saved < how.min_saving * points[k].measured.energy_j) break;
    carried = std::move(*repaired);
    last_t = t;
  }
  return cheaper;
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

void FrontierBuilder::offer(std::vector<FrontierPoint> points) {
  std::move(points.begin(), points.end(), std::back_inserter(state_->offered));
}

void FrontierBuilder::offer(Frontier other) {
  offer(std::move(other.points));
  std::move(other.bound_lines.begin(), other.bound_lines.end(), std::back_inserter(state_->offered_lines));
}

void FrontierBuilder::certify_from(std::chrono::steady_clock::time_point start) { state_->certify_from = start; }

Frontier FrontierBuilder::finish(const CrawlResult& crawl) {
  State& s = *state_;
  const EnergyProblem& problem = s.problem;
  const FrontierOptions& options = s.options;
  s.crawl_done = true;
  if (s.background) s.publish(true);
  Frontier frontier;
  frontier.all_max = evaluate_highest_clock(problem);
  const PlanRefiner refiner(problem);
  if (s.background) {
    // The hull work, where the other thread has not claimed it yet (on small DAGs it is
    // still at the work that needs no crawl); it takes the chunks meanwhile.
    if (s.claim_hull_work()) {
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
    // This thread, its crawl done, takes chunks too until every one is reclaimed.
    while (true) {
      std::size_t chunk = 0;
      std::vector<State::PendingPlan> plans;
      {
        std::unique_lock lock(s.mutex);
        s.ready.wait(lock, [&] {
          return s.stop || s.next_chunk < s.chunks.size() || (s.steps_consumed && s.chunks_done == s.chunks.size());
        });
        if (s.stop || s.next_chunk == s.chunks.size()) break;
        chunk = s.next_chunk++;
        plans = std::move(s.chunks[chunk]);
      }
      s.reclaim_chunk(refiner, chunk, std::move(plans));
      s.ready.notify_all();
    }
    s.beside.join();
    if (s.error) std::rethrow_exception(s.error);
    for (std::vector<FrontierPoint>& points : s.chunk_points) {
      for (FrontierPoint& point : points) s.crawl_points.push_back(std::move(point));
    }
  } else {
    s.work_beside_crawl();
    for (std::size_t j = 0; j < s.grid.size(); ++j) s.solve_grid(j);
    for (std::size_t j = 0; j < s.crawl_sweep.size(); ++j) s.solve_crawl_sweep(j);
    s.hull_work();
  }
  s.lp_seconds += s.crawl_sweep_seconds;
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
  refiner.add_work(s.side.work() - s.side_work + s.hull_work_counted);
  const double budget = s.budget;
  const double bounded_from = refiner.work();
  refiner.add_work(s.side_work);
  const double limit = bounded_from + budget;
  frontier.refine_budget = s.search ? (1.0 + options.fine_search_share) * budget : budget;
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
  // energy (State::replace_if_cheaper).
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
  // Loose points are searched at least this share of the frontier's span apart. The loosest
  // crowd together just above T_min, where the LP's own gap is widest, and a search there
  // costs the most; without a spacing the whole share went to one stretch of about 2% of
  // the span (bloom A40 4 x 8), while a search's plan reaches its near neighbours anyway
  // (handed on, below).
  constexpr double kLooseSpacing = 0.015;
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
    if (bound) improved.back().lower_bound_j = s.bound_moved_to(*bound, deadline, improved.back().measured.time_s);
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
  // Point i's searched plan handed on: slower points take it with their slack reclaimed,
  // faster ones repaired down to their time (each from the last), each direction while it is
  // cheaper.
  const auto hand_on = [&](std::vector<FrontierPoint>& points, std::size_t i) {
    s.carry_to_slower(refiner, crawl, points, i);
    s.carry_to_faster(refiner, crawl, points, i, {});
  };
  // The points furthest above their bound first, each at least `spacing` from every one
  // searched before (listed in `searched`), while the work lasts and a point is more than
  // certify_target_gap above its bound: the relaxation solved at its time, and two rounds of
  // every move priced by it from the point's own plan and, `from_rounded`, from the
  // relaxation's plan rounded down and up, each repaired; the cheapest is kept and handed on.
  const auto search_widest = [&](std::vector<FrontierPoint>& points, double spacing, std::vector<double>& searched,
                                 bool from_rounded) {
    std::vector<std::pair<double, std::size_t>> widest;  // (gap to the bound, point)
    for (std::size_t i = 0; i < points.size(); ++i) {
      if (points[i].lower_bound_j) widest.emplace_back(points[i].measured.energy_j / *points[i].lower_bound_j, i);
    }
    std::stable_sort(widest.begin(), widest.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    const double target = 1.0 + options.certify_target_gap;
    for (const auto& [gap_then, i] : widest) {
      if (refiner.out_of_work() || gap_then < target) break;
      // As it is now: a plan handed on may have brought it within the target.
      if (points[i].measured.energy_j < target * *points[i].lower_bound_j) continue;
      const double deadline = points[i].measured.time_s;
      const auto near = [&](double t) { return std::abs(t - deadline) < spacing; };
      if (std::any_of(searched.begin(), searched.end(), near)) continue;
      searched.push_back(deadline);
      const auto relaxed = s.solve_relaxation(deadline);
      refiner.add_work(lp_solve_work);
      if (!relaxed) continue;
      std::vector<OptionChoice> starts{points[i].option_choice()};
      if (from_rounded) {
        for (const OptionChoice* rounded : {&relaxed->rounded, &relaxed->rounded_up}) {
          if (auto repaired = refiner.repair(*rounded, deadline)) starts.push_back(std::move(*repaired));
        }
      }
      const double before = points[i].effective_energy_j;
      for (OptionChoice& start : starts) {
        replace_if_cheaper(points, i,
                           refiner.local_search(std::move(start), deadline, kRoundsPerPoint, PlanRefiner::Moves::kAll,
                                                &relaxed->price_j_per_s));
      }
      if (points[i].effective_energy_j < before) hand_on(points, i);
    }
  };
  frontier.loose_spacing_s = kLooseSpacing * (points.back().measured.time_s - points.front().measured.time_s);
  search_widest(points, frontier.loose_spacing_s, frontier.loose_searched_s, true);
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
  // Fine searches: the gap fills' points start unsearched, and the loose pass's searches
  // reach only their near neighbours, so the steep stretch keeps many points a single round of
  // local search would improve (on gpt3-175b A40 4 x 8 the README deadline of the optimality
  // bench sat 0.17% above CBC's plan; two priced rounds from the point's own plan took it to
  // 0.04%). So the points still furthest above their bound, at least fine_search_spacing of the
  // span apart, get two rounds of every move from their own plan, screened by the LP's prices
  // at their time, within fine_search_share of the budget on top of it; what a search finds
  // goes to its neighbours as the loose pass's does (docs/solver.md, step 7, "Fine searches").
  refiner.set_work_limit(refiner.work() + options.fine_search_share * budget);
  frontier.fine_spacing_s =
      options.fine_search_spacing * (frontier.points.back().measured.time_s - frontier.points.front().measured.time_s);
  search_widest(frontier.points, frontier.fine_spacing_s, frontier.fine_searched_s, false);
  frontier.points = pareto_filter(std::move(frontier.points));
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
  return energy_at(problem, point.measured, iteration_s);
}

double energy_at(const EnergyProblem& problem, const MeasuredFigures& measured, double iteration_s) {
  if (!(iteration_s >= 0.0) || !std::isfinite(iteration_s)) {
    throw InputError("an iteration time must be a finite number of seconds >= 0, got " + short_number(iteration_s));
  }
  const double wait = std::max(0.0, iteration_s - measured.time_s);
  return measured.energy_j + problem.p_blocking * problem.num_gpus() * wait;
}

}  // namespace perseus
