// The user-facing frontier: crawl points turned into plans on the measured options,
// improved where the crawl's quantised, fitted view left energy on the table (refine.hpp),
// and kept only where Pareto-optimal in measured time and effective energy.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "perseus/solver/crawl.hpp"
#include "perseus/solver/problem.hpp"
#include "perseus/solver/refine.hpp"
#include "perseus/solver/relaxation.hpp"

namespace perseus {

struct FrontierPoint {
  std::vector<std::uint16_t> choice;  // option index per DAG node (compact OptionChoice)
  MeasuredFigures measured;           // what the plan really takes on the measured data
  double effective_energy_j = 0.0;    // energy - p_blocking * S * time: the part above idling
  std::int64_t crawl_step = -1;       // crawl step its plan was derived from; -1 for an end point
  std::int64_t planned_time_q = -1;   // the crawl's planned (quantised) time, -1 if none
  double fitted_energy_j = 0.0;       // the reference's figure for that crawl step (0 if none)
  // A proven lower bound on the energy of any plan at this point's time: the greatest of the
  // LP relaxation's supporting lines there (relaxation.hpp). Every point of a refined
  // frontier has one.
  std::optional<double> lower_bound_j;

  OptionChoice option_choice() const { return {choice.begin(), choice.end()}; }
};

struct Frontier {
  // Pareto-optimal in (measured time, effective energy), fastest (T_min) first.
  std::vector<FrontierPoint> points;
  MeasuredFigures all_max;            // every instruction at its highest clock (evaluate_highest_clock)
  // A proven lower bound on the energy of any plan as fast as T_min (refining only).
  std::optional<double> t_min_lower_bound_j;
  // Whether that bound is T_min's LP relaxation's (and the T_min plan rounded from it); on large
  // DAGs it is skipped (FrontierOptions::t_min_relaxation_budgets) and the bound is the crawl's
  // supporting lines'.
  bool t_min_relaxation_solved = false;
  std::size_t candidates = 0;         // plans considered before the Pareto filter
  // The bounded part of the refinement (FrontierOptions::refine_*): its budget and the work it
  // took, in passes over the DAG (PlanRefiner::work); the work may exceed the budget by one
  // local-search move.
  double refine_budget = 0.0;
  double refine_work = 0.0;
  double lp_seconds = 0.0;            // of the refinement and certification, in LP relaxation solves
  bool certified = false;             // whether the certification ran (FrontierOptions::certify)
  int certify_solves = 0;             // LP solves of the certification (FrontierOptions::certify_*)
  double certify_seconds = 0.0;       // time the certification took
  // The relaxation crawled on the measured hull (FrontierOptions::bound_crawl_node_steps):
  // its steps (0: not run) and the candidate plans rounded from its states.
  std::size_t hull_crawl_steps = 0;
  std::size_t hull_crawl_plans = 0;
  // The LP swept over the points furthest above their bounds (certify_sweep_*): its solves.
  std::size_t certify_sweep_solves = 0;
  // The LP swept beside the crawl (FrontierOptions::crawl_sweep_*): its solves, and the
  // points whose plan its interpolated durations improved.
  std::size_t crawl_sweep_solves = 0;
  std::size_t crawl_sweep_improved = 0;
  // 1 where the local search at iso-time (FrontierOptions::iso_search_rounds) found a cheaper plan.
  std::size_t iso_searched = 0;
  // The exact MILP at iso-time (FrontierOptions::exact_iso_seconds), where it ran: its
  // seconds, whether its plan was cheaper than the frontier's there, and its proven bound at
  // iso-time (energy, the GPUs blocking until then), if it had one.
  double exact_seconds = 0.0;
  bool exact_improved = false;
  std::optional<double> exact_lower_bound_j;
  // With --certify's seconds, the exact MILP at the points furthest above their bounds
  // (FrontierOptions::certify_exact_share): its solves, their seconds, the cheaper plans it
  // found, and the points whose final bound an exact solve raised above the LP's (the
  // iso-time solve's included).
  std::size_t certify_exact_solves = 0;
  double certify_exact_seconds = 0.0;
  std::size_t certify_exact_improved = 0;
  std::size_t certify_exact_raised = 0;
  // Small DAGs: the times of the loose points searched (docs/solver.md, "Loose points"), in
  // the order searched, and the least distance kept between them.
  std::vector<double> loose_searched_s;
  double loose_spacing_s = 0.0;
  // Small DAGs: the times of the fine searches after the gap fills (FrontierOptions::
  // fine_search_*), in the order searched, and the least distance kept between them.
  std::vector<double> fine_searched_s;
  double fine_spacing_s = 0.0;
  // Points given a round of local search by the certification (certify_search_points).
  std::size_t certify_searches = 0;
  // Faster points given a worst-gap solve's plan, repaired to their time (certify_chain_*).
  std::size_t certify_chained = 0;
  // Points given their slower neighbour's plan, repaired to their time (certify_carry_down_*).
  std::size_t certify_carried_down = 0;
  // LP solves made for the bound alone, where it could lie furthest below the LP optimum
  // (certify_sandwich_*; also counted in certify_solves).
  std::size_t certify_sandwich_solves = 0;
  // Points whose plan the final polish's LP solves mended (certify_polish_*).
  std::size_t certify_polished = 0;
  // Of the worst-gap and polish solves, those made ahead on the helper thread and used
  // (certification.cpp): the same solves as one after another, in less time.
  std::size_t certify_solved_ahead = 0;
  // Those made ahead and not used: the next target had changed (a chain or carry had
  // mended the one foreseen), so it was solved anew.
  std::size_t certify_ahead_discarded = 0;
  // With more certification effort (FrontierOptions::default_effort): the points whose plan
  // came from the frontier of the default effort, cheaper there (FrontierBuilder::offer).
  std::size_t default_effort_points = 0;
  // The supporting lines of the LP relaxation behind the bounds (its solves', the hull
  // crawl's, the crawl's flows'): each bounds the energy at every deadline, so another
  // frontier of the same problem may take them (FrontierBuilder::offer).
  std::vector<SupportingLine> bound_lines;

  const FrontierPoint& t_min_point() const { return points.front(); }
  // The slowest point: the least effective energy, the minimum-energy schedule of T*, what a
  // pipeline runs while it waits for a straggler at least that slow.
  const FrontierPoint& t_star_point() const { return points.back(); }
  // The point of least energy per iteration (blocking inside it included), what a job with
  // no deadline and no straggler would run. Not T*: slowing down past it still saves
  // effective energy, which pays only when the GPUs would block anyway.
  const FrontierPoint& least_energy_point() const;
};

struct FrontierOptions {
  // Improve the crawl's plans on the measured options (off: its plans as they are, as the
  // reference would run them).
  bool refine = true;
  // DAGs of at most this many nodes get, at every frontier point, the LP relaxation's plan,
  // and local searches (PlanRefiner::local_search) within the work budget below; 0 turns it
  // off. Larger pipelines reclaim slack and get the LP relaxation's plan at T_min.
  std::size_t local_search_max_nodes = 64;
  // Of those, at most this many frontier points (evenly spread) get the relaxation's plan in
  // the forward pass; the others start from their neighbour's plan. (At 1,024, every point of
  // a 64-node pipeline had its own solve, which took as long as the search beside it and was
  // no better: docs/solver.md, "Refinement, bounded".)
  std::size_t local_search_max_points = 256;
  // Crawl plans, the fastest first, repaired to the all-max time as candidates for T_min.
  std::size_t t_min_repairs = 8;
  // With the local search: where two neighbouring points differ by more than this share of
  // energy, deadlines in between get plans of their own (at most max_fills_per_gap a gap).
  double max_energy_step = 0.0005;
  int max_fills_per_gap = 8;
  // Deadlines between the crawl's slowest plan and the slowest plan of all that get plans
  // of their own (the crawl plans with the reference's options only; slower clocks that
  // still cost less than blocking lie beyond it).
  int fills_beyond_crawl = 64;
  // With the local search, last before the certification: the points still furthest above
  // their bound, at least fine_search_spacing of the span apart, get two rounds of local
  // search from their own plan, screened by the LP's prices there, within fine_search_share
  // of the refinement's budget on top of it (so the budget reported, Frontier::refine_budget,
  // is 1 + fine_search_share times the rest's). On the optimality bench's 4-stage pipelines it
  // took the worst deadline from 0.170% above CBC's plan to 0.070%, for 1.2-1.3x the time on
  // 64 nodes (docs/solver.md, step 7, "Fine searches"). 0: none.
  double fine_search_share = 0.3;
  double fine_search_spacing = 0.001;
  // Bound on the refinement beyond reclaiming slack from the crawl's plans (repairs, the LP
  // relaxation, the local search), in passes over the DAG (PlanRefiner::work): the larger of
  // refine_visits_min / (nodes + edges + 35) and refine_work_per_crawl_step per unit of the
  // crawl's length (T* - T_min in units: its step count when it reaches T_min, known before
  // it starts).
  // Counted, not timed, so the same input gives the same plans on any machine. The defaults
  // keep a solve within about max(0.5 s, 3x its --no-refine time) on a 2-core machine
  // (docs/solver.md, "Refinement, bounded").
  double refine_visits_min = 1.2e8;
  // In its place where the DAG gets the local search, whose forward pass searches every
  // point: about 630,000 passes on 64 nodes. (3.6e8 before: 2.8x the time for plans no
  // better against CBC's; docs/solver.md, "What the budget buys".)
  double search_visits_min = 1.3e8;
  double refine_work_per_crawl_step = 5.0;
  // Threads of the refinement (one beside the crawl, in solve(); the crawl's plans reclaimed
  // and the inheritance pass precomputed on all of them); 0: as many as the machine has, at
  // most 4. The plans do not depend on it.
  unsigned threads = 0;
  // Certification at all (docs/solver.md, "Certified frontier"): false skips the hull crawl
  // and the LP sweep beside the crawl and, after it, every certification step but the last
  // (the iso-time plan, and each point's bound from the lines of the LP solves made anyway:
  // T_min's, T*'s, the grid's, the iso-time solve's, the crawl's flows). Faster (the 16
  // published cases 1.6x, the small A100 ones 3-4x), with wider gaps and, where the
  // certification's plans would have been cheaper, dearer plans.
  bool certify = true;
  // Certification (docs/solver.md, "Certified frontier"): after refining, LP solves at the
  // points furthest above the bound the solves so far prove (T*'s first), each offering its
  // rounded plan there: certify_solves of them, or as many as certify_work_share times the
  // refinement's budget pays for if fewer (at least one; counted, so the same input gets the
  // same plans and bounds on any machine), then more while certify_seconds lasts; it stops
  // early once every point is within certify_target_gap of its bound.
  int certify_solves = 8;
  // Large DAGs: LP solves at deadlines spread between T_min and T* while the crawl runs (as
  // many as half of its length pays for, at most this many), each a supporting line and a
  // rounded plan. Deadline j of n lies (j / (n + 1))^fast_end_power of the way from T_min:
  // crowded towards T_min, where the frontier is steepest and the crawl's plans furthest
  // from their bounds (1: evenly spread; docs/solver.md, "Certified frontier").
  int certify_grid_max = 16;
  double fast_end_power = 2.0;
  // DAGs of crawl_sweep_min_nodes to crawl_sweep_max_nodes: the LP also swept while the
  // crawl runs, warm-started (WarmLpRelaxation), over deadlines
  // from T_min towards T* crowded towards T_min as the grid's are, on the second thread
  // where it would otherwise wait for the crawl's steps. The deadlines are as many as
  // crawl_sweep_share of the crawl's counted passes pays for at the usual pivots, at most
  // crawl_sweep_max, none under crawl_sweep_min (the crawl would end first); they are solved
  // fastest first while their counted work (a fixed part and their pivots) lasts. Each solve
  // is a supporting line; then every crawl_sweep_offer_stride-th point still more than
  // certify_sweep_gap above its bound is offered the durations of the solves either side
  // interpolated to its time, rounded down, its slack reclaimed, before the certification's
  // solves. Not below 512 nodes: on 384 the certification's own sweep reaches the far points,
  // and this one moved medians and worsts both ways (docs/solver.md, "The LP swept beside
  // the crawl"). 0: none, the default since the certification's sweep reaches 1,536 nodes:
  // with both, no median or worst gap of the 16 published frontiers was lower by more than
  // 0.003 points than with the certification's alone, for 15% more CPU (docs/solver.md).
  double crawl_sweep_share = 0.0;
  int crawl_sweep_min = 32;
  std::size_t crawl_sweep_min_nodes = 512;
  int crawl_sweep_max = 512;
  std::size_t crawl_sweep_max_nodes = 2048;
  int crawl_sweep_offer_stride = 8;
  // Beside the crawl, the LP relaxation crawled on the measured hull (bound_crawl.hpp), a
  // supporting line per step for every point's final bound, and the states the plans below
  // are rounded from: in this many node-steps (its steps times the DAG's nodes, from 64 to
  // 2,048 steps; a step costs about what one of the frontier's crawl does). 0: none, the LP
  // solves' lines alone and no plans from it (docs/solver.md, "Certified frontier").
  double bound_crawl_node_steps = 4e5;
  // Beyond the local search's DAGs: that crawl's durations rounded to options at states
  // crowded towards T_min (hull_plan_fast_end_power, as the grid's deadlines are; see
  // crawl_relaxation), each made to meet its time (PlanRefiner::repair) as a candidate plan:
  // in this many node-states (states times the DAG's nodes, 16 to 128 states), on DAGs of at
  // most hull_plan_max_nodes (a repair's cost grows with the DAG faster than the work counts
  // it: on 1,536 nodes 16 of them doubled the frontier's time and improved nothing), coarse
  // to fine while the repairs' work stays within hull_plan_work_share of the refinement's
  // budget. 0: none.
  double hull_plan_node_states = 24576;
  std::size_t hull_plan_max_nodes = 768;
  double hull_plan_work_share = 0.25;
  double hull_plan_fast_end_power = 3.0;
  double certify_work_share = 2.0;
  // T_min's relaxation (its rounded plan, a local search from it on small DAGs, and T_min's
  // bound) is solved where one LP solve's counted work is at most this many refinement
  // budgets. Beyond, on DAGs of thousands of nodes, that one solve near T_min, where nearly
  // every path is tight, took longer than everything else together (some 100 s of 170 s on
  // gpt3-175b over 1,024 A100s: 24,576 nodes, 130 budgets), and T_min keeps the crawl's
  // plans repaired to it; T*'s solve, fast there, still bounds every point. Infinity: always.
  double t_min_relaxation_budgets = 2.0;
  // Seconds beyond the default effort (certify_for): timed, not counted. The certification's
  // LP rounds get up to a quarter of them, its other raised steps (the worst-gap solves, the
  // interpolations, the sweep, the searches, the polish, the carry down and the bound-only
  // solves) stop once half are gone, and the exact MILP takes the rest (certify_exact_share;
  // where it does not run, the LP side has them all). They count from the certification's
  // start, or from FrontierBuilder::certify_from (solve(): the crawl's end).
  double certify_seconds = 0.0;
  double certify_target_gap = 0.0005;
  // Of certify_seconds, on DAGs of at most certify_exact_max_nodes, this share goes to the
  // exact MILP (exact_milp.hpp) at the points still furthest above their bounds once the
  // rest of the certification is done, widest first, each started from its point's plan and
  // given at least certify_exact_point_seconds (a third of what is left where more): a
  // cheaper plan where CBC finds one, and a bound at that deadline that also holds for every
  // point as fast. The LP's extra rounds get the rest. Where the LP's rounded plans stop
  // helping (on gpt3-175b A40 8 x 24, 1,312 and 1,738 solves left the worst gap at 1.35%),
  // the MILP still finds cheaper plans on DAGs of a few hundred operations (docs/solver.md,
  // "The exact MILP at the widest gaps"). Timed, as certify_seconds is. 0: none.
  double certify_exact_share = 0.5;
  std::size_t certify_exact_max_nodes = 1536;
  double certify_exact_point_seconds = 2.0;
  // The MILP with the iteration time priced at the bound's slope there rather than the
  // deadline fixed (exact_milp.hpp, solve_exact_priced): its bound is a line that holds at
  // every deadline, where the fixed deadline's holds there and faster only. Off: on 8 x 12
  // and 8 x 24 pipelines at --certify 5 the worst gaps came out within 0.06 points either way,
  // and where CBC proves the optimum (tiny pipelines) the fixed deadline closes the widest gap
  // and the line, which touches the discrete frontier's convex hull, does not
  // (docs/solver.md, "Priced deadlines").
  bool certify_exact_priced = false;
  // Then up to this many solves where a point is still above its bound by more than
  // certify_worst_gap, widest first (docs/solver.md, "Certified frontier"). 0: none.
  int certify_worst_solves = 8;
  double certify_worst_gap = 0.005;
  // Each of those solves whose rounded plan mends its point also carries that plan to faster
  // points, repaired to each in turn a certify_chain_step_share of the span apart while each
  // repair saves at least certify_chain_min_saving of the point's energy: at most
  // certify_chain_repairs repairs in all (counted, not timed). On bloom-176b A40 8 x 96 that
  // took the worst gap from 4.2% to 1.6% (docs/solver.md, "Certified frontier"). 0: none.
  int certify_chain_repairs = 16;
  double certify_chain_step_share = 1.0 / 256.0;
  double certify_chain_min_saving = 0.003;
  // Only from a point the solve's plan leaves at least this far above its bound (0: from every
  // one it mends). Where the LP's rounding comes that close, the sweep's roundings after it
  // mend the faster points as well: on the A100 cases the chains moved no median and lowered
  // no worst, and cost up to 0.29 s a case on 1,536 nodes; on the A40 cases, where the
  // targets mostly stay 0.5-2.3% above, they lower the worsts by up to 2.2 points (docs/solver.md,
  // "Chains where the rounding stays far").
  double certify_chain_min_gap = 0.005;
  // Last of all, after the inheritance below, up to certify_polish_points points still
  // furthest above their bounds (a 64th of the span apart), on DAGs of certify_polish_min_nodes
  // to certify_polish_max_nodes, get an LP solve each, its rounded plans offered there,
  // inherited by slower points and repaired to faster ones (at most
  // certify_polish_chain_repairs repairs each). 0: none. Not below 256 nodes: on 192 the
  // sweep reaches most far points already, and the polish moved worsts by 0.01-0.03 points
  // for 2-7% more time; not above 768: on 1,536 nodes two solves cost a third more time for
  // little (docs/solver.md, "Certified frontier").
  int certify_polish_points = 4;
  std::size_t certify_polish_min_nodes = 256;
  std::size_t certify_polish_max_nodes = 768;
  int certify_polish_chain_repairs = 4;
  // Then, at points still above it, the solved deadlines' relaxed durations either side
  // interpolated, rounded and repaired, the widest first, while the repairs' work stays
  // within this share of the refinement's budget. 0: none, the default: on bloom 8 x 12 a
  // quarter made the whole command 0.22 -> 0.37 s (`perseus optimize --certify` sets 0.25).
  double certify_interpolation_share = 0.0;
  // Last, on DAGs of at most certify_sweep_max_nodes, the LP swept over the points still more
  // than certify_sweep_gap above their bound, fastest first (where they crowd), each solve
  // resumed from the last one's tree (LpRelaxation::solve_next): a solve at every
  // certify_sweep_stride-th of them, the points between interpolated from the solves either
  // side, each rounded down to options and its slack reclaimed (no repair), while the solves
  // (a fixed charge each) and reclaims stay within certify_sweep_share of the
  // refinement's budget. Each solve also adds a supporting line. 0: none. Every fourth point:
  // at every second the sweep ran out of budget halfway on 384 and 768 nodes (docs/solver.md).
  double certify_sweep_share = 2.0;
  double certify_sweep_gap = 0.001;
  int certify_sweep_stride = 4;
  // Up to 1,536 nodes (the published cases of 96 microbatches; 768 before the solves resumed
  // from the last tree): there the frontier's plans lay a median 0.3-0.45% above the LP
  // optimum, its rounded plans 0.09% (docs/solver.md, "The sweep from the last tree").
  std::size_t certify_sweep_max_nodes = 1536;
  // From certify_sweep_wide_from_nodes, a solve every (stride x factor)-th far point within
  // (share x factor): on 768 nodes, at every fourth point the budget ran out after 32 solves,
  // at the fastest 128 of some 1,500 far points, and the frontier's middle kept plans 0.3-0.9%
  // above the LP; interpolated over 16 points the solves reach them all (medians 0.25-0.34% ->
  // 0.10-0.19%, 0-0.2 s more). On 384 nodes the same moved medians both ways
  // (docs/solver.md, "Certified frontier"). Every eighth since the solves resume from the
  // anchors' trees (a third of the time): on the four cases of 768 nodes, medians
  // 0.085-0.200% at every sixteenth -> 0.080-0.175% (every fourth: 0.079-0.171%, 0.2 s more).
  // From twice certify_sweep_wide_from_nodes the stride widens by the factor once more, within
  // the same share: on 1,536 nodes the far points (2,000-2,500) outnumber the share's solves
  // again (bloom-176b A100 8 x 96: median 0.25% at every eighth, 0.13% at every sixteenth).
  std::size_t certify_sweep_wide_from_nodes = 512;
  int certify_sweep_wide_factor = 2;
  // The fastest this many far points keep the narrow stride: near T_min the LP's curve bends
  // most, and there the wide stride's interpolated plans were 0.1-0.25% dearer (bloom-176b
  // A100 8 x 48 at AllMax's time, the plan most users run: 0.13% above its bound -> 0.59%).
  std::size_t certify_sweep_dense_points = 128;
  // Then, on DAGs of at most certify_search_max_nodes (on 1,536 nodes one round cost
  // seconds and improved nothing; on 768, once the sweeps had run, 0.1-0.3 s a case and moved
  // no median and one worst, by 0.01 points), at most certify_search_points points still more than certify_worst_gap
  // above their bound, widest first, get a round of local search (PlanRefiner::local_search, every move,
  // screened by the LP's prices at the point: an LP solve each) from their plan, while it
  // stays within certify_search_share of the refinement's budget. Where the LP's rounding is
  // poor (bloom-176b A40 8 x 24, 2.3% above the bound both ways) it finds what CBC does in
  // seconds (0.4-1.0% against CBC's 0.3-0.5%). 0: none.
  int certify_search_points = 4;
  double certify_search_share = 0.5;
  std::size_t certify_search_max_nodes = 384;
  // Last of all, every point inherits its faster neighbour's plan, slack reclaimed, where that
  // is cheaper: on DAGs of at most certify_inherit_max_nodes. It costs a reclaim per point,
  // which on the DAGs `perseus plan` builds for 175B-class models (24,576 nodes, 7,000
  // points) took 3.2 s of a 21-s command and improved 1,300 plans by 0.005-0.02%.
  std::size_t certify_inherit_max_nodes = 4096;
  // Last of the certification, on DAGs of at most certify_carry_down_max_nodes: where a point
  // lies more than certify_carry_down_gap further above its bound than its slower neighbour,
  // it takes that neighbour's plan repaired to its time (PlanRefiner::repair), and so on to
  // faster points while that is cheaper, the largest such steps first, while the repairs stay
  // within certify_carry_down_share of the refinement's budget. On the 12 published cases of
  // up to 768 nodes it lowered every worst gap (bloom-176b A100 8 x 48 0.70% -> 0.59%,
  // gpt3-175b A40 8 x 48 2.32% -> 2.01%) in 12-85 ms a case; on 1,536 nodes a repair costs
  // more than the work counts (0.25 s more on each A40 case, for one worst gap 0.07 points
  // lower). 0: none (docs/solver.md, "Carried down").
  double certify_carry_down_share = 0.1;
  double certify_carry_down_gap = 0.0005;
  std::size_t certify_carry_down_max_nodes = 768;
  // Last of all, the bound where it may lie furthest below the LP optimum v: between two
  // solved deadlines v lies under the chord of its two values (v is convex) and under every
  // plan's effective energy, and over the lines. Where that window is widest, more than
  // certify_sandwich_gap of the point's energy, the LP is solved (its line joins the bound),
  // at most certify_sandwich_solves times. Lines only: the plans are those of the steps
  // before. On 1,536 nodes, where the counted solves are few, the bounds of the slow end lay
  // up to 0.58% below v (bloom-176b A100 8 x 96); elsewhere within 0.05%. 0: none.
  int certify_sandwich_solves = 8;
  double certify_sandwich_gap = 0.0002;
  // After the certification, on DAGs of at most iso_search_max_nodes, the cheapest plan at the
  // all-max plan's time (iso-time: the plan most users run; T_min where the all-max plan is the
  // fastest) gets this many rounds of local search, screened by the LP's prices there, within
  // iso_search_share of the refinement's budget. On bloom-176b A40 8 x 12 one round took it from 0.310% to 0.232%
  // above the LP in 3 ms, on 8 x 24 from 0.521% to 0.472% in 65-79 ms; on 768 nodes one round
  // took 0.27 s for 0.014 points (probes). 0: none.
  int iso_search_rounds = 1;
  double iso_search_share = 0.5;
  std::size_t iso_search_max_nodes = 384;
  // Then, where above 0, at most this many seconds of the exact MILP at iso-time
  // (exact_milp.hpp), started from the cheapest plan there: its plan where cheaper, and its
  // bound for every point as fast as iso-time (the least effective energy does not fall as the
  // deadline does). Timed, so what it finds depends on the machine; off by default. On
  // bloom-176b A40 8 x 24, 10 s took the iso-time plan 0.19% lower (docs/solver.md, "The exact
  // MILP at a chosen deadline").
  double exact_iso_seconds = 0.0;
  // The LP's durations are also rounded down to the corners of each operation's hull
  // (round_down_to_corners) and that plan, slack reclaimed, offered beside the rounded-down and
  // rounded-up plans wherever the LP's plans are (the solves' and the sweeps'). Near T_min on
  // the A40 profiles the clocks just below the highest take up to 2 ms more for almost no
  // energy, and plain rounding spends the slack on them: on gpt3-175b A40 8 x 48 the plan at
  // T_min came 0.889% above its bound, 0.699% with this candidate (docs/solver.md).
  bool round_to_hull_corners = true;
  std::function<void(std::size_t done, std::size_t total)> progress;
  // Set by certify_for: the options as they were before it raised the effort. solve() also
  // builds that frontier from the same crawl and keeps the cheaper plan at every deadline
  // (FrontierBuilder::offer), and its supporting lines join the bounds (Frontier::bound_lines),
  // so no bound is looser than the default's either. The certification's steps are greedy,
  // each choosing its targets from what the last left, so more effort is not cheaper
  // everywhere: alone, `--certify 1` had
  // dearer plans than the default at 9-38% of the deadlines, by up to 0.1-0.4%, on four
  // published cases, and `--certify 3` on gpt3-175b A40 8 x 96 at 9%, by up to 1.7%.
  std::shared_ptr<const FrontierOptions> default_effort;

  // More certification effort, as `perseus optimize --certify SECONDS` and the Python
  // package's certify_seconds ask for it: those seconds of extra solves and, when above 0,
  // T_min's relaxation whatever it costs, the interpolated relaxations (a quarter of the
  // budget) and a longer LP sweep (8 times the budget) and local search at up to 32 points
  // (within 4 times it), both also on DAGs of 1,536 nodes, the inheritance on any DAG, up
  // to 64 repairs carrying the worst-gap solves' plans to faster points, a final polish
  // at 16 points on any DAG of up to 1,536 nodes, and the carry down within the whole budget
  // on DAGs of up to 1,536 nodes. Of the seconds, certify_exact_share goes to the exact MILP
  // at the widest gaps (on DAGs of up to certify_exact_max_nodes).
  FrontierOptions& certify_for(double seconds) {
    if (seconds > 0 && !default_effort) {
      FrontierOptions as_it_was = *this;
      default_effort = std::make_shared<const FrontierOptions>(std::move(as_it_was));
    }
    certify_seconds = seconds;
    if (seconds > 0) {
      certify = true;
      t_min_relaxation_budgets = std::numeric_limits<double>::infinity();
      certify_interpolation_share = std::max(certify_interpolation_share, 0.25);
      certify_sweep_share = std::max(certify_sweep_share, 8.0);
      certify_sweep_max_nodes = std::max<std::size_t>(certify_sweep_max_nodes, 1536);
      certify_search_points = std::max(certify_search_points, 32);
      certify_search_share = std::max(certify_search_share, 4.0);
      certify_search_max_nodes = std::max<std::size_t>(certify_search_max_nodes, 1536);
      certify_inherit_max_nodes = std::numeric_limits<std::size_t>::max();
      certify_chain_repairs = std::max(certify_chain_repairs, 64);
      certify_chain_min_gap = 0.0;
      certify_polish_points = std::max(certify_polish_points, 16);
      certify_polish_min_nodes = 0;
      certify_polish_max_nodes = std::max<std::size_t>(certify_polish_max_nodes, 1536);
      certify_carry_down_share = std::max(certify_carry_down_share, 1.0);
      certify_carry_down_max_nodes = std::max<std::size_t>(certify_carry_down_max_nodes, 1536);
      certify_sandwich_solves = std::max(certify_sandwich_solves, 32);
    }
    return *this;
  }
};

// Candidates: the all-slowest plan, every distinct crawl plan and the all-fastest plan.
// Refining, each candidate reclaims slack at its own measured time; the last crawl plans
// repaired to the all-max time and the LP relaxation's plan there are T_min candidates;
// small DAGs then get, at every frontier point, the fastest first, a local search from
// the best of its own plan, the previous point's improved plan and the LP relaxation's.
Frontier build_frontier(const EnergyProblem& problem, const CrawlResult& crawl,
                        const FrontierOptions& options = {});

// build_frontier while the crawl runs. On two cores and more, a second thread takes the
// crawl's steps as they come (add_step, from CrawlOptions::on_step) and reclaims each new
// plan, and first does what needs no crawl: the plans beyond the crawl's slowest, the LP
// relaxation's plan and bound at T_min, and (large DAGs) the relaxation at T*, the
// certification's first solve. finish() does the rest. The frontier is build_frontier's,
// whatever the threads (every bound on the refinement is counted work, not time).
class FrontierBuilder {
 public:
  // beside_crawl: use a second thread (if options.threads allows more than one).
  FrontierBuilder(const EnergyProblem& problem, const FrontierOptions& options, bool beside_crawl);
  ~FrontierBuilder();  // stops the second thread (a crawl that threw leaves it waiting)
  FrontierBuilder(const FrontierBuilder&) = delete;
  FrontierBuilder& operator=(const FrontierBuilder&) = delete;
  // Steps in crawl order, from the crawl's thread.
  void add_step(std::size_t index, const CrawlStep& step, std::span<const DurationChange> changes);
  // The crawl's flows (CrawlOptions::on_flow, at every flow_every()-th step), from its
  // thread: each, as prices of time, is a supporting line of the LP relaxation by the
  // Lagrangian bound (LagrangianBound), which the certification's final bounds take where it
  // is higher than the rest. Free beside LP solves (one pass over the DAG each); near T_min
  // they lie about 0.2-0.8% below the relaxation's optimum (docs/solver.md, "Certified
  // frontier"). Plans do not depend on them.
  void add_flow(const CrawlFlow& flow);
  std::size_t flow_every() const;
  // Plans of this problem (another frontier's points) that join the refined frontier's
  // candidates at its last Pareto filter, after the certification, and get its bounds there:
  // where one is cheaper than the frontier's plan at its deadline, it stays
  // (Frontier::default_effort_points counts those). Before finish().
  void offer(std::vector<FrontierPoint> points);
  // Another frontier of this problem: its points as above, and its bound_lines, which join
  // this frontier's final bounds (no point's bound is then looser than that frontier's at
  // its time).
  void offer(Frontier other);
  // With FrontierOptions::certify_seconds: count them from `start`, not from the
  // certification's start. solve() gives the crawl's end, so that the default effort's
  // frontier (built after the crawl to keep its plans where cheaper), the raised effort's
  // refinement and its certification all fit in --certify's seconds. Before finish().
  void certify_from(std::chrono::steady_clock::time_point start);
  // After the crawl's last step: the frontier. Rethrows what the second thread threw.
  Frontier finish(const CrawlResult& crawl);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// How far a frontier's plans are from their proven lower bounds (energy / bound - 1).
struct Certificate {
  std::size_t bounded_points = 0;
  double median_gap = 0.0;
  double worst_gap = 0.0;
};
Certificate certificate(const Frontier& frontier);

// The plan to run when the iteration may take up to `deadline_s` (a straggler's time T'):
// the slowest frontier point no slower than T_opt = min(T*, deadline), found by binary
// search in `times_fastest_first` (a frontier's times, ascending; the last is T*).
// nullopt if even T_min is slower than the deadline; InputError unless deadline_s > 0 (NaN
// included; infinity means T*).
std::optional<std::size_t> select_for_deadline(const std::vector<double>& times_fastest_first,
                                               double deadline_s);
const FrontierPoint* select_for_deadline(const Frontier& frontier, double deadline_s);

// Energy of running `point` in an iteration stretched to `iteration_s` >= its time: the
// wait is spent blocking (docs/solver.md, "Iteration energy"). InputError for a negative,
// infinite or NaN iteration_s.
double energy_at(const EnergyProblem& problem, const FrontierPoint& point, double iteration_s);
// The same for any plan's measured figures.
double energy_at(const EnergyProblem& problem, const MeasuredFigures& measured, double iteration_s);

}  // namespace perseus
