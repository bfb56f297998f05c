// PlanRefiner and LpRelaxation: every plan they return meets its deadline and costs no
// more than where it started; the relaxation's bound never exceeds the exact optimum
// (exhaustive search on tiny pipelines) and matches the closed form on a chain.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <limits>
#include <random>
#include <span>

#include <lemon/preflow.h>
#include <lemon/smart_graph.h>

#include "brute_force.hpp"
#include "perseus/solver/bound_crawl.hpp"
#include "perseus/solver/crawl.hpp"
#include "perseus/solver/refine.hpp"
#include "perseus/solver/relaxation.hpp"
#include "synthetic.hpp"

namespace perseus {
namespace {

OptionChoice random_choice(const EnergyProblem& problem, std::mt19937& rng) {
  OptionChoice choice(problem.dag.num_nodes());
  for (std::size_t i = 0; i < choice.size(); ++i) {
    const auto options = static_cast<int>(problem.options_of(static_cast<Dag::NodeId>(i)).options.size());
    choice[i] = std::uniform_int_distribution<int>(0, options - 1)(rng);
  }
  return choice;
}

double effective(const EnergyProblem& problem, const OptionChoice& choice) {
  const MeasuredFigures f = evaluate_measured(problem, choice);
  return f.energy_j - problem.p_blocking * problem.num_gpus() * f.time_s;
}

TEST(PlanRefiner, ReclaimSlackKeepsTheDeadlineAndNeverCostsMore) {
  const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 4, 6, 1, false}, 12, 5);
  const PlanRefiner refiner(problem);
  std::mt19937 rng(1);
  for (int trial = 0; trial < 50; ++trial) {
    const OptionChoice plan = random_choice(problem, rng);
    const double time = evaluate_measured(problem, plan).time_s;
    for (const double deadline : {time, time * 1.05}) {
      const OptionChoice reclaimed = refiner.reclaim_slack(plan, deadline);
      EXPECT_LE(evaluate_measured(problem, reclaimed).time_s, deadline + 1e-9);
      EXPECT_LE(effective(problem, reclaimed), effective(problem, plan) + 1e-9);
    }
    // A plan that misses the deadline comes back as it is.
    EXPECT_EQ(refiner.reclaim_slack(plan, time * 0.99), plan);
  }
}

// reclaim_slack as its header states it, every pass done in full: alternate backward sweeps
// (last operation first, each to its cheapest option between its earliest start and its
// successors' latest start) and forward sweeps, until a round changes nothing.
OptionChoice plain_reclaim(const EnergyProblem& problem, OptionChoice choice, double deadline) {
  const Dag& dag = problem.dag;
  const auto& order = dag.topological_order();
  const auto time = [&](Dag::NodeId v, std::int32_t k) { return problem.options_of(v).options[k].measurement.time_s; };
  const auto effective = [&](Dag::NodeId v, std::int32_t k) {
    const Measurement& m = problem.options_of(v).options[k].measurement;
    return m.energy_j - problem.p_blocking * m.time_s;
  };
  // The cheapest option within the window (the fastest of equally cheap ones), if strictly cheaper.
  const auto cheapest_within = [&](Dag::NodeId v, std::int32_t current, double window) {
    std::int32_t best = -1;
    const auto count = static_cast<std::int32_t>(problem.options_of(v).options.size());
    for (std::int32_t k = 0; k < count; ++k) {
      if (time(v, k) > window + 1e-9) continue;
      if (best < 0 || effective(v, k) < effective(v, best) ||
          (effective(v, k) == effective(v, best) && time(v, k) < time(v, best))) {
        best = k;
      }
    }
    return best >= 0 && effective(v, best) < effective(v, current) - 1e-12 ? best : current;
  };
  const std::size_t n = dag.num_nodes();
  std::vector<double> earliest(n), latest_start(n);
  for (int sweep = 0; sweep < 8; ++sweep) {
    for (Dag::NodeId v : order) {
      double start = 0.0;
      for (Dag::NodeId p : dag.predecessors(v)) start = std::max(start, earliest[p]);
      earliest[v] = start + time(v, choice[v]);
    }
    bool improved = false;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const Dag::NodeId v = *it;
      double latest_finish = deadline;
      for (Dag::NodeId s : dag.successors(v)) latest_finish = std::min(latest_finish, latest_start[s]);
      const std::int32_t best = cheapest_within(v, choice[v], latest_finish - (earliest[v] - time(v, choice[v])));
      improved |= best != choice[v];
      choice[v] = best;
      latest_start[v] = latest_finish - time(v, best);
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      double finish = deadline;
      for (Dag::NodeId s : dag.successors(*it)) finish = std::min(finish, latest_start[s]);
      latest_start[*it] = finish - time(*it, choice[*it]);
    }
    for (Dag::NodeId v : order) {
      double start = 0.0;
      for (Dag::NodeId p : dag.predecessors(v)) start = std::max(start, earliest[p]);
      const std::int32_t best = cheapest_within(v, choice[v], latest_start[v] + time(v, choice[v]) - start);
      improved |= best != choice[v];
      choice[v] = best;
      earliest[v] = start + time(v, best);
    }
    if (!improved) break;
  }
  return choice;
}

TEST(PlanRefiner, ReclaimingSkipsPassesButNotResults) {
  // reclaim_slack skips the passes whose results its last sweep already has, and
  // reclaim_slack_at_own_time shares the plan's critical path pass with the first sweep: the
  // same plans, bit for bit, as every pass done in full (plain_reclaim); the same counted work
  // (which bounds the refinement) as measured_time then reclaim_slack; and the measured time
  // it hands back is evaluate_measured's, exactly.
  for (const ScheduleKind kind : {ScheduleKind::k1F1B, ScheduleKind::kGPipe}) {
    const EnergyProblem problem = testing::synthetic_problem({kind, 4, 6, 1, false}, 12, 3);
    const PlanRefiner shared(problem), separate(problem);
    std::mt19937 rng(2);
    for (int trial = 0; trial < 50; ++trial) {
      const OptionChoice plan = random_choice(problem, rng);
      const double own_time = evaluate_measured(problem, plan).time_s;
      for (const double deadline : {own_time, own_time * 1.05}) {
        EXPECT_EQ(shared.reclaim_slack(plan, deadline), plain_reclaim(problem, plan, deadline)) << "trial " << trial;
      }
      double time_s = 0.0;
      const OptionChoice reclaimed = shared.reclaim_slack_at_own_time(plan, &time_s);
      EXPECT_EQ(reclaimed, plain_reclaim(problem, plan, own_time)) << "trial " << trial;
      const double work_before = shared.work();
      shared.reclaim_slack_at_own_time(plan);
      const double work_before_separate = separate.work();
      separate.reclaim_slack(plan, separate.measured_time(plan));
      EXPECT_EQ(shared.work() - work_before, separate.work() - work_before_separate) << "trial " << trial;
      const MeasuredFigures figures = evaluate_measured(problem, reclaimed);
      EXPECT_EQ(time_s, figures.time_s) << "trial " << trial;
      const MeasuredFigures given = evaluate_measured(problem, reclaimed, time_s);
      EXPECT_EQ(given.time_s, figures.time_s);
      EXPECT_EQ(given.energy_j, figures.energy_j);
      EXPECT_EQ(given.blocking_energy_j, figures.blocking_energy_j);
    }
  }
}

TEST(PlanRefiner, ReclaimedPlansLeaveNoOperationACheaperOptionWithinItsWindow) {
  // The fixed point reclaim_slack stops at: with every other operation as it is, no
  // operation has a strictly cheaper option that fits between its predecessors' finish and
  // its successors' latest start (checked against every option, not the refiner's index).
  const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 4, 6, 1, false}, 12, 5);
  const PlanRefiner refiner(problem);
  const Dag& dag = problem.dag;
  std::mt19937 rng(4);
  for (int trial = 0; trial < 30; ++trial) {
    const OptionChoice plan = random_choice(problem, rng);
    const double deadline = evaluate_measured(problem, plan).time_s * (1.0 + 0.01 * (trial % 4));
    const OptionChoice reclaimed = refiner.reclaim_slack(plan, deadline, 64);
    std::vector<double> duration(reclaimed.size()), start, latest_finish(reclaimed.size());
    for (std::size_t i = 0; i < reclaimed.size(); ++i) {
      duration[i] = problem.options_of(static_cast<Dag::NodeId>(i)).options[reclaimed[i]].measurement.time_s;
    }
    critical_path_length<double>(dag, duration, &start);
    const auto& order = dag.topological_order();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      double finish = deadline;
      for (Dag::NodeId s : dag.successors(*it)) finish = std::min(finish, latest_finish[s] - duration[s]);
      latest_finish[*it] = finish;
    }
    for (std::size_t i = 0; i < reclaimed.size(); ++i) {
      const auto v = static_cast<Dag::NodeId>(i);
      const auto& options = problem.options_of(v).options;
      const auto effective_of = [&](const Option& o) {
        return o.measurement.energy_j - problem.p_blocking * o.measurement.time_s;
      };
      const double window = latest_finish[i] - start[i];
      for (const Option& option : options) {
        if (option.measurement.time_s > window + 1e-9) continue;
        EXPECT_GE(effective_of(option), effective_of(options[reclaimed[i]]) - 1e-9) << "trial " << trial << " node " << i;
      }
    }
  }
}

TEST(PlanRefiner, RepairMeetsAnyDeadlineTheFastestPlanMeets) {
  const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 4, 6, 1, false}, 12, 6);
  const PlanRefiner refiner(problem);
  const double t_min = evaluate_measured(problem, fastest_choice(problem)).time_s;
  const double t_slow = evaluate_measured(problem, slowest_choice(problem)).time_s;
  std::mt19937 rng(2);
  for (int trial = 0; trial < 30; ++trial) {
    const double deadline = t_min + (t_slow - t_min) * trial / 30.0;
    const auto repaired = refiner.repair(slowest_choice(problem), deadline);
    ASSERT_TRUE(repaired.has_value()) << deadline;
    EXPECT_LE(evaluate_measured(problem, *repaired).time_s, deadline + 1e-9);
    EXPECT_LE(refiner.measured_time(*repaired), deadline + 1e-9);
  }
  // Below the all-fastest plan's time nothing can be done.
  EXPECT_FALSE(refiner.repair(slowest_choice(problem), t_min * 0.999).has_value());
  // A budget the speed-ups exceed is refused; a plan already in time needs none.
  EXPECT_FALSE(refiner.repair(slowest_choice(problem), t_min, 0.0).has_value());
  EXPECT_TRUE(refiner.repair(slowest_choice(problem), t_slow, 0.0).has_value());
}

// The repair written out plainly: Phillips-Dessouky steps on the measured critical DAG
// (docs/solver.md, "The crawl"), each speeding up by one option the operations of the
// minimal minimum cut of its activity-on-arc network (source 0, sink 1, an operation v from
// 2 + 2v to 3 + 2v), which `source_side` finds from the arcs of positive capacity (nullopt
// when every cut is unbounded).
struct CutArc {
  int from, to;
  double capacity;
};
constexpr double kUncut = 1e12;  // an arc no finite cut crosses

std::optional<OptionChoice> repaired_step_by_step(
    const EnergyProblem& problem, OptionChoice choice, double deadline, const PlanRefiner& refiner,
    const std::function<std::optional<std::vector<char>>(const std::vector<CutArc>&, int)>& source_side) {
  const Dag& dag = problem.dag;
  const std::size_t n = dag.num_nodes();
  const auto time_of = [&](std::size_t v, int o) { return problem.options_of(static_cast<Dag::NodeId>(v)).options[o].measurement.time_s; };
  const auto effective_of = [&](std::size_t v, int o) {
    return problem.options_of(static_cast<Dag::NodeId>(v)).options[o].measurement.energy_j - problem.p_blocking * time_of(v, o);
  };
  // The next faster option in time order (ties: the one listed first), or -1 at the fastest.
  const auto faster_of = [&](std::size_t v, int o) {
    const auto& options = problem.options_of(static_cast<Dag::NodeId>(v)).options;
    std::vector<int> by_time(options.size());
    for (std::size_t k = 0; k < by_time.size(); ++k) by_time[k] = static_cast<int>(k);
    std::stable_sort(by_time.begin(), by_time.end(), [&](int a, int b) { return time_of(v, a) < time_of(v, b); });
    const auto at = std::find(by_time.begin(), by_time.end(), o) - by_time.begin();
    return at == 0 ? -1 : by_time[static_cast<std::size_t>(at - 1)];
  };
  for (int iteration = 0; iteration < 100000; ++iteration) {
    std::vector<double> duration(n), start, latest(n);
    for (std::size_t v = 0; v < n; ++v) duration[v] = time_of(v, choice[v]);
    const double length = critical_path_length<double>(dag, duration, &start);
    if (length <= deadline + 1e-9) return refiner.reclaim_slack(std::move(choice), deadline);
    const auto& order = dag.topological_order();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      double until = length;
      for (const Dag::NodeId w : dag.successors(*it)) until = std::min(until, latest[w]);
      latest[*it] = until - duration[*it];
    }
    const auto critical = [&](std::size_t v) { return latest[v] - start[v] <= 1e-9; };
    std::vector<CutArc> arcs;
    for (std::size_t v = 0; v < n; ++v) {
      if (!critical(v)) continue;
      const int left = static_cast<int>(2 + 2 * v), right = left + 1;
      const int faster = faster_of(v, choice[v]);
      const double capacity = faster < 0 ? kUncut : std::max(0.0, effective_of(v, faster) - effective_of(v, choice[v]));
      if (capacity > 0.0) arcs.push_back({left, right, capacity});
      if (start[v] <= 1e-9) arcs.push_back({0, left, kUncut});
      if (start[v] + duration[v] >= length - 1e-9) arcs.push_back({right, 1, kUncut});
      for (const Dag::NodeId w : dag.successors(static_cast<Dag::NodeId>(v))) {
        if (critical(w) && start[v] + duration[v] >= start[w] - 1e-9) arcs.push_back({right, static_cast<int>(2 + 2 * w), kUncut});
      }
    }
    const auto side = source_side(arcs, static_cast<int>(2 + 2 * n));
    if (!side) return std::nullopt;
    for (std::size_t v = 0; v < n; ++v) {
      if (critical(v) && (*side)[2 + 2 * v] && !(*side)[3 + 2 * v]) choice[v] = faster_of(v, choice[v]);
    }
  }
  ADD_FAILURE() << "the step-by-step repair did not end";
  return std::nullopt;
}

// The minimal minimum cut by trying every source side: the intersection of the source sides
// of all minimum cuts, itself one. 2^(nodes - 2) sides.
std::optional<std::vector<char>> exhaustive_source_side(const std::vector<CutArc>& arcs, int nodes) {
  const auto value = [&](std::uint64_t side) {  // bit k: node k on the source side
    double total = 0.0;
    for (const CutArc& a : arcs) {
      if ((side >> a.from & 1) && !(side >> a.to & 1)) total += a.capacity;
    }
    return total;
  };
  const std::uint64_t sides = std::uint64_t{1} << (nodes - 2);
  double least = std::numeric_limits<double>::infinity();
  for (std::uint64_t free = 0; free < sides; ++free) least = std::min(least, value(1 | free << 2));
  if (least >= kUncut) return std::nullopt;
  std::uint64_t minimal = ~std::uint64_t{0};
  for (std::uint64_t free = 0; free < sides; ++free) {
    if (value(1 | free << 2) <= least + 1e-9) minimal &= 1 | free << 2;
  }
  EXPECT_LE(value(minimal), least + 1e-9);
  std::vector<char> side(static_cast<std::size_t>(nodes));
  for (int v = 0; v < nodes; ++v) side[static_cast<std::size_t>(v)] = minimal >> v & 1;
  return side;
}

// The minimal minimum cut from LEMON's Preflow: what s reaches through residual capacity.
std::optional<std::vector<char>> preflow_source_side(const std::vector<CutArc>& arcs, int nodes) {
  using Graph = lemon::SmartDigraph;
  Graph graph;
  for (int v = 0; v < nodes; ++v) graph.addNode();
  for (const CutArc& a : arcs) graph.addArc(graph.nodeFromId(a.from), graph.nodeFromId(a.to));
  Graph::ArcMap<double> capacity(graph);
  for (Graph::ArcIt a(graph); a != lemon::INVALID; ++a) capacity[a] = arcs[static_cast<std::size_t>(graph.id(a))].capacity;
  lemon::Preflow<Graph, Graph::ArcMap<double>> preflow(graph, capacity, graph.nodeFromId(0), graph.nodeFromId(1));
  preflow.run();
  if (preflow.flowValue() >= kUncut / 2) return std::nullopt;
  std::vector<char> side(static_cast<std::size_t>(nodes), 0);
  std::vector<Graph::Node> stack{graph.nodeFromId(0)};
  side[0] = 1;
  while (!stack.empty()) {
    const Graph::Node u = stack.back();
    stack.pop_back();
    const auto visit = [&](Graph::Node w) {
      if (!side[static_cast<std::size_t>(graph.id(w))]) {
        side[static_cast<std::size_t>(graph.id(w))] = 1;
        stack.push_back(w);
      }
    };
    for (Graph::OutArcIt a(graph, u); a != lemon::INVALID; ++a) {
      if (capacity[a] - preflow.flow(a) > 1e-9) visit(graph.target(a));
    }
    for (Graph::InArcIt a(graph, u); a != lemon::INVALID; ++a) {
      if (preflow.flow(a) > 1e-9) visit(graph.source(a));
    }
  }
  return side;
}

// The refiner's repair against the step-by-step one, from the slowest plan and random ones to
// deadlines across the span and just below the all-fastest time (which nothing meets).
void expect_repairs_step_by_step(const ScheduleSpec& spec, int options, std::uint32_t seed, int trials,
                                 const std::function<std::optional<std::vector<char>>(const std::vector<CutArc>&, int)>& source_side,
                                 PlanRefiner::RepairCuts cuts) {
  const EnergyProblem problem = testing::synthetic_problem(spec, options, seed);
  const PlanRefiner refiner(problem, cuts);
  const double t_min = evaluate_measured(problem, fastest_choice(problem)).time_s;
  const double t_slow = evaluate_measured(problem, slowest_choice(problem)).time_s;
  std::mt19937 rng(seed);
  int repaired = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const OptionChoice from = trial % 3 == 0 ? slowest_choice(problem) : random_choice(problem, rng);
    const double deadline = trial == trials - 1 ? t_min * 0.999 : t_min + (t_slow - t_min) * (trial % 6) / 6.0;
    const auto expected = repaired_step_by_step(problem, from, deadline, refiner, source_side);
    const auto got = refiner.repair(from, deadline);
    ASSERT_EQ(got.has_value(), expected.has_value()) << "seed " << seed << " trial " << trial;
    if (!got) continue;
    EXPECT_EQ(*got, *expected) << "seed " << seed << " trial " << trial;
    EXPECT_EQ(*got, *PlanRefiner(problem, PlanRefiner::RepairCuts::kAuto).repair(from, deadline)) << "seed " << seed;
    ++repaired;
  }
  EXPECT_GE(repaired, trials * 2 / 3) << "seed " << seed;
}

TEST(PlanRefiner, RepairTakesTheMinimalMinimumCutOfEveryStep) {
  // The repair's network absorbing cuts below its flow (max_flow.hpp) and restoring its flow
  // instead: the same cuts, the ones of a repair written out step by step.
  for (const auto cuts : {PlanRefiner::RepairCuts::kAbsorbed, PlanRefiner::RepairCuts::kRestored}) {
    // Every source side tried: 2 stages x 2 microbatches, 8 operations, 2^16 sides a step.
    for (std::uint32_t seed = 1; seed <= 3; ++seed) {
      expect_repairs_step_by_step({ScheduleKind::k1F1B, 2, 2, 1, false}, 7, seed, 12, exhaustive_source_side, cuts);
    }
    // Larger, where operations leave the critical DAG with flow through them (cuts below the
    // flow), against LEMON's Preflow.
    for (std::uint32_t seed = 1; seed <= 3; ++seed) {
      expect_repairs_step_by_step({ScheduleKind::k1F1B, 4, 6, 1, false}, 12, seed, 12, preflow_source_side, cuts);
      expect_repairs_step_by_step({ScheduleKind::kGPipe, 3, 4, 1, false}, 9, seed, 12, preflow_source_side, cuts);
    }
  }
}

TEST(PlanRefiner, LocalSearchMeetsTheDeadlineAndBeatsReclaimingAlone) {
  const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 3, 4, 1, false}, 10, 7);
  const PlanRefiner refiner(problem);
  std::mt19937 rng(3);
  for (int trial = 0; trial < 10; ++trial) {
    const OptionChoice plan = random_choice(problem, rng);
    const double deadline = evaluate_measured(problem, plan).time_s;
    for (const auto moves : {PlanRefiner::Moves::kExchanges, PlanRefiner::Moves::kAll}) {
      const OptionChoice searched = refiner.local_search(plan, deadline, 8, moves);
      EXPECT_LE(evaluate_measured(problem, searched).time_s, deadline + 1e-9);
      EXPECT_LE(effective(problem, searched), effective(problem, refiner.reclaim_slack(plan, deadline)) + 1e-9);
      EXPECT_NEAR(refiner.effective_energy(searched), effective(problem, searched), 1e-6);
    }
  }
}

TEST(LpRelaxation, BoundNeverExceedsTheExactOptimum) {
  for (std::uint32_t seed = 1; seed <= 4; ++seed) {
    const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 2, 2, 1, false}, 6, seed);
    const testing::BruteForce brute(problem);
    LpRelaxation relaxation(problem);
    const PlanRefiner refiner(problem);
    const double t_min = evaluate_measured(problem, fastest_choice(problem)).time_s;
    const double t_slow = evaluate_measured(problem, slowest_choice(problem)).time_s;
    for (int k = 0; k <= 20; ++k) {
      const double deadline = t_min + (t_slow - t_min) * k / 20.0;
      const auto relaxed = relaxation.solve(deadline);
      ASSERT_TRUE(relaxed.has_value()) << "seed " << seed << " deadline " << deadline;
      const double optimum = brute.optimum_energy_at(deadline);
      EXPECT_LE(relaxed->lower_bound_j, optimum + 1e-6) << "seed " << seed << " deadline " << deadline;
      // Its relaxed durations meet the deadline, and the rounded plan, repaired, too.
      EXPECT_LE(critical_path_length<double>(problem.dag, relaxed->duration_s), deadline + 1e-6);
      const auto plan = refiner.repair(relaxed->rounded, deadline);
      ASSERT_TRUE(plan.has_value());
      const double energy = effective(problem, *plan) + problem.p_blocking * problem.num_gpus() * deadline;
      EXPECT_GE(energy, optimum - 1e-6);
      // Rounded down each duration becomes the slowest option no slower; rounded up, the
      // fastest no faster (the slowest option when none is).
      for (std::size_t i = 0; i < problem.dag.num_nodes(); ++i) {
        const auto& options = problem.options_of(static_cast<Dag::NodeId>(i)).options;
        const double d = relaxed->duration_s[i];
        const double down = options[relaxed->rounded[i]].measurement.time_s;
        const double up = options[relaxed->rounded_up[i]].measurement.time_s;
        // Relaxed durations lie between the fastest and slowest options, so both exist.
        EXPECT_LE(down, d + 1e-9);
        EXPECT_GE(up, d - 1e-9);
        for (const Option& o : options) {
          const double t = o.measurement.time_s;
          if (t <= d + 1e-9) {
            EXPECT_LE(t, down + 1e-12);
          }
          if (t >= d - 1e-9) {
            EXPECT_GE(t, up - 1e-12);
          }
        }
      }
    }
    // At the all-slowest time nothing is sped up: the bound is that plan's energy.
    const MeasuredFigures slowest = evaluate_measured(problem, slowest_choice(problem));
    EXPECT_NEAR(relaxation.solve(t_slow)->lower_bound_j, slowest.energy_j, 1e-6 * slowest.energy_j);
    // Below the all-fastest time the LP has no solution.
    EXPECT_FALSE(relaxation.solve(t_min * 0.99).has_value());
  }
}

TEST(SupportingLines, EachSolveBoundsEveryDeadlineAndTouchesAtItsOwn) {
  for (std::uint32_t seed = 1; seed <= 4; ++seed) {
    const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 2, 2, 1, false}, 6, seed);
    const testing::BruteForce brute(problem);
    LpRelaxation relaxation(problem);
    const double t_min = evaluate_measured(problem, fastest_choice(problem)).time_s;
    const double t_slow = evaluate_measured(problem, slowest_choice(problem)).time_s;
    const auto deadline_at = [&](int k) { return t_min + (t_slow - t_min) * k / 20.0; };
    // The LP optimum at every deadline of the grid, solved directly.
    std::vector<double> lp(21);
    for (int k = 0; k <= 20; ++k) lp[k] = relaxation.solve(deadline_at(k))->lower_bound_j;
    for (int solved : {0, 5, 13, 20}) {
      SupportingLines lines(problem.p_blocking * problem.num_gpus());
      const auto relaxed = relaxation.solve(deadline_at(solved));
      ASSERT_TRUE(relaxed.has_value());
      EXPECT_LE(relaxed->slope_j_per_s, 0.0);  // more time never costs more effective energy
      lines.add(deadline_at(solved), *relaxed);
      for (int k = 0; k <= 20; ++k) {
        const double bound = *lines.energy_at(deadline_at(k));
        // Below the LP optimum (convexity) and so below the exact optimum, at every deadline;
        // equal to the LP optimum where it was solved.
        EXPECT_LE(bound, lp[k] + 1e-6 * lp[k]) << "seed " << seed << " solved " << solved << " at " << k;
        EXPECT_LE(bound, brute.optimum_energy_at(deadline_at(k)) + 1e-6) << "seed " << seed << " at " << k;
        if (k == solved) {
          EXPECT_NEAR(bound, lp[k], 1e-6 * lp[k]);
        }
      }
      // The slope is the optimum's derivative: a small step along it stays within the
      // curvature between two grid deadlines.
      if (solved < 20) {
        const double step = deadline_at(solved + 1) - deadline_at(solved);
        const double rise = lp[solved + 1] - lp[solved] - problem.p_blocking * problem.num_gpus() * step;
        EXPECT_LE(relaxed->slope_j_per_s * step, rise + 1e-6 * lp[solved]);
      }
    }
  }
}

// The warm-started relaxation agrees with the network simplex's at every deadline, in
// whatever order they come (each solve starts from the last one's basis), its line bounds
// every deadline's exact optimum, and its relaxed durations meet the deadline.
TEST(WarmLpRelaxation, MatchesTheRelaxationInAnyOrderAndItsLinesBoundEveryDeadline) {
  for (std::uint32_t seed = 1; seed <= 4; ++seed) {
    const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 2, 2, 1, false}, 6, seed);
    const testing::BruteForce brute(problem);
    LpRelaxation cold(problem);
    WarmLpRelaxation warm(problem);
    const double t_min = evaluate_measured(problem, fastest_choice(problem)).time_s;
    const double t_slow = evaluate_measured(problem, slowest_choice(problem)).time_s;
    const auto deadline_at = [&](int k) { return t_min + (t_slow - t_min) * k / 16.0; };
    std::vector<int> order;  // fast to slow, then back and forth
    for (int k = 0; k <= 16; ++k) order.push_back(k);
    for (int k : {9, 2, 15, 0, 7, 16, 4}) order.push_back(k);
    int pivots_after_first = 0;
    for (std::size_t at = 0; at < order.size(); ++at) {
      const double deadline = deadline_at(order[at]);
      SupportingLine line;
      const auto relaxed = warm.solve(deadline, &line);
      ASSERT_TRUE(relaxed.has_value()) << "seed " << seed << " at " << order[at];
      if (at > 0 && at <= 16) pivots_after_first += warm.last_iterations();
      const double exact = cold.solve(deadline)->lower_bound_j;
      EXPECT_NEAR(relaxed->lower_bound_j, exact, 1e-6 * exact) << "seed " << seed << " at " << order[at];
      EXPECT_LE(critical_path_length<double>(problem.dag, relaxed->duration_s), deadline + 1e-6);
      for (int k = 0; k <= 16; ++k) {
        const double t = deadline_at(k);
        const double bound = line.effective_at(t) + problem.p_blocking * problem.num_gpus() * t;
        EXPECT_LE(bound, brute.optimum_energy_at(t) + 1e-6) << "seed " << seed << " line of " << order[at] << " at " << k;
      }
      // Rounded down, every duration's option is no slower: the plan meets the deadline.
      const MeasuredFigures rounded = evaluate_measured(problem, relaxed->rounded);
      EXPECT_LE(rounded.time_s, deadline + 1e-6);
    }
    // Warm: the sweep's steps take a few pivots each.
    EXPECT_LT(pivots_after_first, 16 * 4) << "seed " << seed;  // measured 24-25
    EXPECT_FALSE(warm.solve(t_min * 0.99).has_value());
    // Started from the network simplex's durations at one deadline, it is at that optimum,
    // and sweeps on from there.
    WarmLpRelaxation started(problem);
    const double middle = deadline_at(8);
    const auto known = cold.solve(middle);
    ASSERT_TRUE(started.start_from(middle, known->duration_s)) << "seed " << seed;
    for (int k : {8, 9, 10, 6}) {
      const auto relaxed = started.solve(deadline_at(k));
      ASSERT_TRUE(relaxed.has_value());
      const double exact = cold.solve(deadline_at(k))->lower_bound_j;
      EXPECT_NEAR(relaxed->lower_bound_j, exact, 1e-6 * exact) << "seed " << seed << " at " << k;
      if (k == 8) {
        EXPECT_EQ(started.last_iterations(), 0) << "seed " << seed;
      }
    }
  }
}

TEST(LpRelaxation, FromTheLastTreeItMatchesTheAnchoredSolveInAnyOrder) {
  // solve_next resumes from the tree the last solve left: the same optimum as solve() (from
  // an anchor's tree) at every deadline, fast to slow and back and forth, its lines bounding
  // every deadline; its rounded plans meet their deadlines; below T_min none, and the next
  // solve after that starts afresh.
  for (std::uint32_t seed = 1; seed <= 4; ++seed) {
    const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 2, 2, 1, false}, 6, seed);
    const testing::BruteForce brute(problem);
    LpRelaxation anchored(problem), next(problem);
    const double t_min = evaluate_measured(problem, fastest_choice(problem)).time_s;
    const double t_slow = evaluate_measured(problem, slowest_choice(problem)).time_s;
    const auto deadline_at = [&](int k) { return t_min + (t_slow - t_min) * k / 16.0; };
    std::vector<int> order;
    for (int k = 0; k <= 16; ++k) order.push_back(k);
    for (int k : {9, 2, 15, -1, 0, 7, 16, 4}) order.push_back(k);  // -1: below T_min
    for (const int k : order) {
      const double deadline = k < 0 ? t_min * 0.99 : deadline_at(k);
      const auto relaxed = next.solve_next(deadline);
      const auto exact = anchored.solve(deadline);
      ASSERT_EQ(relaxed.has_value(), exact.has_value()) << "seed " << seed << " at " << k;
      if (!relaxed) continue;
      EXPECT_NEAR(relaxed->lower_bound_j, exact->lower_bound_j, 1e-9 * exact->lower_bound_j) << "seed " << seed << " at " << k;
      EXPECT_LE(critical_path_length<double>(problem.dag, relaxed->duration_s), deadline + 1e-6);
      EXPECT_LE(evaluate_measured(problem, relaxed->rounded).time_s, deadline + 1e-6);
      const SupportingLine line = SupportingLine::of(deadline, *relaxed);
      for (int j = 0; j <= 16; ++j) {
        const double t = deadline_at(j);
        const double bound = line.effective_at(t) + problem.p_blocking * problem.num_gpus() * t;
        EXPECT_LE(bound, brute.optimum_energy_at(t) + 1e-6) << "seed " << seed << " line of " << k << " at " << j;
      }
    }
  }
}

TEST(SupportingLines, TheEnvelopeIsTheGreatestLineWhereverLinesAreAdded) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> slope(-500.0, 0.0), level(1000.0, 2000.0), at(1.0, 3.0);
  const double blocking_w = 80.0;
  SupportingLines lines(blocking_w);
  std::vector<SupportingLine> added;
  EXPECT_FALSE(lines.energy_at(2.0).has_value());
  for (int round = 0; round < 20; ++round) {
    // A few lines at a time (some parallel, some identical), then queries: the envelope is
    // rebuilt between them.
    for (int k = 0; k < 1 + round % 5; ++k) {
      SupportingLine line{at(rng), level(rng), round % 7 == 0 ? -100.0 : slope(rng)};
      added.push_back(line);
      lines.add(line);
      if (k == 0) {
        added.push_back(line);
        lines.add(line);
      }
    }
    for (int q = 0; q <= 40; ++q) {
      const double t = 0.5 + 3.0 * q / 40.0;
      double best = -std::numeric_limits<double>::infinity();
      for (const SupportingLine& line : added) best = std::max(best, line.effective_at(t));
      EXPECT_NEAR(*lines.energy_at(t), best + blocking_w * t, 1e-9 * std::abs(best)) << "round " << round << " t " << t;
    }
  }
}

TEST(LagrangianBound, AnyPricesBoundEveryDeadline) {
  // Prices that form no circulation at all (random on every constraint) still give a line
  // below the exact optimum everywhere (the derivation in relaxation.cpp); some of them zero.
  std::mt19937 rng(3);
  for (std::uint32_t seed = 1; seed <= 4; ++seed) {
    const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 2, 2, 1, false}, 6, seed);
    const testing::BruteForce brute(problem);
    const LagrangianBound bound(problem);
    const std::size_t n = problem.dag.num_nodes();
    const double t_min = evaluate_measured(problem, fastest_choice(problem)).time_s;
    const double t_slow = evaluate_measured(problem, slowest_choice(problem)).time_s;
    std::uniform_real_distribution<double> price(-50.0, 400.0);
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<double> dependencies(problem.dag.num_edges()), starts(n), ends(n);
      for (double& y : dependencies) y = price(rng);
      for (std::size_t i = 0; i < n; ++i) {
        starts[i] = trial % 3 == 0 ? 0.0 : price(rng);
        ends[i] = trial % 2 == 0 ? 0.0 : price(rng);
      }
      SupportingLines lines(problem.p_blocking * problem.num_gpus());
      lines.add(bound.line(dependencies, starts, ends));
      for (int k = 0; k <= 10; ++k) {
        const double deadline = t_min + (t_slow - t_min) * k / 10.0;
        EXPECT_LE(*lines.energy_at(deadline), brute.optimum_energy_at(deadline) + 1e-6) << "seed " << seed << " trial " << trial;
      }
    }
  }
}

// The crawl's flows as prices (J per time unit / the unit). The cut that stops the crawl runs
// through arcs of unbounded capacity: prices of ~1e12 per unit, whose terms cancel in
// floating point. The line carries an allowance for that rounding, so it still lies below the
// LP optimum everywhere, far below (the frontier leaves it out); the other flows' lines lie
// below it too, within a few percent at T_min. Reported at every step (as the bound crawl
// does) and at every third (as the frontier's crawl does, whose flows then come from a
// second network: its own absorbs cuts below the flow, and those flows' lines lie some 20%
// below the optimum at T_min).
class CrawlFlowLines : public ::testing::TestWithParam<std::size_t> {};
INSTANTIATE_TEST_SUITE_P(FlowEvery, CrawlFlowLines, ::testing::Values(1, 3));

TEST_P(CrawlFlowLines, ACutThroughUnboundedArcsGivesAValidLineFarBelow) {
  for (std::uint32_t seed = 1; seed <= 3; ++seed) {
    const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 4, 6, 1, false}, 12, seed, 0.0001);
    const LagrangianBound bound(problem);
    std::vector<SupportingLine> bounded, unbounded;
    CrawlOptions options;
    options.on_flow = [&](const CrawlFlow& flow) {
      std::vector<double> prices[3];
      const std::span<const double> parts[3] = {flow.dependencies, flow.starts, flow.ends};
      for (int k = 0; k < 3; ++k)
        for (const double f : parts[k]) prices[k].push_back(f / problem.unit_time);
      (flow.through_unbounded_arcs() ? unbounded : bounded).push_back(bound.line(prices[0], prices[1], prices[2]));
    };
    options.flow_every = GetParam();
    crawl_frontier(problem, options);
    ASSERT_EQ(unbounded.size(), 1u) << "seed " << seed;  // the last cut only
    ASSERT_GT(bounded.size(), 10u);
    LpRelaxation relaxation(problem);
    const double t_min = evaluate_measured(problem, fastest_choice(problem)).time_s;
    const double t_slow = evaluate_measured(problem, slowest_choice(problem)).time_s;
    const double blocking = problem.p_blocking * problem.num_gpus();
    for (int k = 0; k <= 10; ++k) {
      const double deadline = t_min + (t_slow - t_min) * k / 10.0;
      const double lp = relaxation.solve(deadline)->lower_bound_j;
      EXPECT_LE(unbounded.front().effective_at(deadline) + blocking * deadline, lp) << "seed " << seed << " k " << k;
      double best = -std::numeric_limits<double>::infinity();
      for (const SupportingLine& line : bounded) best = std::max(best, line.effective_at(deadline) + blocking * deadline);
      EXPECT_LE(best, lp * (1 + 1e-9)) << "seed " << seed << " k " << k;
      if (k == 0) {
        EXPECT_GT(best, 0.95 * lp) << "seed " << seed;
        EXPECT_LT(unbounded.front().effective_at(deadline) + blocking * deadline, 0.5 * lp) << "seed " << seed;
      }
    }
  }
}

TEST(RelaxationCrawl, ItsLinesLieBelowTheLpOptimumAndCloseToItEverywhere) {
  for (std::uint32_t seed = 1; seed <= 4; ++seed) {
    const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 4, 6, 1, false}, 12, seed);
    LpRelaxation relaxation(problem);
    const RelaxationCrawl crawl = crawl_relaxation(problem, 500, 16);
    EXPECT_GE(crawl.steps, 400u) << "seed " << seed;
    // Its rounded states, slowest first: rounded down each meets its state's time, and each
    // node's option rounded down is no slower than rounded up.
    ASSERT_EQ(crawl.rounded.size(), 16u);
    for (std::size_t j = 0; j < crawl.rounded.size(); ++j) {
      const RoundedState& state = crawl.rounded[j];
      if (j > 0) {
        EXPECT_LT(state.time_s, crawl.rounded[j - 1].time_s);
      }
      EXPECT_LE(evaluate_measured(problem, state.down).time_s, state.time_s + 1e-9) << "seed " << seed << " state " << j;
      for (std::size_t i = 0; i < state.down.size(); ++i) {
        EXPECT_LE(problem.chosen(static_cast<Dag::NodeId>(i), state.down).measurement.time_s,
                  problem.chosen(static_cast<Dag::NodeId>(i), state.up).measurement.time_s);
      }
    }
    // A line per step's cut; the cut that stops the crawl, through arcs of unbounded capacity
    // here, is left out (CrawlFlow::through_unbounded_arcs: its line would be rounding noise).
    EXPECT_EQ(crawl.lines.size(), crawl.steps);
    SupportingLines lines(problem.p_blocking * problem.num_gpus());
    for (const SupportingLine& line : crawl.lines) lines.add(line);
    const double t_min = evaluate_measured(problem, fastest_choice(problem)).time_s;
    const double t_slow = evaluate_measured(problem, slowest_choice(problem)).time_s;
    double worst = 0.0;
    for (int k = 0; k <= 40; ++k) {
      const double deadline = t_min + (t_slow - t_min) * k / 40.0;
      const double lp = relaxation.solve(deadline)->lower_bound_j;
      const double bound = *lines.energy_at(deadline);
      EXPECT_LE(bound, lp + 1e-6 * lp) << "seed " << seed << " k " << k;
      if (k > 0) worst = std::max(worst, 1.0 - bound / lp);  // at T_min the crawl's rounding shows
    }
    // Each line is tangent near its step (measured: within 0.07-0.33% of the LP optimum on
    // these); a wrong price would leave whole stretches far below.
    EXPECT_LT(worst, 0.005) << "seed " << seed;
  }
}

// Crowded towards T_min: state j of n lies 1 - (1 - j / (n + 1))^p of the crawl's steps
// from its slowest end (its steps are even in time), so with p = 3 the first state is
// already 0.33 of the way and half of them lie in the fastest 0.13.
TEST(RelaxationCrawl, ItsRoundedStatesCrowdTowardsTMinAtAPowerAboveOne) {
  const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 4, 6, 1, false}, 12, 3);
  const RelaxationCrawl even = crawl_relaxation(problem, 500, 15, 1.0);
  const RelaxationCrawl crowded = crawl_relaxation(problem, 500, 15, 3.0);
  ASSERT_EQ(even.rounded.size(), 15u);
  ASSERT_GE(crowded.rounded.size(), 12u);  // states falling on one step are taken once
  const double t_slow = evaluate_measured(problem, slowest_choice(problem)).time_s;
  const double t_end = t_slow - static_cast<double>(crowded.steps) * crowded.unit_s;  // where the steps end
  const auto share = [&](const RoundedState& state) { return (t_slow - state.time_s) / (t_slow - t_end); };
  for (std::size_t j = 0; j < even.rounded.size(); ++j) {
    EXPECT_NEAR(share(even.rounded[j]), (j + 1) / 16.0, 0.02) << "state " << j;
  }
  EXPECT_NEAR(share(crowded.rounded.front()), 1.0 - std::pow(15.0 / 16.0, 3.0), 0.02);
  for (std::size_t j = 1; j < crowded.rounded.size(); ++j) {
    EXPECT_LT(crowded.rounded[j].time_s, crowded.rounded[j - 1].time_s);
  }
  const auto fast = std::count_if(crowded.rounded.begin(), crowded.rounded.end(),
                                  [&](const RoundedState& state) { return share(state) > 1.0 - 0.13; });
  EXPECT_GE(fast, 6);
  // The crawl itself, and so its lines, do not depend on where the states are taken.
  EXPECT_EQ(crowded.steps, even.steps);
  EXPECT_EQ(crowded.lines.size(), even.lines.size());
}

// The lower convex hull of an operation's (time, effective energy) options at time x,
// as the least interpolation between two options around x (exact in one dimension).
double hull_at(const EnergyProblem& problem, Dag::NodeId node, double x) {
  const auto& options = problem.options_of(node).options;
  double best = std::numeric_limits<double>::infinity();
  for (const Option& a : options) {
    for (const Option& b : options) {
      const double ta = a.measurement.time_s, tb = b.measurement.time_s;
      const double ea = a.measurement.energy_j - problem.p_blocking * ta;
      const double eb = b.measurement.energy_j - problem.p_blocking * tb;
      if (ta <= x + 1e-12 && x <= tb + 1e-12) {
        const double w = tb > ta ? (x - ta) / (tb - ta) : 0.0;
        best = std::min(best, ea + w * (eb - ea));
      }
    }
  }
  return best;
}

TEST(LpRelaxation, ChainMatchesTheClosedForm) {
  // One stage, one microbatch: forward then backward. The relaxation is
  // min hull_F(d) + hull_B(D - d), convex and piecewise linear, so its minimum lies where d
  // or D - d is an option's time.
  const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 1, 1, 1, false}, 10, 9);
  ASSERT_EQ(problem.dag.num_nodes(), 2u);
  LpRelaxation relaxation(problem);
  const double t_min = evaluate_measured(problem, fastest_choice(problem)).time_s;
  const double t_slow = evaluate_measured(problem, slowest_choice(problem)).time_s;
  for (int k = 0; k <= 10; ++k) {
    const double deadline = t_min + (t_slow - t_min) * k / 10.0;
    std::vector<double> splits;
    for (const Option& o : problem.options_of(0).options) splits.push_back(o.measurement.time_s);
    for (const Option& o : problem.options_of(1).options) splits.push_back(deadline - o.measurement.time_s);
    double best = std::numeric_limits<double>::infinity();
    for (const double d : splits) best = std::min(best, hull_at(problem, 0, d) + hull_at(problem, 1, deadline - d));
    const double expected = best + problem.p_blocking * problem.num_gpus() * deadline;
    EXPECT_NEAR(relaxation.solve(deadline)->lower_bound_j, expected, 1e-6 * expected) << deadline;
  }
}

// The prices are the dual's flows: every node's relaxed duration minimises its Lagrangian
// term, the hull's cost plus the price times the duration, over every option (complementary
// slackness), and a node's price is never negative.
TEST(LpRelaxation, EachDurationIsCheapestAtItsPrice) {
  for (std::uint32_t seed = 1; seed <= 3; ++seed) {
    const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 3, 4, 1, false}, 8, seed);
    LpRelaxation relaxation(problem);
    const double t_min = evaluate_measured(problem, fastest_choice(problem)).time_s;
    const double t_slow = evaluate_measured(problem, slowest_choice(problem)).time_s;
    int priced = 0;
    for (int k = 0; k <= 6; ++k) {
      const double deadline = t_min + (t_slow - t_min) * k / 6.0;
      const auto relaxed = relaxation.solve(deadline);
      ASSERT_TRUE(relaxed.has_value());
      ASSERT_EQ(relaxed->price_j_per_s.size(), problem.dag.num_nodes());
      for (std::size_t i = 0; i < problem.dag.num_nodes(); ++i) {
        const auto node = static_cast<Dag::NodeId>(i);
        const double y = relaxed->price_j_per_s[i];
        EXPECT_GE(y, 0.0);
        priced += y > 0.0;
        double cheapest = std::numeric_limits<double>::infinity();
        for (const Option& o : problem.options_of(node).options) {
          const double t = o.measurement.time_s;
          cheapest = std::min(cheapest, o.measurement.energy_j - problem.p_blocking * t + y * t);
        }
        const double d = relaxed->duration_s[i];
        EXPECT_NEAR(hull_at(problem, node, d) + y * d, cheapest, 1e-6 * (1.0 + std::abs(cheapest)))
            << "seed " << seed << " deadline " << deadline << " node " << i;
      }
    }
    EXPECT_GT(priced, 0);  // below T*, time has a price somewhere
  }
}

// Prices at which every delay costs more than it saves leave kAll only its speed-ups and
// exchanges: the search is then exactly kExchanges'.
TEST(PlanRefiner, PricesThatMakeEveryDelayDearSkipEverySlowAndRepairMove) {
  const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 3, 4, 1, false}, 10, 7);
  const PlanRefiner refiner(problem);
  const std::vector<double> dear(problem.dag.num_nodes(), 1e12);
  const std::vector<double> free_time(problem.dag.num_nodes(), 0.0);
  std::mt19937 rng(5);
  int differs = 0;
  for (int trial = 0; trial < 10; ++trial) {
    const OptionChoice plan = random_choice(problem, rng);
    const double deadline = evaluate_measured(problem, plan).time_s;
    const OptionChoice exchanges = refiner.local_search(plan, deadline, 8, PlanRefiner::Moves::kExchanges);
    EXPECT_EQ(refiner.local_search(plan, deadline, 8, PlanRefiner::Moves::kAll, &dear), exchanges);
    // Free time lets them back in (a search that finds other local optima, not always
    // cheaper ones), still within the deadline and no dearer than where it started.
    const OptionChoice all = refiner.local_search(plan, deadline, 8, PlanRefiner::Moves::kAll, &free_time);
    EXPECT_LE(evaluate_measured(problem, all).time_s, deadline + 1e-9);
    EXPECT_LE(refiner.effective_energy(all), refiner.effective_energy(refiner.reclaim_slack(plan, deadline)) + 1e-9);
    differs += all != exchanges;
  }
  EXPECT_GT(differs, 0);  // some slow-and-repair move paid somewhere
}

}  // namespace
}  // namespace perseus
