// The exact MILP at a deadline (solver/exact_milp.hpp): against brute force on tiny pipelines,
// against the LP relaxation's bound and the frontier's plans on larger ones, and its edges.
#include <gtest/gtest.h>

#include <cmath>

#include "brute_force.hpp"
#include "perseus/solver/exact_milp.hpp"
#include "perseus/solver/frontier.hpp"
#include "perseus/solver/relaxation.hpp"
#include "synthetic.hpp"

namespace perseus {
namespace {

// Little refinement: the crawl's plans, slack reclaimed, and a few LP solves, leaving gaps for
// the MILP to close. Applied after certify_for, it takes back the shares that raised.
FrontierOptions with_little_refinement(FrontierOptions options) {
  options.local_search_max_nodes = 0;
  options.iso_search_rounds = 0;
  options.bound_crawl_node_steps = 0;
  options.certify_sweep_share = 0;
  options.certify_worst_solves = 0;
  options.certify_polish_points = 0;
  options.certify_search_points = 0;
  options.certify_chain_repairs = 0;
  options.certify_carry_down_share = 0;
  return options;
}

TEST(ExactMilp, IsTheBruteForceOptimumOnTinyPipelines) {
  int solves = 0;
  for (std::uint32_t seed = 1; seed <= 4; ++seed) {
    for (const ScheduleSpec& spec : {ScheduleSpec{ScheduleKind::k1F1B, 2, 2, 1, false},
                                     ScheduleSpec{ScheduleKind::kGPipe, 2, 2, 1, false}}) {
      const EnergyProblem problem = testing::synthetic_problem(spec, 6, seed, 0.0005);
      const testing::BruteForce brute(problem);
      const double fastest = evaluate_measured(problem, fastest_choice(problem)).time_s;
      const double slowest = evaluate_measured(problem, slowest_choice(problem)).time_s;
      for (const double share : {0.0, 0.1, 0.3, 0.6, 1.0, 1.2}) {
        const double deadline = fastest + share * (slowest - fastest);
        // Every other solve starts from the all-fastest plan, which meets every deadline: the
        // optimum is found either way, and is an improvement wherever it is cheaper.
        const OptionChoice fastest_plan = fastest_choice(problem);
        const bool started = solves % 2 == 1;
        const auto exact = solve_exact(problem, deadline,
                                       {.time_limit_s = 30.0, .start = started ? std::optional(fastest_plan) : std::nullopt});
        ASSERT_TRUE(exact.has_value()) << "seed " << seed << " deadline " << deadline;
        EXPECT_TRUE(exact->proven_optimal);
        const double optimum = brute.optimum_energy_at(deadline);
        const MeasuredFigures from = evaluate_measured(problem, fastest_plan);
        const double start_energy = from.energy_j + problem.p_blocking * problem.num_gpus() * (deadline - from.time_s);
        EXPECT_EQ(exact->improved, started && optimum < start_energy - 1e-6 * optimum);
        EXPECT_NEAR(exact->energy_at_deadline_j, optimum, 1e-6 * optimum) << "seed " << seed << " share " << share;
        EXPECT_NEAR(exact->lower_bound_j, exact->energy_at_deadline_j, 1e-9 * optimum);
        // Its plan meets the deadline, and its energy is the plan's, blocking until then.
        const MeasuredFigures measured = evaluate_measured(problem, exact->choice);
        EXPECT_LE(measured.time_s, deadline + 1e-9);
        EXPECT_NEAR(exact->energy_at_deadline_j,
                    measured.energy_j + problem.p_blocking * problem.num_gpus() * (deadline - measured.time_s),
                    1e-9 * optimum);
        ++solves;
      }
    }
  }
  EXPECT_EQ(solves, 48);
}

TEST(ExactMilp, StartsFromAPlanAndNeverReturnsADearerOne) {
  // 4 x 8 with 12 clocks: too large to prove in a second, where a start matters.
  const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 4, 8, 1, false}, 12, 11);
  const Frontier frontier = build_frontier(problem, crawl_frontier(problem));
  LpRelaxation relaxation(problem);
  int improved = 0;
  const std::size_t count = frontier.points.size();
  for (const std::size_t i : {std::size_t{0}, count / 8, count / 3, count / 2}) {
    const FrontierPoint& point = frontier.points[i];
    const double deadline = point.measured.time_s;
    const auto exact = solve_exact(problem, deadline, {.time_limit_s = 1.0, .start = point.option_choice()});
    ASSERT_TRUE(exact.has_value());
    EXPECT_LE(exact->energy_at_deadline_j, point.measured.energy_j + 1e-9);
    EXPECT_EQ(exact->improved, exact->energy_at_deadline_j < point.measured.energy_j);
    if (!exact->improved) {
      EXPECT_EQ(exact->choice, point.option_choice());
    }
    improved += exact->improved;
    // The bound: below the plan, and (CBC's root being the same relaxation, tightened by its
    // cuts) not below the LP optimum.
    ASSERT_TRUE(std::isfinite(exact->lower_bound_j));
    EXPECT_LE(exact->lower_bound_j, exact->energy_at_deadline_j + 1e-9);
    const auto lp = relaxation.solve(deadline);
    ASSERT_TRUE(lp.has_value());
    EXPECT_GE(exact->lower_bound_j, lp->lower_bound_j - 1e-6 * lp->lower_bound_j) << "point " << i;
  }
  std::cout << "CBC improved " << improved << " of 4 frontier plans in 1 s each\n";
}

// The deadline priced: CBC's optimum is the least effective energy + price x time over every
// plan (brute force), and its line holds at every deadline.
TEST(ExactMilp, APricedDeadlineGivesTheBruteForceOptimumAndALineThatHoldsAtEveryDeadline) {
  int solves = 0, improved = 0;
  for (std::uint32_t seed = 1; seed <= 4; ++seed) {
    for (const ScheduleSpec& spec : {ScheduleSpec{ScheduleKind::k1F1B, 2, 2, 1, false},
                                     ScheduleSpec{ScheduleKind::kGPipe, 2, 2, 1, false}}) {
      const EnergyProblem problem = testing::synthetic_problem(spec, 6, seed, 0.0005);
      const testing::BruteForce brute(problem);
      const double blocking_w = problem.p_blocking * problem.num_gpus();
      const MeasuredFigures fastest = evaluate_measured(problem, fastest_choice(problem));
      const MeasuredFigures slowest = evaluate_measured(problem, slowest_choice(problem));
      // The frontier's average slope in effective energy, J/s: prices a sixteenth of it to 16 times.
      const double slope = std::abs((fastest.energy_j - blocking_w * fastest.time_s) - (slowest.energy_j - blocking_w * slowest.time_s)) /
                           (slowest.time_s - fastest.time_s);
      for (const double scale : {0.0, 1.0 / 16, 0.25, 1.0, 4.0, 16.0}) {
        const double price = scale * slope;
        const bool started = solves % 2 == 1;
        const auto exact = solve_exact_priced(
            problem, price, {.time_limit_s = 30.0, .start = started ? std::optional(fastest_choice(problem)) : std::nullopt});
        ASSERT_TRUE(exact.has_value()) << "seed " << seed << " price " << price;
        EXPECT_TRUE(exact->proven_optimal);
        const double least = brute.least_priced(price);
        const double tolerance = 1e-6 * std::max(1.0, std::abs(least));
        EXPECT_NEAR(exact->objective_j, least, tolerance) << "seed " << seed << " price " << price;
        EXPECT_NEAR(exact->line_j, least, tolerance);
        EXPECT_LE(exact->line_j, exact->objective_j);
        // Its objective is its plan's.
        const MeasuredFigures measured = evaluate_measured(problem, exact->choice);
        EXPECT_NEAR(exact->objective_j, measured.energy_j - blocking_w * measured.time_s + price * measured.time_s, 1e-9 * std::abs(least) + 1e-9);
        improved += exact->improved;
        // The line, as energy at a deadline, never above the optimum there.
        for (int k = 0; k <= 20; ++k) {
          const double deadline = fastest.time_s + (slowest.time_s - fastest.time_s) * 1.2 * k / 20.0;
          const double optimum = brute.optimum_energy_at(deadline);
          EXPECT_LE(exact->line_j - price * deadline + blocking_w * deadline, optimum + 1e-6 * optimum)
              << "seed " << seed << " price " << price << " deadline " << deadline;
        }
        ++solves;
      }
    }
  }
  EXPECT_EQ(solves, 48);
  EXPECT_GT(improved, 0);  // the all-fastest start is the optimum only at the highest prices
  EXPECT_THROW(solve_exact_priced(testing::synthetic_problem({ScheduleKind::k1F1B, 2, 2, 1, false}, 6, 1, 0.0005), -1.0),
               InputError);
}

// Where CBC cannot prove the optimum, its line at the LP's slope is still no lower than the
// LP's line of that slope (its root is the same relaxation, raised by its cuts), and no
// frontier plan lies below it.
TEST(ExactMilp, APricedLineIsNoLowerThanTheLpsOfItsSlope) {
  const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 4, 8, 1, false}, 12, 11);
  const Frontier frontier = build_frontier(problem, crawl_frontier(problem));
  LpRelaxation relaxation(problem);
  const double blocking_w = problem.p_blocking * problem.num_gpus();
  const std::size_t count = frontier.points.size();
  for (const std::size_t i : {count / 8, count / 3}) {
    const FrontierPoint& point = frontier.points[i];
    const double deadline = point.measured.time_s;
    const auto lp = relaxation.solve(deadline);
    ASSERT_TRUE(lp.has_value());
    const SupportingLine lp_line = SupportingLine::of(deadline, *lp);
    const double price = -lp_line.slope_j_per_s;
    ASSERT_GE(price, 0.0);
    const auto exact = solve_exact_priced(problem, price, {.time_limit_s = 1.0, .start = point.option_choice()});
    ASSERT_TRUE(exact.has_value());
    ASSERT_TRUE(std::isfinite(exact->line_j));
    const double lp_intercept = lp_line.effective_at(0.0);
    EXPECT_GE(exact->line_j, lp_intercept - 1e-6 * std::abs(lp_intercept)) << "point " << i;
    EXPECT_LE(exact->objective_j, point.effective_energy_j + price * deadline + 1e-9 * std::abs(exact->objective_j));
    for (const FrontierPoint& other : frontier.points) {
      EXPECT_LE(exact->line_j - price * other.measured.time_s + blocking_w * other.measured.time_s,
                other.measured.energy_j + 1e-6 * other.measured.energy_j);
    }
  }
}

// optimize --exact: the MILP at iso-time inside the frontier. On pipelines CBC proves, the
// plan selected at iso-time is then the optimum there (CBC's own, solved afresh), and so is
// the MILP's bound; points as fast keep valid bounds.
TEST(ExactMilp, AtIsoTimeTheFrontiersPlanAndBoundBecomeTheOptimum) {
  int improved = 0;
  for (std::uint32_t seed = 1; seed <= 6; ++seed) {
    const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 4, 4, 1, false}, 10, seed, 0.0005);
    const CrawlResult crawl = crawl_frontier(problem);
    // The MILP improves these plans at iso-time on most of these pipelines.
    FrontierOptions options = with_little_refinement({});
    const Frontier plain = build_frontier(problem, crawl, options);
    options.exact_iso_seconds = 30.0;
    const Frontier exact = build_frontier(problem, crawl, options);
    const double iso = exact.all_max.time_s;
    const auto reference = solve_exact(problem, iso, {.time_limit_s = 30.0, .start = {}});
    ASSERT_TRUE(reference && reference->proven_optimal);
    const double optimum = reference->energy_at_deadline_j;
    const FrontierPoint* before = select_for_deadline(plain, iso);
    const FrontierPoint* after = select_for_deadline(exact, iso);
    ASSERT_TRUE(before && after);
    EXPECT_NEAR(energy_at(problem, *after, iso), optimum, 1e-6 * optimum) << "seed " << seed;
    ASSERT_TRUE(exact.exact_lower_bound_j.has_value());
    EXPECT_NEAR(*exact.exact_lower_bound_j, optimum, 1e-6 * optimum);
    EXPECT_GT(exact.exact_seconds, 0.0);
    EXPECT_EQ(exact.exact_improved, energy_at(problem, *before, iso) > optimum + 1e-6 * optimum) << "seed " << seed;
    improved += exact.exact_improved;
    for (const FrontierPoint& point : exact.points) {
      ASSERT_TRUE(point.lower_bound_j.has_value());
      EXPECT_LE(*point.lower_bound_j, point.measured.energy_j + 1e-9);
      if (point.measured.time_s <= iso) {  // the MILP's bound, carried to a faster point
        EXPECT_GE(*point.lower_bound_j, optimum - problem.p_blocking * problem.num_gpus() * (iso - point.measured.time_s) -
                                            1e-6 * optimum);
      }
    }
    EXPECT_GE(*exact.t_min_lower_bound_j, *plain.t_min_lower_bound_j - 1e-9);
  }
  EXPECT_GT(improved, 0);
  std::cout << "the MILP improved the iso-time plan of " << improved << " of 6 pipelines\n";
}

// optimize --certify SECONDS: part of those seconds goes to the MILP where the gaps stay
// widest. On pipelines brute force can enumerate, every bound it leaves is still below the
// optimum at its point's time, its solves close the widest gaps the LP left, and with no share
// it does not run.
TEST(ExactMilp, CertifySecondsCloseTheWidestGapsWithValidBounds) {
  int narrowed = 0;
  for (std::uint32_t seed = 1; seed <= 4; ++seed) {
    const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 2, 2, 1, false}, 6, seed, 0.0005);
    const testing::BruteForce brute(problem);
    const CrawlResult crawl = crawl_frontier(problem);
    // Gaps left for the MILP: --certify 2's seconds, its raised shares taken back.
    FrontierOptions options = with_little_refinement(FrontierOptions{}.certify_for(2.0));
    options.default_effort.reset();  // this frontier alone
    FrontierOptions without = options;
    without.certify_exact_share = 0.0;
    const Frontier lp_only = build_frontier(problem, crawl, without);
    EXPECT_EQ(lp_only.certify_exact_solves, 0u);
    EXPECT_EQ(lp_only.certify_exact_raised, 0u);
    options.certify_exact_share = 0.5;
    const Frontier exact = build_frontier(problem, crawl, options);
    const auto worst_gap = [](const Frontier& frontier) {
      double worst = 0.0;
      for (const FrontierPoint& point : frontier.points) {
        worst = std::max(worst, point.measured.energy_j / *point.lower_bound_j - 1.0);
      }
      return worst;
    };
    // The deadline priced instead (lines that hold at every deadline): bounds as valid.
    options.certify_exact_priced = true;
    const Frontier priced = build_frontier(problem, crawl, options);
    if (worst_gap(lp_only) > options.certify_target_gap) {
      EXPECT_GT(priced.certify_exact_solves, 0u) << "seed " << seed;
    }
    for (const Frontier* built : {&exact, &priced}) {
      for (const FrontierPoint& point : built->points) {
        ASSERT_TRUE(point.lower_bound_j.has_value());
        const double optimum = brute.optimum_energy_at(point.measured.time_s);
        EXPECT_LE(*point.lower_bound_j, optimum + 1e-6 * optimum) << "seed " << seed << " at " << point.measured.time_s;
        EXPECT_LE(optimum, point.measured.energy_j + 1e-6 * optimum);
      }
    }
    const double before = worst_gap(lp_only);
    const double after = worst_gap(exact);
    if (before > options.certify_target_gap) {
      EXPECT_GT(exact.certify_exact_solves, 0u) << "seed " << seed;
      EXPECT_LE(exact.certify_exact_seconds, options.certify_seconds);
    }
    narrowed += after < before - 1e-9;
  }
  EXPECT_GT(narrowed, 0);
  std::cout << "the MILP narrowed the widest gap on " << narrowed << " of 4 pipelines\n";
}

TEST(ExactMilp, NoPlanBeforeTheFastestAndAStartThatMissesTheDeadlineIsIgnored) {
  const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 2, 2, 1, false}, 6, 3, 0.0005);
  const double fastest = evaluate_measured(problem, fastest_choice(problem)).time_s;
  EXPECT_FALSE(solve_exact(problem, 0.999 * fastest).has_value());
  // The slowest plan misses the fastest deadline: CBC finds a plan that meets it.
  const auto exact = solve_exact(problem, fastest, {.time_limit_s = 10.0, .start = slowest_choice(problem)});
  ASSERT_TRUE(exact.has_value());
  EXPECT_FALSE(exact->improved);  // there was no start to improve on
  EXPECT_LE(exact->measured.time_s, fastest + 1e-9);
  // A model larger than allowed is refused, saying how large.
  try {
    solve_exact(problem, fastest, {.time_limit_s = 1.0, .start = {}, .max_binaries = 10});
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("binaries, more than the 10"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace perseus
