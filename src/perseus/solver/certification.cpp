// Certification, the frontier's last step (docs/solver.md, "Certified frontier"): every
// frontier point's proven lower bound, and the LP solves, sweeps and searches that tighten the
// widest gaps where the plans are furthest above it. FrontierBuilder::State is in
// frontier_state.hpp; the builder that calls this, in frontier.cpp.
#include "perseus/solver/exact_milp.hpp"
#include "perseus/solver/frontier_state.hpp"

namespace perseus {

void FrontierBuilder::State::offer_crawl_sweep(Frontier& frontier, const PlanRefiner& refiner, const CrawlResult& crawl) {
  frontier.crawl_sweep_solves = crawl_sweep_lines.size();
  for (const SupportingLine& line : crawl_sweep_lines) lines.add(line);
  if (crawl_sweep_durations.size() < 2) return;
  std::vector<FrontierPoint>& points = frontier.points;
  // Every crawl_sweep_offer_stride-th of the far points: the inheritance pass carries their
  // plans to the points between (every point: the same medians to 0.01 percentage point, for
  // 0.27-0.34 s instead of 0.04 on 1,536 nodes).
  std::vector<std::size_t> far;
  const std::vector<std::size_t> above = points_above(points, options.certify_sweep_gap);
  const std::size_t stride = static_cast<std::size_t>(std::max(1, options.crawl_sweep_offer_stride));
  for (std::size_t k = 0; k < above.size(); k += stride) far.push_back(above[k]);
  std::vector<std::optional<OptionChoice>> offered(far.size());
  const auto& solved = crawl_sweep_durations;  // by deadline
  for_each_on_threads(refiner, far.size(), threads - 1, [&](const PlanRefiner& r, std::size_t k) {
    const double t = points[far[k]].measured.time_s;
    std::vector<double> between;
    if (!interpolate_durations(solved, t, between)) return;
    offered[k] = rounded_down_reclaimed(r, between, t);
  });
  for (std::size_t k = 0; k < far.size(); ++k) {
    const double was = points[far[k]].effective_energy_j;
    replace_if_cheaper(refiner, crawl, points, far[k], offered[k]);
    if (points[far[k]].effective_energy_j < was) ++frontier.crawl_sweep_improved;
  }
}

void FrontierBuilder::State::certify(Frontier& frontier, const PlanRefiner& refiner, const CrawlResult& crawl) {
  const auto started = std::chrono::steady_clock::now();
  refiner.set_work_limit(std::numeric_limits<double>::infinity());
  frontier.certified = options.certify;
  if (options.certify_seconds > 0.0) {
    const auto after = [](std::chrono::steady_clock::time_point t, double seconds) {
      return t + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
    };
    certify_end = after(certify_from.value_or(started), options.certify_seconds);
    lp_deadline = after(started, (1.0 - exact_share()) * std::max(0.0, std::chrono::duration<double>(certify_end - started).count()));
  }
  if (options.certify) tighten(frontier, refiner, crawl, started);
  settle(frontier, refiner, started);
  frontier.certify_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

void FrontierBuilder::State::tighten(Frontier& frontier, const PlanRefiner& refiner, const CrawlResult& crawl,
                                     std::chrono::steady_clock::time_point started) {
  State& s = *this;
  const double lp_solve_work = lp_work;
  const auto replace = [&](std::vector<FrontierPoint>& points, std::size_t i, const std::optional<OptionChoice>& plan) {
    replace_if_cheaper(refiner, crawl, points, i, plan);
  };
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  offer_crawl_sweep(frontier, refiner, crawl);
  std::vector<FrontierPoint>& points = frontier.points;
  std::vector<double> solved_at;  // deadlines solved here
  std::vector<std::pair<double, std::vector<double>>> relaxed_durations;  // (deadline, durations) of every solve
  if (!s.t_min_durations.empty()) relaxed_durations.emplace_back(s.t_min, s.t_min_durations);
  // The sweep beside the crawl's solves too: the certification's own sweep starts from the
  // solved deadline nearest its first point, which is then nearer (fewer pivots, more solves
  // within its budget: on the A40 cases of 8 x 48 the median 0.333% -> 0.302% and 0.125% -> 0.110%).
  for (const auto& solved : crawl_sweep_durations) {
    if (std::abs(solved.first - s.t_min) > kTimeEpsilon) relaxed_durations.push_back(solved);
  }
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
  // A solve on the helper thread, with a relaxation and refiner of its own: its relaxation,
  // rounded plan (and, asked for, the rounded-down plan reclaimed), and what it cost; joined
  // to this thread's accounts and bound by take().
  struct HelperSolve {
    double t = 0.0;
    std::optional<RelaxedSolution> relaxed;
    std::optional<OptionChoice> plan, reclaimed;
    double seconds = 0.0;
    double work = 0.0;
  };
  const auto solve_on_helper = [&](HelperSolve& h, bool reclaimed) {
    const PlanRefiner& helper = *s.helpers[0];
    const double from = helper.work();
    h.relaxed = State::timed_solve(*s.helper_relaxation, h.t, &h.seconds);
    if (h.relaxed) {
      if (reclaimed) h.reclaimed = helper.reclaim_slack(h.relaxed->rounded, h.t);
      h.plan = s.rounded_plan(helper, *h.relaxed, h.t);
    }
    h.work = helper.work() - from;
  };
  const auto take = [&](const HelperSolve& h) {
    s.lp_seconds += h.seconds;
    refiner.add_work(h.work);
    if (h.relaxed) lines.add(h.t, *h.relaxed);
  };
  const auto make_helper = [&] {
    if (!s.helper_relaxation) s.helper_relaxation = std::make_unique<LpRelaxation>(problem, s.relaxation);
    if (s.helpers.empty()) s.helpers.push_back(std::make_unique<PlanRefiner>(problem));
  };
  for (int made = 0; !targets.empty();) {
    // The second solve of the round beside this one, on the helper thread.
    std::optional<RelaxedSolution> first;
    std::optional<OptionChoice> first_plan;
    HelperSolve second;
    if (targets.size() > 1) {
      make_helper();
      second.t = targets[1];
    }
    // T*'s solve was made beside the crawl.
    const bool precomputed = made == 0 && s.t_star && std::abs(*s.t_star - targets[0]) <= kTimeEpsilon;
    run_tasks(targets.size(), s.threads > 1, [&](std::size_t k) {
      if (k == 0) {
        first = precomputed ? s.t_star_solution : s.solve_relaxation(targets[0]);
        if (first) first_plan = rounded_plan(refiner, *first, targets[0]);
      } else {
        solve_on_helper(second, false);
      }
    });
    if (targets.size() > 1) take(second);
    // Each solve offers its rounded plan at its point.
    if (first) relaxed_durations.emplace_back(targets[0], first->duration_s);
    if (targets.size() > 1 && second.relaxed) relaxed_durations.emplace_back(targets[1], second.relaxed->duration_s);
    for (std::size_t j = 0; j < targets.size(); ++j) {
      solved_at.push_back(targets[j]);
      ++frontier.certify_solves;
      const std::optional<OptionChoice>& plan = j == 0 ? first_plan : second.plan;
      const auto at = std::find_if(points.begin(), points.end(), [&](const FrontierPoint& p) {
        return std::abs(p.measured.time_s - targets[j]) <= kTimeEpsilon;
      });
      if (plan && at != points.end()) replace(points, at - points.begin(), plan);
    }
    made += static_cast<int>(targets.size());
    // The next round: what is left of the counted solves (two at most), then pairs while half
    // of the LP side of --certify's seconds lasts (the steps after these need the rest).
    const int left = made < counted_solves ? static_cast<int>(counted_solves) - made
                                           : (s.lp_deadline && elapsed() < 0.5 * std::chrono::duration<double>(*s.lp_deadline - started).count() ? 2 : 0);
    targets.clear();
    if (left == 0) break;
    if (const auto next = widest_unsolved(std::nullopt)) {
      targets.push_back(*next);
      if (left >= 2) {
        if (const auto other = widest_unsolved(*next)) targets.push_back(*other);
      }
    }
  }
  // A solve's rounded plan mends its own point; the inheritance below carries it to slower
  // ones, but nothing to faster ones, and the far points come in stretches whose widest
  // point is often their slow end: on bloom-176b A40 8 x 96 the eight solves went to eight
  // neighbours at 41.10-41.16 s, 0.1-0.8% above the LP each, while the 180 points faster
  // than them, to 40.3 s, stayed 1.3-4.2% above. So the plan is also repaired (a
  // minimum-cut speed-up on the measured options) to faster points a step of
  // certify_chain_step_share of the span apart, each repair from the last, as long as it
  // saves at least certify_chain_min_saving of the point's energy (it is kept if cheaper at
  // all), at most certify_chain_repairs in all.
  int chain_left = options.certify_chain_repairs;
  const auto chain_repairs = [&](std::size_t from) {
    frontier.certify_chained += s.carry_to_faster(
        refiner, crawl, points, from, {options.certify_chain_step_share * span, options.certify_chain_min_saving, &chain_left});
  };
  // The worst-gap and polish loops take one target at a time, each chosen after the last was
  // offered, chained and carried. With a second thread, the next target as it stands once a
  // solve's line has joined the bound is solved and rounded on the helper thread while this
  // one offers, chains and carries the last, and that solve is used if it is still the next
  // target (the offers only lower gaps, those of points within a chain's or carry's reach):
  // the same solves and plans as one after another, in less time.
  std::optional<HelperSolve> ahead;
  // The solve at t: the one made ahead if it was for t, else one made now.
  const auto solve_at = [&](double t) {
    HelperSolve here;
    here.t = t;
    if (ahead && std::abs(ahead->t - t) <= kTimeEpsilon) {
      here = std::move(*ahead);
      ++frontier.certify_solved_ahead;
      take(here);
    } else {
      if (ahead) ++frontier.certify_ahead_discarded;
      here.relaxed = s.solve_relaxation(t);
    }
    ahead.reset();
    return here;
  };
  // Runs `offer` here and, with a second thread, the solve and plans of the target `next()`
  // finds (if any) on the helper thread.
  const auto offer_and_look_ahead = [&](const std::function<std::optional<std::size_t>()>& next, bool reclaimed,
                                        const std::function<void()>& offer) {
    if (s.threads > 1) {
      if (const auto target = next()) {
        make_helper();
        ahead.emplace();
        ahead->t = points[*target].measured.time_s;
      }
    }
    run_tasks(ahead ? 2 : 1, true, [&](std::size_t k) {
      if (k == 0) return offer();
      solve_on_helper(*ahead, reclaimed);
    });
  };
  // A solve made ahead that no loop took.
  const auto drop_ahead = [&] {
    if (ahead) ++frontier.certify_ahead_discarded;
    ahead.reset();
  };
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
    const auto next_target = [&] {
      return widest_above(points, options.certify_worst_gap, [&](double t) { return solved(t) || waits_for(aimed, t); });
    };
    for (int made = 0; made < cap && !s.past_lp_deadline(); ++made) {
      const auto target = next_target();
      if (!target) break;
      const double t = points[*target].measured.time_s;
      HelperSolve here = solve_at(t);
      solved_at.push_back(t);
      aimed.push_back(t);
      ++frontier.certify_solves;
      if (!here.relaxed) continue;
      relaxed_durations.emplace_back(t, here.relaxed->duration_s);
      const auto next = [&] { return made + 1 < cap ? next_target() : std::nullopt; };
      offer_and_look_ahead(next, false, [&] {
        if (!here.plan) here.plan = rounded_plan(refiner, *here.relaxed, t);
        const double before = points[*target].effective_energy_j;
        replace(points, *target, here.plan);
        // Where the LP's rounding is poor, the nearest slower point within the gap, its plan
        // repaired down to this point's time.
        if (gap_to_bound(points[*target]).value_or(0.0) > options.certify_worst_gap) {
          for (std::size_t j = *target + 1; j < points.size() && points[j].measured.time_s - t < span / 64.0; ++j) {
            if (gap_to_bound(points[j]).value_or(1.0) <= options.certify_worst_gap) {
              replace(points, *target, refiner.repair(points[j].option_choice(), t));
              break;
            }
          }
        }
        // Chained from where the rounding stays far (FrontierOptions::certify_chain_min_gap).
        if (points[*target].effective_energy_j < before &&
            (options.certify_chain_min_gap <= 0.0 ||
             gap_to_bound(points[*target]).value_or(1.0) >= options.certify_chain_min_gap)) {
          chain_repairs(*target);
        }
      });
    }
    drop_ahead();
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
      if (refiner.work() >= work_limit || s.past_lp_deadline()) break;
      const double t = points[i].measured.time_s;
      // Strictly after the first solve (at it, its point has had that solve's plan).
      if (relaxed_durations.empty() || t <= relaxed_durations.front().first ||
          !interpolate_durations(relaxed_durations, t, between)) {
        continue;
      }
      const RoundedChoice rounded = round_to_options(problem, between, 1e-9);
      replace(points, i, rounded_plan(refiner, rounded.down, rounded.up, t));
    }
  }
  // Last, the LP swept over the points still more than certify_sweep_gap above the best
  // bound, fastest first, each solve from the last one's tree: near T_min, where those crowd,
  // the frontier's plans stayed 0.4-0.8% above the LP optimum, and its rounded-down plans at
  // each point, reclaimed, 0.15-0.3% (bloom-176b A100 8 x 12, a probe). The points between
  // two solves get their durations interpolated (feasible, within the LP's curvature of
  // optimal). In two halves, each on a relaxation and refiner of its own, within half the
  // share: beside each other where there are two threads, one after the other otherwise,
  // the same plans.
  // From certify_sweep_wide_from_nodes, solves further apart within a larger share, so that
  // they reach every far point (FrontierOptions::certify_sweep_wide_factor). The solves once
  // ran warm-started on CLP (WarmLpRelaxation, a few pivots a deadline from the last basis);
  // from the anchors' trees they took a third of the time (0.70 s against 2.20 s of CPU over
  // the same 1,285 solves of the 16 cases), and from the last solve's tree (each half's
  // relaxation solves its points in order, so the same plans on any threads) 0.5-0.8 times
  // that again, the plans byte for byte the same (docs/solver.md).
  if (options.certify_sweep_share > 0 && problem.dag.num_nodes() <= options.certify_sweep_max_nodes) {
    const std::vector<std::size_t> far = points_above(points, options.certify_sweep_gap);
    struct Half {
      std::span<const std::size_t> far;  // its points, fastest first
      std::size_t first = 0;             // its first point's place among all the far points
      std::vector<std::pair<std::size_t, OptionChoice>> plans;  // (point, plan) offered
      std::vector<SupportingLine> lines;
      std::size_t solves = 0;
      double lp_seconds = 0.0;
    };
    const std::size_t middle = far.size() / 2;
    std::array<Half, 2> halves;
    halves[0].far = std::span<const std::size_t>(far).first(middle);
    halves[1].far = std::span<const std::size_t>(far).subspan(middle);
    halves[1].first = middle;
    const std::size_t nodes = problem.dag.num_nodes();
    const int factor = std::max(1, options.certify_sweep_wide_factor);
    const int wide = nodes >= options.certify_sweep_wide_from_nodes ? factor : 1;
    // From twice that size the stride widens once more, within the same share.
    const int wider = nodes >= 2 * options.certify_sweep_wide_from_nodes ? factor : 1;
    const std::size_t stride = static_cast<std::size_t>(std::max(1, options.certify_sweep_stride));
    // The step after the far point at `place` (among all): wider past the fastest few, where
    // the LP's curve bends least and interpolation loses least.
    const auto step_after = [&](std::size_t place) {
      return place < options.certify_sweep_dense_points ? stride : stride * static_cast<std::size_t>(wide * wider);
    };
    const double half_share = 0.5 * options.certify_sweep_share * wide * budget;
    const auto sweep = [&](Half& half, LpRelaxation& relaxation, const PlanRefiner& r) {
      const double work_limit = r.work() + half_share;
      const auto offer = [&](std::size_t i, const std::vector<double>& durations) {
        half.plans.emplace_back(i, rounded_down_reclaimed(r, durations, points[i].measured.time_s));
      };
      std::optional<std::pair<double, std::vector<double>>> previous;  // the last solve's deadline and durations
      std::size_t previous_at = 0;
      std::vector<double> between;
      for (std::size_t a = 0; a < half.far.size() && r.work() < work_limit && !s.past_lp_deadline();) {
        const std::size_t i = half.far[a];
        const double t = points[i].measured.time_s;
        const auto solve_started = std::chrono::steady_clock::now();
        auto relaxed = relaxation.solve_next(t);
        half.lp_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - solve_started).count();
        r.add_work(kSweepSolvePasses);
        ++half.solves;
        if (relaxed) {
          half.lines.push_back(SupportingLine::of(t, *relaxed));
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
        a = std::min(a + step_after(half.first + a), half.far.size() - 1);
      }
    };
    if (!far.empty()) {
      if (s.helpers.empty()) s.helpers.push_back(std::make_unique<PlanRefiner>(problem));
      const double helper_work = s.helpers[0]->work();
      LpRelaxation first(problem, s.relaxation), second(problem, s.relaxation);  // the anchors' trees shared
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
    for (int made = 0; made < options.certify_search_points && !refiner.out_of_work() && !s.past_lp_deadline(); ++made) {
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
  const bool inherit = problem.dag.num_nodes() <= options.certify_inherit_max_nodes;
  for (std::size_t from = 1; inherit && from < points.size(); from += kInheritChunk) {
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
  // Last, a polish where the plans are furthest above their bounds after everything else:
  // at most certify_polish_points points, widest first, a 64th of the span apart, on DAGs of
  // certify_polish_min_nodes to _max_nodes, each an LP solve offering its rounded plans there,
  // which (where they mend the point) slower neighbours inherit and faster ones get repaired
  // to (at most certify_polish_chain_repairs repairs each). The widest gaps left are often
  // where no solve was made: on gpt3-175b A100 8 x 24 the worst points, 0.50-0.54% above
  // their bounds, had LP solutions whose rounded-down plans came within 0.09-0.12% of the LP
  // optimum (a probe); the sweep's budget had run out before them (docs/solver.md).
  std::vector<double> polished;
  const bool polish = problem.dag.num_nodes() >= options.certify_polish_min_nodes &&
                     problem.dag.num_nodes() <= options.certify_polish_max_nodes;
  const auto next_to_polish = [&] {
    return widest_above(points, options.certify_target_gap, [&](double t) {
      return std::any_of(polished.begin(), polished.end(), [&](double d) { return std::abs(t - d) < span / 64.0; });
    });
  };
  for (int made = 0; polish && made < options.certify_polish_points && !s.past_lp_deadline(); ++made) {
    const auto target = next_to_polish();
    if (!target) break;
    const double t = points[*target].measured.time_s;
    polished.push_back(t);
    HelperSolve here = solve_at(t);
    ++frontier.certify_solves;
    if (!here.relaxed) continue;
    const auto next = [&] { return made + 1 < options.certify_polish_points ? next_to_polish() : std::nullopt; };
    offer_and_look_ahead(next, true, [&] {
      if (!here.plan) {
        here.reclaimed = refiner.reclaim_slack(here.relaxed->rounded, t);
        here.plan = rounded_plan(refiner, *here.relaxed, t);
      }
      const double before = points[*target].effective_energy_j;
      replace(points, *target, here.reclaimed);
      replace(points, *target, here.plan);
      if (points[*target].effective_energy_j >= before) return;
      ++frontier.certify_polished;
      s.carry_to_slower(refiner, crawl, points, *target, kInheritSweeps);
      chain_left = options.certify_polish_chain_repairs;
      chain_repairs(*target);
    });
  }
  drop_ahead();
  // Last, where a point lies more than certify_carry_down_gap further above its bound than
  // its slower neighbour, it takes that neighbour's plan repaired down to its time, and so on
  // to faster points while that is cheaper; the largest such steps in the gap first, while
  // the repairs stay within certify_carry_down_share of the budget. The steps come from the
  // solves and sweeps above, each mending its own point and the slower ones the inheritance
  // reaches, but not the faster stretch before it: on bloom-176b A100 8 x 48, 24 points over
  // the 20 ms below a swept point at 8.276 s lay 0.35-0.70% above their bounds, that point
  // 0.27% (docs/solver.md, "Carried down").
  if (options.certify_carry_down_share > 0.0 && points.size() > 1 &&
      problem.dag.num_nodes() <= options.certify_carry_down_max_nodes) {
    const auto step_in_gap = [&](std::size_t i) -> std::optional<double> {
      const auto gap = gap_to_bound(points[i]);
      const auto slower = gap_to_bound(points[i + 1]);
      if (!gap || !slower || *gap <= *slower + options.certify_carry_down_gap) return std::nullopt;
      return *gap - *slower;
    };
    std::vector<std::pair<double, std::size_t>> steps;  // (step in the gap, faster point)
    for (std::size_t i = 0; i + 1 < points.size(); ++i) {
      if (const auto step = step_in_gap(i)) steps.emplace_back(*step, i);
    }
    std::stable_sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    refiner.set_work_limit(refiner.work() + options.certify_carry_down_share * budget);
    for (const auto& step : steps) {
      if (refiner.out_of_work() || s.past_lp_deadline()) break;
      if (!step_in_gap(step.second)) continue;  // a carry from a larger step has mended it
      frontier.certify_carried_down += s.carry_to_faster(refiner, crawl, points, step.second + 1, {});
    }
    refiner.set_work_limit(std::numeric_limits<double>::infinity());
  }
  sandwich(frontier, refiner);
}

void FrontierBuilder::State::sandwich(Frontier& frontier, const PlanRefiner& refiner) {
  const std::vector<FrontierPoint>& points = frontier.points;
  const double blocking_w = problem.p_blocking * problem.num_gpus();
  for (int made = 0; made < options.certify_sandwich_solves && !points.empty() && !past_lp_deadline(); ++made) {
    // The LP optimum where it is known exactly: at every solved deadline, by time.
    std::vector<std::pair<double, double>> known;  // (deadline, v)
    for (const SupportingLine& line : lines.lines()) known.emplace_back(line.at_s, line.effective_j);
    std::sort(known.begin(), known.end());
    // The widest window at a point, relative to its energy.
    double widest = options.certify_sandwich_gap;
    std::optional<double> target;
    for (const FrontierPoint& point : points) {
      const double t = point.measured.time_s;
      const auto bound = final_bound(t);
      if (!bound) continue;
      double above = point.effective_energy_j;  // v(t) at most: the plan is a point of the LP
      // The first solved at t or later, and the last before it.
      const auto after = std::lower_bound(known.begin(), known.end(),
                                          std::pair{t - kTimeEpsilon, -std::numeric_limits<double>::infinity()});
      if (after != known.end() && after->first <= t + kTimeEpsilon) {
        above = std::min(above, after->second);  // solved here
      } else if (after != known.begin()) {
        const auto& [a, va] = *std::prev(after);
        // Under the chord to the next solve; past the last, no higher than there (v does
        // not rise with the deadline).
        above = std::min(above, after == known.end() ? va : va + (after->second - va) * (t - a) / (after->first - a));
      }
      const double window = (above + blocking_w * t - *bound) / point.measured.energy_j;
      if (window > widest) {
        widest = window;
        target = t;
      }
    }
    if (!target) break;
    refiner.add_work(lp_work);
    ++frontier.certify_solves;
    ++frontier.certify_sandwich_solves;
    if (!solve_relaxation(*target)) break;  // none meets it: cannot happen at a plan's time
  }
}

void FrontierBuilder::State::settle(Frontier& frontier, const PlanRefiner& refiner,
                                   std::chrono::steady_clock::time_point started) {
  State& s = *this;
  std::vector<FrontierPoint>& points = frontier.points;
  // Last, the relaxation's plan at the all-max plan's time (solved beside the crawl, its
  // solve charged here). Offered earlier, as a candidate of the crawl's, it changed what every
  // later step aimed at: on bloom-176b A100 8 x 96 the frontier was dearer at 497 of 3,848
  // deadlines (up to 0.89%) and cheaper at 881.
  if (s.iso_solution && s.iso_time > s.t_min + kTimeEpsilon) {  // at T_min, T_min's own solve
    refiner.add_work(lp_work);
    lines.add(s.iso_time, *s.iso_solution);
  }
  if (s.iso_point) points.push_back(std::move(*s.iso_point));
  // And on DAGs of up to iso_search_max_nodes, the cheapest plan at that time (or T_min's,
  // where the all-max plan is the fastest) gets iso_search_rounds of local search, the moves
  // screened by the LP's prices there, within iso_search_share of the refinement's budget
  // (FrontierOptions::iso_search_rounds).
  // The cheapest plan as fast as iso-time, where the searches below start (null if none).
  const auto cheapest_at_iso_time = [&]() -> const FrontierPoint* {
    const FrontierPoint* cheapest = nullptr;
    for (const FrontierPoint& point : points) {
      if (point.measured.time_s <= s.iso_time + kTimeEpsilon && (!cheapest || point.effective_energy_j < cheapest->effective_energy_j)) {
        cheapest = &point;
      }
    }
    return cheapest;
  };
  if (s.iso_solution && options.iso_search_rounds > 0 && problem.dag.num_nodes() <= options.iso_search_max_nodes) {
    if (const FrontierPoint* start = cheapest_at_iso_time()) {
      const OptionChoice from = start->option_choice();
      refiner.set_work_limit(refiner.work() + options.iso_search_share * budget);
      OptionChoice searched = refiner.local_search(from, s.iso_time, options.iso_search_rounds, PlanRefiner::Moves::kAll,
                                                   &s.iso_solution->price_j_per_s);
      refiner.set_work_limit(std::numeric_limits<double>::infinity());
      if (refiner.effective_energy(searched) < refiner.effective_energy(from) - 1e-9) {
        points.push_back(make_point(problem, searched));
        ++frontier.iso_searched;
      }
    }
  }
  // Then, asked for, the exact MILP at iso-time from the cheapest plan there
  // (FrontierOptions::exact_iso_seconds): its plan, and its bound in effective energy, which
  // bounds every point as fast as iso-time too.
  // The exact solves' bounds, (deadline, effective energy): each holds at every point as fast.
  std::vector<std::pair<double, double>> exact_bounds;
  const double blocking_w = problem.p_blocking * problem.num_gpus();
  if (options.exact_iso_seconds > 0.0 && s.iso_time > 0.0) {
    if (const FrontierPoint* start = cheapest_at_iso_time()) {
      const double deadline = std::max(s.iso_time, start->measured.time_s);
      const std::optional<ExactSolution> exact =
          solve_exact(problem, deadline, {.time_limit_s = options.exact_iso_seconds, .start = start->option_choice()});
      if (exact) {
        frontier.exact_seconds = exact->seconds;
        if (std::isfinite(exact->lower_bound_j)) {
          frontier.exact_lower_bound_j = exact->lower_bound_j;
          exact_bounds.emplace_back(deadline, exact->lower_bound_j - blocking_w * deadline);
        }
        if (exact->improved) {
          frontier.exact_improved = true;
          points.push_back(make_point(problem, exact->choice));
        }
      }
    }
  }
  // Plans offered from outside (FrontierBuilder::offer: the default effort's frontier), kept
  // where cheaper.
  std::vector<std::pair<double, double>> own;  // (time, effective energy) of this frontier's points
  // Their lines join this frontier's bounds: where --certify's seconds cut this frontier's own
  // solves short, its lines alone once bounded gpt3-175b A100 8 x 96's points up to 1.455%
  // below, against the default effort's 0.730%.
  for (const SupportingLine& line : s.offered_lines) lines.add(line);
  s.offered_lines.clear();
  if (!s.offered.empty()) {
    for (const FrontierPoint& point : points) own.emplace_back(point.measured.time_s, point.effective_energy_j);
    std::sort(own.begin(), own.end());
    std::move(s.offered.begin(), s.offered.end(), std::back_inserter(points));
    s.offered.clear();
  }
  points = pareto_filter(std::move(points));  // on a tie, this frontier's (listed first)
  if (!own.empty()) {
    for (const FrontierPoint& point : points) {
      frontier.default_effort_points +=
          !std::binary_search(own.begin(), own.end(), std::pair{point.measured.time_s, point.effective_energy_j});
    }
  }
  // The lines of the exact MILP with the deadline priced (FrontierOptions::certify_exact_priced).
  SupportingLines exact_lines(blocking_w);
  // The best exact bound at t: the priced solves' lines, and the fixed deadlines' bounds where
  // the deadline is no faster than t.
  const auto exact_bound_at = [&](double t) {
    std::optional<double> bound = exact_lines.energy_at(t);
    for (const auto& [deadline, effective] : exact_bounds) {
      if (t <= deadline && (!bound || effective + blocking_w * t > *bound)) bound = effective + blocking_w * t;
    }
    return bound;
  };
  // The higher of `bound` (the lines' at t) and the exact solves'.
  const auto with_exact = [&](double t, std::optional<double> bound) {
    if (const auto exact = exact_bound_at(t); exact && (!bound || *exact > *bound)) bound = exact;
    return bound;
  };
  // Then, with --certify's seconds (FrontierOptions::certify_exact_share), the exact MILP
  // where a point is still furthest above its bound, widest first, a 64th of the span apart,
  // while those seconds last: CBC's plan where cheaper, its bound for every point as fast.
  if (exact_share() > 0.0 && points.size() > 1) {
    const auto left = [&] {
      return std::chrono::duration<double>(s.certify_end - std::chrono::steady_clock::now()).count();
    };
    const double spacing = (points.back().measured.time_s - points.front().measured.time_s) / 64.0;
    std::vector<double> solved;
    // Below half a second CBC's root LP on a few hundred operations is barely done.
    while (left() >= 0.5) {
      std::optional<std::size_t> widest;
      double widest_gap = options.certify_target_gap;
      for (std::size_t i = 0; i < points.size(); ++i) {
        const double t = points[i].measured.time_s;
        if (std::any_of(solved.begin(), solved.end(), [&](double d) { return std::abs(d - t) < spacing; })) continue;
        const auto bound = with_exact(t, final_bound(t));
        if (!bound || *bound <= 0.0) continue;
        if (const double gap = points[i].measured.energy_j / *bound - 1.0; gap > widest_gap) {
          widest_gap = gap;
          widest = i;
        }
      }
      if (!widest) break;
      const double deadline = points[*widest].measured.time_s;
      solved.push_back(deadline);
      const double seconds = std::min(left(), std::max(options.certify_exact_point_seconds, left() / 3.0));
      const ExactOptions exact_options{.time_limit_s = seconds, .start = points[*widest].option_choice()};
      std::optional<OptionChoice> cheaper;
      try {
        if (options.certify_exact_priced) {
          // The price: the bound's slope there (effective energy per second saved), from the
          // bound either side; any price >= 0 gives a valid line, this one touches here.
          const double h = std::max(spacing / 64.0, 1e-9);
          const auto below = final_bound(deadline - h), above = final_bound(deadline + h);
          const double price =
              below && above ? std::max(0.0, ((*below - *above) / (2.0 * h)) + blocking_w) : 0.0;
          const std::optional<PricedExactSolution> exact = solve_exact_priced(problem, price, exact_options);
          ++frontier.certify_exact_solves;
          if (!exact) continue;
          frontier.certify_exact_seconds += exact->seconds;
          if (std::isfinite(exact->line_j)) exact_lines.add({0.0, exact->line_j, -price});
          if (exact->improved) cheaper = exact->choice;
        } else {
          const std::optional<ExactSolution> exact = solve_exact(problem, deadline, exact_options);
          ++frontier.certify_exact_solves;
          if (!exact) continue;
          frontier.certify_exact_seconds += exact->seconds;
          if (std::isfinite(exact->lower_bound_j)) exact_bounds.emplace_back(deadline, exact->lower_bound_j - blocking_w * deadline);
          if (exact->improved) cheaper = exact->choice;
        }
      } catch (const InputError&) {
        break;  // CBC cannot be loaded, or the model is larger than it is allowed to be
      }
      if (cheaper) {
        ++frontier.certify_exact_improved;
        points.push_back(make_point(problem, *cheaper));
        points = pareto_filter(std::move(points));
      }
    }
  }
  for (FrontierPoint& point : points) {
    const auto lines = final_bound(point.measured.time_s);
    const auto bound = with_exact(point.measured.time_s, lines);
    if (bound && (!lines || *bound > *lines)) ++frontier.certify_exact_raised;  // an exact solve's, at a deadline no faster
    if (bound && (!point.lower_bound_j || *bound > *point.lower_bound_j)) point.lower_bound_j = bound;
    // A plan's own energy caps its bound: where the bound is tight, rounding in the sum of
    // lines (thousands of joules, cancelling), or in an LP solve's optimum that a point kept
    // from the refinement, can leave it a hair above.
    if (point.lower_bound_j) point.lower_bound_j = std::min(*point.lower_bound_j, point.measured.energy_j);
  }
  // T_min's bound, where its relaxation was not solved (t_min_relaxation_budgets): the best
  // line's there, mostly the crawl's flows'; and the exact MILP's, where it is higher.
  if (!points.empty() && points.front().measured.time_s <= t_min + kTimeEpsilon && points.front().lower_bound_j &&
      (!frontier.t_min_lower_bound_j ||
       ((!exact_bounds.empty() || !exact_lines.empty()) && *points.front().lower_bound_j > *frontier.t_min_lower_bound_j))) {
    frontier.t_min_lower_bound_j = points.front().lower_bound_j;
  }
  for (const SupportingLines* set : {&lines, &crawl_lines, &flow_lines, &exact_lines}) {
    frontier.bound_lines.insert(frontier.bound_lines.end(), set->lines().begin(), set->lines().end());
  }
}

}  // namespace perseus
