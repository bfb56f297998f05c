// The comparison tables against brute force over the emulated points, and the straggler
// table against the core's own T_opt selection and iteration-energy formula.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>

#include "perseus/emulator/comparison.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/solver/crawl.hpp"
#include "synthetic.hpp"

namespace perseus {
namespace {

double relative(double expected) { return 1e-9 * std::max(1.0, std::abs(expected)); }

struct Solved {
  EnergyProblem problem;
  Frontier frontier;
};

const Solved& synthetic_solved() {
  static const Solved solved = [] {
    EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 4, 6, 1, false}, 8, 5);
    FrontierOptions quick;
    quick.local_search_max_nodes = 0;  // slack reclaiming only: these tests need a frontier, not the best one
    Frontier frontier = build_frontier(problem, crawl_frontier(problem), quick);
    return Solved{std::move(problem), std::move(frontier)};
  }();
  return solved;
}

struct Figures {
  double time_s = 0.0, energy_j = 0.0;
};

// A clock plan's critical path and iteration energy over the table's measurements.
Figures figures_of(const EnergyProblem& problem, const FrequencyTable& table, const std::vector<std::int32_t>& clock) {
  std::vector<double> t(clock.size());
  double computation = 0.0, busy = 0.0;
  for (std::size_t i = 0; i < clock.size(); ++i) {
    const auto figures = *table.at(static_cast<std::size_t>(problem.node_operation[i]), clock[i], false);
    t[i] = figures.time_s;
    computation += figures.energy_j;
    busy += figures.time_s;
  }
  const double time = critical_path_length<double>(problem.dag, t);
  return {time, computation + problem.p_blocking * (problem.dag.num_stages() * time - busy)};
}

// Least energy over [0, window] among `points` no slower than it (brute force).
std::optional<double> least_within(const MethodCurve& curve, double window, double pb, int gpus) {
  std::optional<double> best;
  for (const MethodPoint& p : curve.points) {
    if (p.time_s > window * (1 + 1e-9)) continue;
    const double e = p.energy_j + pb * gpus * (window - p.time_s);
    if (!best || e < *best) best = e;
  }
  return best;
}

TEST(Comparison, TablesMatchBruteForceOverTheEmulatedPoints) {
  const auto& [problem, frontier] = synthetic_solved();
  const Comparison c = compare_methods(problem, frontier);
  const double pb = problem.p_blocking;
  const int gpus = problem.num_gpus();
  ASSERT_EQ(c.gpus_per_pipeline, gpus);
  ASSERT_EQ(c.methods.size(), 5u);

  // AllMax and Perseus's points: emulated with free links and instant switching, they are
  // exactly the measured figures.
  const FrequencyTable table = FrequencyTable::from_problem(problem);
  const Figures max = figures_of(problem, table, all_max(problem, table).clock_mhz);
  EXPECT_NEAR(c.all_max_time_s, max.time_s, relative(max.time_s));
  EXPECT_NEAR(c.all_max_energy_j, max.energy_j, relative(max.energy_j));
  const MethodCurve& perseus = c.method(kPerseus);
  ASSERT_EQ(perseus.points.size(), frontier.points.size());
  for (std::size_t i = 0; i < frontier.points.size(); ++i) {
    EXPECT_NEAR(perseus.points[i].time_s, frontier.points[i].measured.time_s, 1e-12);
    EXPECT_NEAR(perseus.points[i].energy_j, frontier.points[i].measured.energy_j, relative(max.energy_j));
  }
  EXPECT_DOUBLE_EQ(c.t_min_s, frontier.t_min_point().measured.time_s);
  EXPECT_DOUBLE_EQ(c.t_star_s, frontier.t_star_point().measured.time_s);

  // Iso-time and least-energy rows.
  ASSERT_EQ(c.iso_time.size(), c.methods.size());
  for (std::size_t m = 0; m < c.methods.size(); ++m) {
    const MethodCurve& curve = c.methods[m];
    const MethodRow& iso = c.iso_time[m];
    EXPECT_EQ(iso.method, curve.method);
    const auto expected = least_within(curve, c.all_max_time_s, pb, gpus);
    ASSERT_EQ(iso.available, expected.has_value()) << curve.method;
    if (expected) {
      EXPECT_NEAR(iso.energy_j, *expected, relative(*expected)) << curve.method;
      EXPECT_NEAR(iso.savings_j, c.all_max_energy_j - *expected, relative(*expected));
      EXPECT_NEAR(iso.savings_fraction, 1 - *expected / c.all_max_energy_j, 1e-12);
      EXPECT_LE(iso.time_s, c.all_max_time_s * (1 + 1e-9));
    }
    double least = std::numeric_limits<double>::infinity();
    for (const MethodPoint& p : curve.points) least = std::min(least, p.energy_j);
    EXPECT_DOUBLE_EQ(c.min_energy[m].energy_j, least) << curve.method;
  }
  EXPECT_NEAR(c.iso_time[1].savings_j, 0.0, 1e-9);  // AllMax against itself
  EXPECT_GT(c.iso_time[0].savings_fraction, 0.0);   // Perseus saves energy at iso-time

  // Stragglers: T' = ratio x T; Perseus runs the core's pick for T_opt = min(T*, T').
  ASSERT_EQ(c.stragglers.size(), 6u);
  for (const StragglerRow& row : c.stragglers) {
    SCOPED_TRACE(row.ratio);
    EXPECT_NEAR(row.t_prime_s, row.ratio * max.time_s, 1e-12);
    const double reference = max.energy_j + pb * gpus * (row.t_prime_s - max.time_s);
    for (std::size_t m = 0; m < row.methods.size(); ++m) {
      const MethodRow& r = row.methods[m];
      double expected = 0.0;
      if (r.method != kPerseus) {
        // A baseline whose fastest plan is slower than T' has no answer.
        const auto best = least_within(c.methods[m], row.t_prime_s, pb, gpus);
        ASSERT_EQ(r.available, best.has_value()) << r.method;
        if (!best) continue;
      }
      ASSERT_TRUE(r.available) << r.method;
      if (r.method == kPerseus) {
        const FrontierPoint* point = select_for_deadline(frontier, row.t_prime_s);
        ASSERT_NE(point, nullptr);
        expected = energy_at(problem, *point, row.t_prime_s);
        EXPECT_NEAR(r.time_s, point->measured.time_s, 1e-12);
      } else {
        expected = *least_within(c.methods[m], row.t_prime_s, pb, gpus);
      }
      EXPECT_NEAR(r.energy_j, expected, relative(expected)) << r.method;
      EXPECT_NEAR(r.savings_fraction, 1 - expected / reference, 1e-9) << r.method;
    }
    // Perseus answers a straggler at least as well as any baseline.
    for (const MethodRow& r : row.methods) {
      if (r.available) {
        EXPECT_LE(row.methods[0].energy_j, r.energy_j * (1 + 1e-9)) << r.method;
      }
    }
  }
}

TEST(Comparison, SwitchingLatencyAndLinksAreEmulatedForEveryMethod) {
  const auto& [problem, frontier] = synthetic_solved();
  ComparisonOptions options;
  options.emulation.switch_latency_s = 0.01;
  options.emulation.p2p = {0.001, 0.0};
  options.straggler_ratios = {1.2};
  const Comparison c = compare_methods(problem, frontier, options);
  const auto table = std::make_shared<const FrequencyTable>(FrequencyTable::from_problem(problem));
  // Every point is what emulate() says for that plan under the same configuration.
  EmulationConfig single = options.emulation;
  for (const MethodCurve& curve : c.methods) {
    for (std::size_t i = 0; i < curve.points.size(); i += 7) {
      const MethodPoint& p = curve.points[i];
      const EmulationResult r = emulate(problem, execution_plan(problem, p, table), single);
      EXPECT_DOUBLE_EQ(p.time_s, r.iteration_time_s) << curve.method << " " << p.setting;
      EXPECT_DOUBLE_EQ(p.energy_j, r.energy.total_j());
      EXPECT_EQ(p.late_switches, r.late_switches);
      EXPECT_GE(p.time_s, p.planned_time_s);  // links only add time here
    }
  }
}

TEST(Comparison, BadInputIsAClearError) {
  const auto& [problem, frontier] = synthetic_solved();
  ComparisonOptions below_one;
  below_one.straggler_ratios = {1.1, 0.9};
  try {
    compare_methods(problem, frontier, below_one);
    ADD_FAILURE() << "a ratio below 1 was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("must be >= 1"), std::string::npos) << e.what();
  }
  const EnergyProblem other = testing::synthetic_problem({ScheduleKind::k1F1B, 4, 7, 1, false}, 8, 5);
  try {
    compare_methods(other, frontier);
    ADD_FAILURE() << "a frontier of another problem was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("another problem"), std::string::npos) << e.what();
  }
  EXPECT_THROW(compare_methods(problem, Frontier{}), InputError);
}

TEST(LargeScale, EmulatesEveryPipelineAndMatchesThePerPipelineFigures) {
  const Profile profile = testing::synthetic_profile(4, 8, 21);
  const OptionsConfig config{0.001, 80.0, {}};
  LargeScaleOptions options;
  options.stages = 4;
  options.tensor_parallel = 2;
  options.global_microbatches = 16;
  options.frontier.local_search_max_nodes = 0;
  for (int m : {4, 8}) {
    const LargeScaleRow row = large_scale_row(profile, "synthetic", m, config, options);
    EXPECT_EQ(row.microbatches, m);
    EXPECT_EQ(row.pipelines, 16 / m);
    EXPECT_EQ(row.gpus, (16 / m) * 4 * 2);
    // The same problem solved here: each pipeline spends what one pipeline spends, times TP.
    std::vector<Warning> warnings;
    const EnergyProblem problem = make_problem(profile, {ScheduleKind::k1F1B, 4, m, 1, false}, config, &warnings);
    const Frontier frontier = build_frontier(problem, crawl_frontier(problem), options.frontier);
    EXPECT_EQ(row.frontier_points, frontier.points.size());
    const FrequencyTable measured = FrequencyTable::from_profile(problem, profile);
    const Figures max = figures_of(problem, measured, all_max(problem, measured).clock_mhz);
    for (const auto& p : measured.points(0)) ASSERT_LE(p.frequency_mhz, 1410);
    ASSERT_EQ(all_max(problem, measured).clock_mhz[0], 1410);  // the profile's top clock
    const double copies = row.pipelines * 2.0;
    EXPECT_NEAR(row.all_max_time_s, max.time_s, 1e-12);
    EXPECT_NEAR(row.all_max_energy_j, copies * max.energy_j, relative(copies * max.energy_j));
    double best = std::numeric_limits<double>::infinity();
    for (const FrontierPoint& p : frontier.points) {
      if (p.measured.time_s <= max.time_s * (1 + 1e-9)) best = std::min(best, energy_at(problem, p, max.time_s));
    }
    EXPECT_NEAR(row.perseus_energy_j, copies * best, relative(copies * best));
    EXPECT_NEAR(row.savings_fraction, 1 - best / max.energy_j, 1e-9);
    EXPECT_GT(row.savings_fraction, 0.0);
    EXPECT_NEAR(row.t_star_time_s, frontier.t_star_point().measured.time_s, 1e-12);
    EXPECT_NEAR(row.t_star_energy_j, copies * frontier.t_star_point().measured.energy_j, relative(row.t_star_energy_j));
  }
  EXPECT_THROW(large_scale_row(profile, "synthetic", 5, config, options), InputError);  // 5 does not divide 16
}

}  // namespace
}  // namespace perseus
