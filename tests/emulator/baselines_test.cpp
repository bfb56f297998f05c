#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "fixtures.hpp"
#include "perseus/emulator/baselines.hpp"

namespace perseus {
namespace {

using testing::chosen_times;
using testing::random_problem;

const Measurement& chosen(const EnergyProblem& problem, const OptionChoice& choice, Dag::NodeId n) {
  return problem.chosen(n, choice).measurement;
}

int highest_clock(const OperationOptions& op) {
  int highest = 0;
  for (const Option& o : op.options) highest = std::max(highest, o.measurement.frequency_mhz);
  return highest;
}

TEST(Baselines, TheSameFrequencyIsTheLowestKeptClockAtOrAboveIt) {
  const OperationOptions op = testing::make_operation(
      0, InstructionKind::kForward, {{1410, 0.10, 30.0}, {1200, 0.12, 25.0}, {1000, 0.15, 22.0}});
  auto clock = [&](int f) { return op.options[option_at_frequency(op, f)].measurement.frequency_mhz; };
  EXPECT_EQ(clock(1410), 1410);
  EXPECT_EQ(clock(1300), 1410);  // not kept: the next clock up, never slower than asked
  EXPECT_EQ(clock(1100), 1200);
  EXPECT_EQ(clock(1000), 1000);
  EXPECT_EQ(clock(600), 1000);
  EXPECT_EQ(clock(1500), 1410);  // above every clock: the highest
}

TEST(Baselines, AllMaxRunsEveryInstructionAtItsHighestClock) {
  const EnergyProblem problem = random_problem({ScheduleKind::k1F1B, 4, 6, 1, true}, 3);
  const BaselinePlan plan = all_max(problem);
  ASSERT_EQ(plan.choice.size(), problem.dag.num_nodes());
  for (std::size_t i = 0; i < plan.choice.size(); ++i) {
    const auto n = static_cast<Dag::NodeId>(i);
    EXPECT_EQ(chosen(problem, plan.choice, n).frequency_mhz, highest_clock(problem.options_of(n)));
  }
}

TEST(Baselines, ZeusGlobalScansOneClockForAllGpus) {
  const EnergyProblem problem = random_problem({ScheduleKind::k1F1B, 3, 4, 1, false}, 5);
  std::set<int> clocks;
  for (const OperationOptions& op : problem.operations) {
    for (const Option& o : op.options) clocks.insert(o.measurement.frequency_mhz);
  }
  const std::vector<BaselinePlan> plans = zeus_global(problem);
  ASSERT_EQ(plans.size(), clocks.size());
  auto expected = clocks.rbegin();
  for (const BaselinePlan& plan : plans) {
    const int f = *expected++;
    EXPECT_EQ(plan.setting, std::to_string(f) + " MHz");
    for (std::size_t i = 0; i < plan.choice.size(); ++i) {
      const auto n = static_cast<Dag::NodeId>(i);
      const int got = chosen(problem, plan.choice, n).frequency_mhz;
      // Exactly f where the operation kept it; otherwise its next kept clock up.
      int want = highest_clock(problem.options_of(n));
      for (const Option& o : problem.options_of(n).options) {
        if (o.measurement.frequency_mhz >= f) want = std::min(want, o.measurement.frequency_mhz);
      }
      EXPECT_EQ(got, want);
    }
  }
  EXPECT_EQ(plans.front().choice, all_max(problem).choice);
}

TEST(Baselines, ZeusPerStageBalancesForwardTimesAgainstTheBottleneck) {
  const EnergyProblem problem = random_problem({ScheduleKind::k1F1B, 4, 4, 1, false}, 17);
  const std::vector<BaselinePlan> plans = zeus_per_stage(problem);
  ASSERT_FALSE(plans.empty());
  auto forward_op = [&](int stage) -> const OperationOptions& {
    for (const OperationOptions& op : problem.operations) {
      if (op.stage == stage && op.kind == InstructionKind::kForward) return op;
    }
    throw std::logic_error("no forward");
  };
  auto forward_time = [&](int stage, int f) {
    const OperationOptions& op = forward_op(stage);
    return op.options[option_at_frequency(op, f)].measurement.time_s;
  };
  int bottleneck = 0;
  for (int s = 1; s < 4; ++s) {
    if (forward_time(s, 1410) > forward_time(bottleneck, 1410)) bottleneck = s;
  }
  std::set<int> bottleneck_clocks;  // the bottleneck stage scans every clock it has
  for (const OperationOptions& op : problem.operations) {
    if (op.stage != bottleneck) continue;
    for (const Option& o : op.options) bottleneck_clocks.insert(o.measurement.frequency_mhz);
  }
  EXPECT_EQ(plans.size(), bottleneck_clocks.size());
  for (const BaselinePlan& plan : plans) {
    // Every instruction of a stage at the stage's one clock.
    const std::vector<int>& clock = plan.stage_clock_mhz;
    ASSERT_EQ(clock.size(), 4u);
    for (int s = 0; s < 4; ++s) {
      for (Dag::NodeId n : problem.dag.stage_nodes(s)) {
        EXPECT_EQ(plan.choice[n], option_at_frequency(problem.options_of(n), clock[s]));
      }
    }
    const double target = forward_time(bottleneck, clock[bottleneck]);
    for (int s = 0; s < 4; ++s) {
      if (s == bottleneck) continue;
      EXPECT_LE(forward_time(s, clock[s]), target + 1e-12) << plan.setting;
      // And no lower clock of the stage would still keep up.
      for (const OperationOptions& op : problem.operations) {
        if (op.stage != s) continue;
        for (const Option& o : op.options) {
          if (o.measurement.frequency_mhz < clock[s]) {
            EXPECT_GT(forward_time(s, o.measurement.frequency_mhz), target);
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
    const BaselinePlan max = all_max(problem);
    const BaselinePlan env = envpipe(problem);
    const MeasuredFigures a = evaluate_measured(problem, max.choice);
    const MeasuredFigures e = evaluate_measured(problem, env.choice);
    EXPECT_NEAR(e.time_s, a.time_s, 1e-9);
    EXPECT_LT(e.energy_j, a.energy_j);  // there is slack off the last stage to fill
    for (Dag::NodeId n : problem.dag.stage_nodes(spec.stages - 1)) EXPECT_EQ(env.choice[n], max.choice[n]);
    // Nothing more fits: no instruction could run at a lower clock without slowing the iteration.
    const std::vector<double> t = chosen_times(problem, env.choice);
    std::vector<double> es, lf;
    windows(problem.dag, t, a.time_s, es, lf);
    for (int s = 0; s < spec.stages - 1; ++s) {
      for (Dag::NodeId n : problem.dag.stage_nodes(s)) {
        const int clock = chosen(problem, env.choice, n).frequency_mhz;
        for (const Option& o : problem.options_of(n).options) {
          if (o.measurement.frequency_mhz < clock) {
            EXPECT_GT(o.measurement.time_s, lf[n] - es[n] - 1e-12);
          }
        }
      }
    }
  }
}

TEST(Baselines, EvaluationEmulatesAndMarksTheParetoOptimalPoints) {
  const EnergyProblem problem = random_problem({ScheduleKind::k1F1B, 4, 6, 1, false}, 29);
  std::vector<BaselinePlan> plans = zeus_global(problem);
  plans.push_back(envpipe(problem));
  const std::vector<BaselinePoint> points = evaluate_baselines(problem, plans);
  ASSERT_EQ(points.size(), plans.size());
  for (std::size_t i = 0; i < points.size(); ++i) {
    const MeasuredFigures m = evaluate_measured(problem, plans[i].choice);
    EXPECT_NEAR(points[i].time_s, m.time_s, 1e-12);
    EXPECT_NEAR(points[i].energy_j, m.energy_j, 1e-9 * m.energy_j);
    bool dominated = false;
    for (const BaselinePoint& q : points) {
      dominated |= q.time_s <= points[i].time_s && q.energy_j <= points[i].energy_j &&
                   (q.time_s < points[i].time_s || q.energy_j < points[i].energy_j);
    }
    EXPECT_EQ(points[i].pareto, !dominated);
  }
  // The fastest ZeusGlobal point (all-max) is never dominated by a slower ZeusGlobal point.
  EXPECT_TRUE(std::any_of(points.begin(), points.end(), [](const BaselinePoint& p) { return p.pareto; }));
}

}  // namespace
}  // namespace perseus
