#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "fixtures.hpp"
#include "perseus/emulator/baselines.hpp"
#include "perseus/model/errors.hpp"

namespace perseus {
namespace {

using testing::random_problem;

std::size_t op_of(const EnergyProblem& problem, Dag::NodeId n) { return static_cast<std::size_t>(problem.node_operation[n]); }

int highest_clock(const FrequencyTable& table, std::size_t op) { return table.points(op).back().frequency_mhz; }

double time_at(const FrequencyTable& table, std::size_t op, int clock) { return table.at(op, clock, false)->time_s; }

std::vector<double> plan_times(const EnergyProblem& problem, const FrequencyTable& table, const BaselinePlan& plan) {
  std::vector<double> times(problem.dag.num_nodes());
  for (std::size_t i = 0; i < times.size(); ++i) times[i] = time_at(table, op_of(problem, static_cast<Dag::NodeId>(i)), plan.clock_mhz[i]);
  return times;
}

TEST(Baselines, TheSameFrequencyIsTheLowestMeasuredClockAtOrAboveIt) {
  const EnergyProblem problem = testing::make_test_problem(
      {ScheduleKind::k1F1B, 1, 1, 1, false}, 50.0, [](int, InstructionKind) -> std::vector<testing::Point> {
        return {{1410, 0.10, 30.0}, {1200, 0.12, 25.0}, {1000, 0.15, 22.0}};
      });
  const FrequencyTable table = FrequencyTable::from_problem(problem);
  auto clock = [&](int f) { return clock_for(table, 0, f); };
  EXPECT_EQ(clock(1410), 1410);
  EXPECT_EQ(clock(1300), 1410);  // not measured: the next clock up, never slower than asked
  EXPECT_EQ(clock(1100), 1200);
  EXPECT_EQ(clock(1000), 1000);
  EXPECT_EQ(clock(600), 1000);
  EXPECT_EQ(clock(1500), 1410);  // above every clock: the highest
}

TEST(Baselines, AllMaxRunsEveryInstructionAtItsHighestClock) {
  const EnergyProblem problem = random_problem({ScheduleKind::k1F1B, 4, 6, 1, true}, 3);
  const FrequencyTable table = FrequencyTable::from_problem(problem);
  const BaselinePlan plan = all_max(problem, table);
  ASSERT_EQ(plan.clock_mhz.size(), problem.dag.num_nodes());
  for (std::size_t i = 0; i < plan.clock_mhz.size(); ++i) {
    EXPECT_EQ(plan.clock_mhz[i], highest_clock(table, op_of(problem, static_cast<Dag::NodeId>(i))));
  }
}

// Real profiles are noisy: the top clock can be slower than the one below it, and the
// solver's Pareto filter then drops it. AllMax still runs the top clock, as training does.
TEST(Baselines, AllMaxRunsTheTopClockEvenWhereTheFilterDroppedIt) {
  std::vector<OperationProfile> rows;
  for (int s = 0; s < 2; ++s) {
    rows.push_back({s, InstructionKind::kForward,
                    {{"1410", 1410, 0.101, 30.0, 0}, {"1395", 1395, 0.100, 29.0, 0}, {"1200", 1200, 0.12, 25.0, 0},
                     {"1000", 1000, 0.15, 22.0, 0}, {"900", 900, 0.17, 21.0, 0}}});
    rows.push_back({s, InstructionKind::kBackward,
                    {{"1410", 1410, 0.202, 60.0, 0}, {"1395", 1395, 0.200, 58.0, 0}, {"1200", 1200, 0.24, 50.0, 0},
                     {"1000", 1000, 0.30, 44.0, 0}, {"900", 900, 0.34, 42.0, 0}}});
  }
  const Profile profile = Profile::from_operations("noisy.csv", rows);
  std::vector<Warning> warnings;
  const EnergyProblem problem = make_problem(profile, {ScheduleKind::k1F1B, 2, 4, 1, false}, {0.001, 60.0, {}}, &warnings);
  const auto measured = std::make_shared<const FrequencyTable>(FrequencyTable::from_profile(problem, profile));
  const auto kept = std::make_shared<const FrequencyTable>(FrequencyTable::from_problem(problem));
  ASSERT_EQ(highest_clock(*kept, 0), 1395) << "the filter should have dropped 1410 MHz";

  const BaselinePlan top = all_max(problem, *measured);
  for (std::int32_t clock : top.clock_mhz) EXPECT_EQ(clock, 1410);
  const EmulationResult r = emulate(problem, plan_from_clocks(problem, top.clock_mhz, measured), {});
  EXPECT_NEAR(r.iteration_time_s, (4 + 2 - 1) * (0.101 + 0.202), 1e-12);  // the closed form at 1410 MHz
  const BaselinePlan filtered = all_max(problem, *kept);
  const EmulationResult f = emulate(problem, plan_from_clocks(problem, filtered.clock_mhz, kept), {});
  EXPECT_NEAR(f.iteration_time_s, (4 + 2 - 1) * (0.100 + 0.200), 1e-12);
}

TEST(Baselines, ZeusGlobalScansOneClockForAllGpus) {
  const EnergyProblem problem = random_problem({ScheduleKind::k1F1B, 3, 4, 1, false}, 5);
  const FrequencyTable table = FrequencyTable::from_problem(problem);
  std::set<int> clocks;
  for (std::size_t op = 0; op < table.num_operations(); ++op) {
    if (table.is_constant(op)) continue;
    for (const auto& p : table.points(op)) clocks.insert(p.frequency_mhz);
  }
  const std::vector<BaselinePlan> plans = zeus_global(problem, table);
  ASSERT_EQ(plans.size(), clocks.size());
  auto expected = clocks.rbegin();
  for (const BaselinePlan& plan : plans) {
    const int f = *expected++;
    EXPECT_EQ(plan.setting, std::to_string(f) + " MHz");
    for (std::size_t i = 0; i < plan.clock_mhz.size(); ++i) {
      const std::size_t op = op_of(problem, static_cast<Dag::NodeId>(i));
      // Exactly f where the operation was measured there; otherwise its next clock up.
      int want = highest_clock(table, op);
      for (const auto& p : table.points(op)) {
        if (p.frequency_mhz >= f) want = std::min(want, p.frequency_mhz);
      }
      EXPECT_EQ(plan.clock_mhz[i], want);
    }
  }
  EXPECT_EQ(plans.front().clock_mhz, all_max(problem, table).clock_mhz);
}

TEST(Baselines, ZeusGlobalAtOneClockRefusesClocksNeverMeasured) {
  // Forward measured at 1410/1200/1000 MHz, backward at 1410/1100/1000.
  const EnergyProblem problem = testing::make_test_problem(
      {ScheduleKind::k1F1B, 1, 1, 1, false}, 50.0, [](int, InstructionKind kind) -> std::vector<testing::Point> {
        if (kind == InstructionKind::kForward) return {{1410, 0.10, 30.0}, {1200, 0.12, 25.0}, {1000, 0.15, 22.0}};
        return {{1410, 0.20, 60.0}, {1100, 0.25, 52.0}, {1000, 0.30, 44.0}};
      });
  const auto table = std::make_shared<const FrequencyTable>(FrequencyTable::from_problem(problem));
  const auto message = [&](int f, bool interpolate) {
    try {
      zeus_global_plan(problem, table, f, interpolate);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // Outside the measured range: an error naming the clock and the range, interpolating or not.
  for (const bool interpolate : {false, true}) {
    for (const int f : {3000, 1411, 999, 100}) {
      const std::string m = message(f, interpolate);
      EXPECT_NE(m.find(std::to_string(f) + " MHz: outside the measured clocks, 1000..1410 MHz"), std::string::npos) << m;
    }
  }
  // Inside the range but measured by no operation: only with interpolation.
  const std::string m = message(1300, false);
  EXPECT_NE(m.find("1300 MHz: not a measured clock"), std::string::npos) << m;
  EXPECT_NE(m.find("1200 and 1410 MHz"), std::string::npos) << m;
  const ExecutionPlan between = zeus_global_plan(problem, table, 1300, true);
  EXPECT_EQ(between.frequency_mhz, (std::vector<std::int32_t>{1300, 1300}));
  EXPECT_NEAR(between.time_s[0], 0.12 - 0.02 * 100 / 210.0, 1e-12);
  EXPECT_NEAR(between.energy_j[1], 52.0 + 8.0 * 200 / 310.0, 1e-12);
  // Measured by one operation: the others take their next clock up, as in the scan.
  const ExecutionPlan at_1200 = zeus_global_plan(problem, table, 1200);
  EXPECT_EQ(at_1200.frequency_mhz, (std::vector<std::int32_t>{1200, 1410}));
  EXPECT_EQ(zeus_global_plan(problem, table, 1100, true).frequency_mhz, (std::vector<std::int32_t>{1200, 1100}));
  EXPECT_EQ(zeus_global_plan(problem, table, 1410).time_s, (std::vector<double>{0.10, 0.20}));
}

TEST(Baselines, ZeusPerStageBalancesForwardTimesAgainstTheBottleneck) {
  const EnergyProblem problem = random_problem({ScheduleKind::k1F1B, 4, 4, 1, false}, 17);
  const FrequencyTable table = FrequencyTable::from_problem(problem);
  const std::vector<BaselinePlan> plans = zeus_per_stage(problem, table);
  ASSERT_FALSE(plans.empty());
  auto forward_op = [&](int stage) {
    for (std::size_t o = 0; o < problem.operations.size(); ++o) {
      if (problem.operations[o].stage == stage && problem.operations[o].kind == InstructionKind::kForward) return o;
    }
    throw std::logic_error("no forward");
  };
  auto forward_time = [&](int stage, int f) {
    const std::size_t op = forward_op(stage);
    return time_at(table, op, clock_for(table, op, f));
  };
  int bottleneck = 0;
  for (int s = 1; s < 4; ++s) {
    if (forward_time(s, 1410) > forward_time(bottleneck, 1410)) bottleneck = s;
  }
  std::set<int> bottleneck_clocks;  // the bottleneck stage scans every clock it has
  for (std::size_t o = 0; o < problem.operations.size(); ++o) {
    if (problem.operations[o].stage != bottleneck) continue;
    for (const auto& p : table.points(o)) bottleneck_clocks.insert(p.frequency_mhz);
  }
  EXPECT_EQ(plans.size(), bottleneck_clocks.size());
  for (const BaselinePlan& plan : plans) {
    // Every instruction of a stage at the stage's one clock.
    const std::vector<int>& clock = plan.stage_clock_mhz;
    ASSERT_EQ(clock.size(), 4u);
    for (int s = 0; s < 4; ++s) {
      for (Dag::NodeId n : problem.dag.stage_nodes(s)) EXPECT_EQ(plan.clock_mhz[n], clock_for(table, op_of(problem, n), clock[s]));
    }
    const double target = forward_time(bottleneck, clock[bottleneck]);
    for (int s = 0; s < 4; ++s) {
      if (s == bottleneck) continue;
      EXPECT_LE(forward_time(s, clock[s]), target + 1e-12) << plan.setting;
      // And no lower clock of the stage would still keep up.
      for (std::size_t o = 0; o < problem.operations.size(); ++o) {
        if (problem.operations[o].stage != s) continue;
        for (const auto& p : table.points(o)) {
          if (p.frequency_mhz < clock[s]) {
            EXPECT_GT(forward_time(s, p.frequency_mhz), target);
          }
        }
      }
    }
  }
}

// Earliest start and latest finish with the iteration held at `deadline` (test's own passes).
void windows(const Dag& dag, const std::vector<double>& t, double deadline, std::vector<double>& es, std::vector<double>& lf) {
  es.assign(dag.num_nodes(), 0.0);
  lf.assign(dag.num_nodes(), deadline);
  for (Dag::NodeId n : dag.topological_order()) {
    for (Dag::NodeId p : dag.predecessors(n)) es[n] = std::max(es[n], es[p] + t[p]);
  }
  const auto& order = dag.topological_order();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    for (Dag::NodeId s : dag.successors(*it)) lf[*it] = std::min(lf[*it], lf[s] - t[s]);
  }
}

TEST(Baselines, EnvPipeFillsSlackWithoutSlowingTheIteration) {
  for (const ScheduleSpec spec : {ScheduleSpec{ScheduleKind::k1F1B, 4, 8, 1, false},
                                  ScheduleSpec{ScheduleKind::kGPipe, 3, 4, 1, false}}) {
    const EnergyProblem problem = random_problem(spec, 23);
    const auto table = std::make_shared<const FrequencyTable>(FrequencyTable::from_problem(problem));
    const BaselinePlan max = all_max(problem, *table);
    const BaselinePlan env = envpipe(problem, *table);
    const EmulationResult a = emulate(problem, plan_from_clocks(problem, max.clock_mhz, table), {});
    const EmulationResult e = emulate(problem, plan_from_clocks(problem, env.clock_mhz, table), {});
    EXPECT_NEAR(e.iteration_time_s, a.iteration_time_s, 1e-9);
    EXPECT_LT(e.energy.total_j(), a.energy.total_j());  // there is slack off the last stage to fill
    for (Dag::NodeId n : problem.dag.stage_nodes(spec.stages - 1)) EXPECT_EQ(env.clock_mhz[n], max.clock_mhz[n]);
    // Nothing more fits: no instruction could run at a lower clock without slowing the iteration.
    const std::vector<double> t = plan_times(problem, *table, env);
    std::vector<double> es, lf;
    windows(problem.dag, t, a.iteration_time_s, es, lf);
    for (int s = 0; s < spec.stages - 1; ++s) {
      for (Dag::NodeId n : problem.dag.stage_nodes(s)) {
        for (const auto& p : table->points(op_of(problem, n))) {
          if (p.frequency_mhz < env.clock_mhz[n]) {
            EXPECT_GT(p.time_s, lf[n] - es[n] - 1e-12);
          }
        }
      }
    }
  }
}

TEST(Baselines, EvaluationEmulatesAndMarksTheParetoOptimalPoints) {
  const EnergyProblem problem = random_problem({ScheduleKind::k1F1B, 4, 6, 1, false}, 29);
  const auto table = std::make_shared<const FrequencyTable>(FrequencyTable::from_problem(problem));
  std::vector<BaselinePlan> plans = zeus_global(problem, *table);
  plans.push_back(envpipe(problem, *table));
  const std::vector<BaselinePoint> points = evaluate_baselines(problem, plans, table);
  ASSERT_EQ(points.size(), plans.size());
  for (std::size_t i = 0; i < points.size(); ++i) {
    // Independently: the critical path over the clocks' measured times, blocking in between.
    const std::vector<double> t = plan_times(problem, *table, plans[i]);
    const double time = critical_path_length<double>(problem.dag, t);
    double computation = 0.0, busy = 0.0;
    for (std::size_t n = 0; n < t.size(); ++n) {
      computation += table->at(op_of(problem, static_cast<Dag::NodeId>(n)), plans[i].clock_mhz[n], false)->energy_j;
      busy += t[n];
    }
    const double energy = computation + problem.p_blocking * (problem.dag.num_stages() * time - busy);
    EXPECT_NEAR(points[i].time_s, time, 1e-12);
    EXPECT_NEAR(points[i].energy_j, energy, 1e-9 * energy);
    bool dominated = false;
    for (const BaselinePoint& q : points) {
      dominated |= q.time_s <= points[i].time_s && q.energy_j <= points[i].energy_j &&
                   (q.time_s < points[i].time_s || q.energy_j < points[i].energy_j);
    }
    EXPECT_EQ(points[i].pareto, !dominated);
  }
  EXPECT_TRUE(std::any_of(points.begin(), points.end(), [](const BaselinePoint& p) { return p.pareto; }));
  EXPECT_THROW(plan_from_clocks(problem, std::vector<std::int32_t>(3, 1410), table), InputError);  // wrong size
  std::vector<std::int32_t> unmeasured = plans.front().clock_mhz;
  unmeasured[0] = 1411;
  EXPECT_THROW(plan_from_clocks(problem, unmeasured, table), InputError);
}

}  // namespace
}  // namespace perseus
